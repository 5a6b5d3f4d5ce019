package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/messages"
)

// checkFormat accepts the one export format there is.
func checkFormat(format string) error {
	if format != "json" {
		return fmt.Errorf("--format %q is not supported: use json (CAR export comes with the gateway)", format)
	}
	return nil
}

func exportCmd(g *globals) *cobra.Command {
	var format, sona, out string
	var all bool
	cmd := &cobra.Command{
		Use:   "export --format json (--sona NAME | --all) [--out FILE]",
		Short: "Write Living Memory's JSON export of a sona or of every sona",
		Long: "Write the JSON export (format memoria-export/1) of one sona — with the backbone and the chain\n" +
			"prefixes of other sonas its memories link to — or of every sona: memories with their metadata,\n" +
			"associations and embeddings, the chains, pending consensus, conflicts and anchors. It is one\n" +
			"consistent snapshot; `memoria import` reads it back. With --out the file appears only once\n" +
			"the export is complete.",
		Example: "  memoria export --format json --all --out self.json\n" +
			"  memoria export --format json --sona alice > alice.json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if all == (sona != "") {
				return fmt.Errorf("name what to export: --sona NAME or --all")
			}
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			rc, err := c.Export(ctx, sona, all)
			if err != nil {
				return err
			}
			defer rc.Close()
			if out == "" || out == "-" {
				if _, err := io.Copy(cmd.OutOrStdout(), rc); err != nil {
					return fmt.Errorf("export cut short: %v", err)
				}
				return nil
			}
			n, err := writeFileAtomic(out, rc)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d bytes to %s\n", n, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "json", "export format: json")
	f.StringVar(&sona, "sona", "", "sona uuid or name")
	f.BoolVar(&all, "all", false, "export every sona")
	f.StringVarP(&out, "out", "o", "", "write to FILE instead of stdout")
	f.StringVar(&g.server, "server", "", "URL of a running server (default: open the data directory in this process)")
	return cmd
}

// writeFileAtomic writes r to path through a temporary file in the same
// directory, renamed into place once complete and synced.
func writeFileAtomic(path string, r io.Reader) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".part-*")
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(tmp, r)
	if err != nil {
		err = fmt.Errorf("export cut short: %v", err)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	return n, nil
}

func importCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "import --format json FILE",
		Short: "Import a JSON export: sonas, chains, metadata, associations, backbone, consensus, anchors",
		Long: "Import a JSON export (FILE, or - for stdin). The whole file is checked before anything is\n" +
			"written. Sonas keep their uuids and chains their memory and ACT CIDs: each chain is replayed\n" +
			"through its sona's actor. A sona the store already holds with a prefix of the exported chain\n" +
			"is continued, so an interrupted import can be run again; any other difference is refused.",
		Example: "  memoria import --format json self.json\n" +
			"  memoria import --format json --server http://127.0.0.1:7777 - < self.json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			var in io.Reader = cmd.InOrStdin()
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			res, err := c.Import(ctx, in)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "imported %d sonas, %d memories (%d ACTs appended), %d blocks, %d anchors, %d pending concepts, %d conflicts\n",
				len(res.Sonas), res.Memories, res.Appended, res.Blocks, res.Anchors, res.Pending, res.Conflicts)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "UUID\tNAME\tLENGTH\tAPPENDED")
			for _, s := range res.Sonas {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", s.Uuid, s.Name, s.Length, s.Appended)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&format, "format", "json", "export format: json")
	clientFlags(cmd, g)
	return cmd
}

func anchorsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "anchors",
		Short: "List the anchors: memories found significant (milestone, decision, incident) when appended",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			items, err := allPages(func(cursor string) ([]*messages.Anchor, string, error) {
				page, err := c.Anchors(ctx, cursor, 1000)
				return page.GetItems(), page.GetNextCursor(), err
			})
			if err != nil {
				return err
			}
			all := &messages.AnchorList{Items: append([]*messages.Anchor{}, items...)}
			if g.json {
				return printJSON(cmd.OutOrStdout(), all)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tCATEGORY\tSONA\tCID")
			for _, a := range all.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", time.Unix(a.Time, 0).UTC().Format(time.RFC3339), a.Category, a.Sona, a.Cid)
			}
			return tw.Flush()
		},
	}
	clientFlags(cmd, g)
	return cmd
}
