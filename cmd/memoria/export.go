package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/messages"
)

// exportFormat picks the export format: --format, else car for an --out
// file named *.car, else json.
func exportFormat(format, out string) (string, error) {
	switch format {
	case "json", "car":
		return format, nil
	case "":
		if strings.EqualFold(filepath.Ext(out), ".car") {
			return "car", nil
		}
		return "json", nil
	}
	return "", fmt.Errorf("--format %q is not supported: use json or car", format)
}

// importFormat picks the import format: --format, else by the file's name
// (*.car, *.json), else by its first byte (a JSON export starts with {).
func importFormat(format, name string, in *bufio.Reader) (string, error) {
	switch format {
	case "json", "car":
		return format, nil
	case "":
	default:
		return "", fmt.Errorf("--format %q is not supported: use json or car", format)
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".car":
		return "car", nil
	case ".json":
		return "json", nil
	}
	for {
		b, err := in.Peek(1)
		if err != nil {
			return "", fmt.Errorf("%s: cannot read: %v", name, err)
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			in.ReadByte()
			continue
		case '{':
			return "json", nil
		}
		return "car", nil
	}
}

// counter counts the bytes read through it into a progress bar.
type counter struct {
	r    io.Reader
	n    int64
	prog *progress
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.prog.set(int(c.n))
	return n, err
}

func exportCmd(g *globals) *cobra.Command {
	var format, sona, out string
	var all bool
	cmd := &cobra.Command{
		Use:   "export (--sona NAME | --all) [--format json|car] [--out FILE]",
		Short: "Write the export of a sona or of every sona: Living Memory's JSON, or a CAR",
		Long: "Write the export of one sona — with the backbone and the chain prefixes of other sonas its\n" +
			"memories link to — or of every sona, from one consistent snapshot.\n\n" +
			"--format json (memoria-export/1): memories with their metadata, associations and embeddings,\n" +
			"the chains, pending consensus, conflicts and anchors, as one JSON document.\n" +
			"--format car (the default for an --out FILE.car): a CAR v1 whose roots are the sonas' heads,\n" +
			"the anchored memories and a manifest holding what blocks cannot (names, metadata, …), with\n" +
			"every block they reach. `memoria import` reads either back. With --out the file appears only\n" +
			"once the export is complete.",
		Example: "  memoria export --all --out self.car\n" +
			"  memoria export --format json --all --out self.json\n" +
			"  memoria export --format json --sona alice > alice.json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := exportFormat(format, out)
			if err != nil {
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
			var rc io.ReadCloser
			size := int64(-1)
			if format == "car" {
				rc, size, err = c.ExportCAR(ctx, sona, all)
			} else {
				rc, err = c.Export(ctx, sona, all)
			}
			if err != nil {
				return err
			}
			defer rc.Close()
			var body io.Reader = rc
			prog := newProgress(cmd.ErrOrStderr(), g.json || size < 0)
			if size >= 0 {
				prog.start("exporting bytes", int(size))
				body = &counter{r: rc, prog: prog}
			}
			if out == "" || out == "-" {
				_, err := io.Copy(cmd.OutOrStdout(), body)
				prog.done()
				if err != nil {
					return fmt.Errorf("export cut short: %v", err)
				}
				return nil
			}
			n, err := durable.WriteFile(out, &sized{r: body, want: size})
			prog.done()
			if err != nil {
				return fmt.Errorf("export cut short, %s not written: %v", out, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d bytes to %s\n", n, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "", "export format: json or car (default: car for an --out FILE.car, else json)")
	f.StringVar(&sona, "sona", "", "sona uuid or name")
	f.BoolVar(&all, "all", false, "export every sona")
	f.StringVarP(&out, "out", "o", "", "write to FILE instead of stdout")
	f.StringVar(&g.server, "server", "", "URL of a running server (default: open the data directory in this process)")
	return cmd
}

// sized reads r and fails at its end unless it gave want bytes (want < 0:
// any number), so that a body shorter than announced is never taken whole.
type sized struct {
	r    io.Reader
	want int64
	n    int64
}

func (s *sized) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if err == io.EOF && s.want >= 0 && s.n != s.want {
		return n, fmt.Errorf("%d of %d bytes", s.n, s.want)
	}
	return n, err
}

func importCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "import [--format json|car] FILE",
		Short: "Import an export (JSON or CAR): sonas, chains, metadata, associations, backbone, consensus, anchors",
		Long: "Import an export (FILE, or - for stdin): a JSON export, or a CAR written by `memoria export`\n" +
			"(the format is told by --format, else by the file's name, else by its first byte). The whole\n" +
			"file is checked before anything is written — every block of a CAR is re-hashed against its\n" +
			"CID, and a corrupt or truncated file is refused. Sonas keep their uuids and chains their\n" +
			"memory and ACT CIDs: each chain is replayed through its sona's actor. A sona the store\n" +
			"already holds with a prefix of the exported chain is continued, so an interrupted import can\n" +
			"be run again; any other difference is refused.",
		Example: "  memoria import self.car\n" +
			"  memoria import --format json self.json\n" +
			"  memoria import --format json --server http://127.0.0.1:7777 - < self.json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			size := int64(-1)
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					size = st.Size()
				}
				in = f
			}
			prog := newProgress(cmd.ErrOrStderr(), g.json || size < 0)
			defer prog.done()
			if size >= 0 {
				prog.start("reading "+filepath.Base(args[0]), int(size))
				in = &counter{r: in, prog: prog}
			}
			br := bufio.NewReader(in)
			format, err := importFormat(format, args[0], br)
			if err != nil {
				return err
			}
			// A refused import into a data directory that did not exist
			// leaves none behind: the store checks everything before it
			// writes, but opening it creates the directory.
			created := ""
			if g.server == "" {
				cfg, err := g.loadConfig("warn")
				if err != nil {
					return err
				}
				if created, err = missingRoot(cfg.DataDir); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return removeCreated(created, err)
			}
			var res *messages.ImportResult
			if format == "car" {
				res, err = c.ImportCAR(ctx, br)
			} else {
				res, err = c.Import(ctx, br)
			}
			prog.done()
			release()
			if err != nil {
				return removeCreated(created, err)
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
	cmd.Flags().StringVar(&format, "format", "", "export format: json or car (default: by the file's name, else its first byte)")
	clientFlags(cmd, g)
	return cmd
}

// missingRoot is the outermost directory on dir's path that does not
// exist yet — what opening a store on dir creates —, or "" when dir
// exists.
func missingRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root := ""
	for {
		_, err := os.Stat(dir)
		if err == nil {
			return root, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		root = dir
		parent := filepath.Dir(dir)
		if parent == dir {
			return root, nil
		}
		dir = parent
	}
}

// removeCreated removes the directory a failed command created (see
// missingRoot) and returns err.
func removeCreated(created string, err error) error {
	if created != "" {
		if rerr := os.RemoveAll(created); rerr != nil {
			return fmt.Errorf("%w (and %s, created for it, could not be removed: %v)", err, created, rerr)
		}
	}
	return err
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
