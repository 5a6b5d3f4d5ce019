package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/messages"
)

func forgetCmd(g *globals) *cobra.Command {
	var (
		req          messages.ForgetRequest
		since, until string
	)
	cmd := &cobra.Command{
		Use:   "forget [CID…]",
		Short: "Forget memories for good: excise their content, keep a tombstone",
		Long: "forget excises memories (POST /forget with --server; otherwise the data directory, with no server\n" +
			"running on it): their blocks, embeddings, full-text entries, metadata, tier pages and links are\n" +
			"removed in one durable operation per batch, their CIDs stay in the chains, and a tombstone (CID,\n" +
			"when, why, by whom) records each. Reading one then answers 410 Gone. Select by CID (arguments),\n" +
			"--sona, --label, --agent, --since/--until (together: the memories matching all of them) and\n" +
			"--derived-from (what the DAG's reverse edges reach from those memories). An insight or a merge\n" +
			"that restated a forgotten memory is forgotten with it. --dry-run lists what would go. --purge then\n" +
			"runs a pass of the garbage collection, so that the bytes leave the files now.",
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Cids = args
			var err error
			if req.Since, err = unixArg("since", since); err != nil {
				return err
			}
			if req.Until, err = unixArg("until", until); err != nil {
				return err
			}
			c, release, err := g.connect(cmd.Context())
			if err != nil {
				return err
			}
			defer release()
			rep, err := c.Forget(cmd.Context(), &req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			printForget(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.Sona, "sona", "", "a sona (uuid or name): its memories")
	f.StringVar(&req.Label, "label", "", "key or key=value: the memories with that label")
	f.StringVar(&req.AgentId, "agent", "", "the memories this agent wrote")
	f.StringVar(&since, "since", "", "the memories created at or after this time (RFC 3339 or unix seconds)")
	f.StringVar(&until, "until", "", "the memories created before this time (RFC 3339 or unix seconds)")
	f.StringSliceVar(&req.DerivedFrom, "derived-from", nil, "also everything derived from these memories (CIDs)")
	f.StringVar(&req.Reason, "reason", "", "why: recorded in the tombstones")
	f.BoolVar(&req.DryRun, "dry-run", false, "list what would be forgotten; forget nothing")
	f.BoolVar(&req.Purge, "purge", false, "then run a garbage-collection pass, so that the bytes leave the files now (admin)")
	clientFlags(cmd, g)
	return cmd
}

// unixArg reads a time flag: RFC 3339 or unix seconds ("" is unset).
func unixArg(name, v string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return &n, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: write RFC 3339 (2025-01-02T15:04:05Z) or unix seconds", name, v)
	}
	n := t.Unix()
	return &n, nil
}

func printForget(w io.Writer, rep *messages.ForgetReport) {
	verb := "forgot"
	if rep.DryRun {
		verb = "would forget"
	}
	fmt.Fprintf(w, "%s %d memories and %d files", verb, rep.Memories, rep.Files)
	if rep.Already > 0 {
		fmt.Fprintf(w, " (%d named were forgotten before)", rep.Already)
	}
	if !rep.DryRun {
		fmt.Fprintf(w, " in %d batches, %s", rep.Batches, time.Duration(rep.TookSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	for _, t := range rep.Items {
		fmt.Fprintf(w, "  %s  %-6s %-8s %s\n", t.Cid, t.Kind, t.Rule, strings.Join(t.Sonas, ","))
	}
	if rep.Truncated > 0 {
		fmt.Fprintf(w, "  … and %d more\n", rep.Truncated)
	}
	if rep.Purge != nil {
		printGC(w, rep.Purge)
	}
}
