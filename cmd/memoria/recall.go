package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

func recallCmd(g *globals) *cobra.Command {
	var sona, scope, agent string
	var k, budget, expand int
	var asOf int64
	var explain bool
	cmd := &cobra.Command{
		Use:   "recall --sona NAME QUERY",
		Short: "Show the memories a sona would recall for a query, with their scores",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, rec, release, err := g.connectSona(ctx, sona, false)
			if err != nil {
				return err
			}
			defer release()
			req := &messages.RecallRequest{Query: strings.Join(args, " "), K: int32(k), BudgetChars: int32(budget),
				Explain: explain, Scope: scope, AgentId: agent}
			if cmd.Flags().Changed("as-of") {
				req.AsOf = &asOf
			}
			if cmd.Flags().Changed("expand") {
				req.Expand = proto.Int32(int32(max(min(expand, math.MaxInt32), math.MinInt32)))
			}
			resp, err := c.Recall(ctx, rec.Uuid, req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			printRecall(cmd.OutOrStdout(), resp, explain)
			return nil
		},
	}
	cmd.Flags().StringVar(&sona, "sona", "", "sona uuid or name")
	cmd.Flags().IntVarP(&k, "k", "k", 0, "ranked hits to return (default recall.top_k)")
	cmd.Flags().IntVar(&expand, "expand", 0, "at most this many memories beyond the hits, reached from them (default: recall.expand_per_hit per hit)")
	cmd.Flags().IntVar(&budget, "budget", 0, "character budget (default from config)")
	cmd.Flags().BoolVar(&explain, "explain", false, "show every score component and the path each memory came by")
	cmd.Flags().Int64Var(&asOf, "as-of", 0, "time travel: an ACT seq of the sona, or unix seconds (≥ 1000000000)")
	cmd.Flags().StringVar(&scope, "scope", "", "sona (this sona and the backbone) or self (every sona, weighted by similarity); default recall.scope")
	cmd.Flags().StringVar(&agent, "agent", "", "agent id (co-access is learnt per agent)")
	clientFlags(cmd, g)
	return cmd
}

// printRecall prints a recall result for people: the hits in rank order,
// then what co-access and expansion added, best score first; the order
// the model gets (topological) is the "topo" column. A memory that
// absorbed near-identical ones says how many. With explain, every score
// component (CTX, TIME, SPKR, SESS, REPLY: the context, time, speaker,
// session and reply evidence; FEEDBK: the pseudo-relevance feedback
// path).
func printRecall(w io.Writer, resp *messages.RecallResponse, explain bool) {
	topo := make(map[*messages.RecalledMemory]int, len(resp.Memories))
	var hits, more []*messages.RecalledMemory
	for i, m := range resp.Memories {
		topo[m] = i + 1
		if m.Rank != nil {
			hits = append(hits, m)
		} else {
			more = append(more, m)
		}
	}
	slices.SortStableFunc(hits, func(a, b *messages.RecalledMemory) int { return cmp.Compare(a.GetRank(), b.GetRank()) })
	slices.SortStableFunc(more, func(a, b *messages.RecalledMemory) int { return cmp.Compare(b.Score, a.Score) })

	section := func(title string, rows []*messages.RecalledMemory, hit bool) {
		fmt.Fprintln(w, title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		first := "#"
		if !hit {
			first = "VIA"
		}
		if explain {
			fmt.Fprintf(tw, "%s\tSCORE\tDENSE\tBM25\tAFFIN\tMETRIC\tFEEDBK\tREL\tKIND\tCTX\tTIME\tSPKR\tSESS\tREPLY\tRECENCY\tIMP\tSONA\tCOACC\tPATH\tTOPO\tCID\tMEMORY\n", first)
		} else {
			fmt.Fprintf(tw, "%s\tSCORE\tTOPO\tCID\tMEMORY\n", first)
		}
		for _, m := range rows {
			lead := m.Via
			if hit {
				lead = fmt.Sprint(m.GetRank())
			}
			text := excerpt(memoryText(m.Memory), 56)
			if n := len(m.Collapsed); n > 0 {
				text += fmt.Sprintf(" (+%d alike)", n)
			}
			if !explain {
				fmt.Fprintf(tw, "%s\t%.3f\t%d\t%s\t%s\n", lead, m.Score, topo[m], shortCID(m.Cid), text)
				continue
			}
			e := m.GetExplain()
			fmt.Fprintf(tw, "%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%d\t%s\t%s\n", lead, m.Score,
				ranked(e.GetDense(), e.GetDenseRank()), ranked(e.GetBm25(), e.GetBm25Rank()), ranked(e.GetAffinity(), e.GetAffinityRank()), ranked(e.GetMetric(), e.GetMetricRank()),
				ranked(e.GetFeedback(), e.GetFeedbackRank()), e.GetRelevance(), e.GetKindWeight(), e.GetContext(), e.GetTime(), e.GetSpeaker(), e.GetSession(), e.GetReply(), e.GetRecency(), e.GetImportance(), e.GetSonaSimilarity(), e.GetCoaccess(),
				e.GetContributions().GetPath(), topo[m], shortCID(m.Cid), text)
		}
		tw.Flush()
	}
	if len(hits) == 0 {
		fmt.Fprintln(w, "no memories recalled")
		return
	}
	section(fmt.Sprintf("%d hits, best first:", len(hits)), hits, true)
	if len(more) > 0 {
		fmt.Fprintln(w)
		section(fmt.Sprintf("%d more reached from the hits (along edges: expansion; co-access partners: coaccess):", len(more)), more, false)
	}
	fmt.Fprintf(w, "\nTOPO: the place in the context a model is given (topological order: what a memory builds on comes first).\n")
}

// ranked shows a path's evidence with its rank, or "-" when the path did
// not find the memory.
func ranked(v float64, rank int32) string {
	if rank == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f#%d", v, rank)
}

// memoryText renders a memory's data in one line for tables.
func memoryText(m *messages.Memory) string {
	f := m.GetData().GetFields()
	switch f["kind"].GetStringValue() {
	case "self":
		var parts []string
		for _, p := range f["parts"].GetListValue().GetValues() {
			parts = append(parts, p.GetStructValue().GetFields()["content"].GetStringValue())
		}
		return f["name"].GetStringValue() + ": " + strings.Join(parts, " ")
	case "other":
		if n := f["name"].GetStringValue(); n != "" {
			return n + ": " + f["content"].GetStringValue()
		}
		return f["content"].GetStringValue()
	case "text":
		return f["content"].GetStringValue()
	case "file":
		return "[file " + f["name"].GetStringValue() + "]"
	}
	return ""
}
