package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/backup"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The store's upkeep: gc, status, backup, restore. Without --server they
// open the data directory's store alone (no indexes, no actors), so the
// server must not be running on it.

// openStore opens the store of the data directory alone, with no
// garbage collection in the background.
func (g *globals) openStore() (*store.Store, func(), error) {
	cfg, err := g.loadConfig("warn")
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(cfg.DataDir, "store")
	// Badger's manifest, not the directory alone: a directory named store
	// that holds none (the parent of a data directory, named by mistake)
	// would otherwise get an empty store of its own.
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		return nil, nil, fmt.Errorf("no store in %s: name the data directory with --data (or the server with --server)", cfg.DataDir)
	}
	log, sync := app.NewLogger(cfg.Log, os.Stderr)
	o := store.OptionsOf(cfg.Store)
	o.GC.Interval, o.Logger = 0, log
	st, err := store.Open(dir, o)
	if err != nil {
		sync()
		return nil, nil, err
	}
	return st, func() {
		if err := st.Close(); err != nil {
			log.Error("close", "err", err)
		}
		sync()
	}, nil
}

// withStore runs viaServer against --server, or else viaStore on the data
// directory's store opened alone; release runs when the command is done.
func (g *globals) withStore(ctx context.Context, viaServer func(*client.Client) error, viaStore func(*store.Store) error) (release func(), err error) {
	if g.server != "" {
		c, release, err := g.connect(ctx)
		if err != nil {
			return nil, err
		}
		return release, viaServer(c)
	}
	st, release, err := g.openStore()
	if err != nil {
		return nil, err
	}
	return release, viaStore(st)
}

// storeReport gets a report from --server or the data directory's store
// and prints it as JSON (--json) or as text.
func storeReport[T proto.Message](cmd *cobra.Command, g *globals, viaServer func(*client.Client, context.Context) (T, error), viaStore func(*store.Store) (T, error), text func(io.Writer, T)) error {
	var r T
	release, err := g.withStore(cmd.Context(), func(c *client.Client) (err error) {
		r, err = viaServer(c, cmd.Context())
		return err
	}, func(st *store.Store) (err error) {
		r, err = viaStore(st)
		return err
	})
	if release != nil {
		defer release()
	}
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(cmd.OutOrStdout(), r)
	}
	text(cmd.OutOrStdout(), r)
	return nil
}

func gcCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Collect the store's garbage now: compact the tables and rewrite the value log without what was replaced or deleted",
		Long: "gc runs one pass of the store's garbage collection (POST /admin/gc with --server; on the data directory\n" +
			"otherwise, with no server running on it): the memtables are flushed and the tables compacted into one\n" +
			"level, then every value-log file of which at least store.gc.discard_ratio is garbage is rewritten\n" +
			"without it. A pass leaves half of store.min_free_mb free: what it cannot do in that room it skips,\n" +
			"and says so. The server also runs passes in the background every store.gc.interval.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return storeReport(cmd, g, (*client.Client).GC, func(st *store.Store) (*messages.GCReport, error) {
				r, err := st.GC(cmd.Context(), true)
				return api.GCReportMessage(r), err
			}, printGC)
		},
	}
	clientFlags(cmd, g)
	return cmd
}

func printGC(w io.Writer, rep *messages.GCReport) {
	var did []string
	if rep.Compacted {
		did = append(did, "compacted the tables")
	}
	did = append(did, fmt.Sprintf("rewrote %d value-log files", rep.Rewritten))
	freed := size(rep.Reclaimed) + " freed"
	if rep.Reclaimed < 0 {
		freed = "it grew by " + size(-rep.Reclaimed) + " meanwhile"
	}
	fmt.Fprintf(w, "gc: %s; %s → %s (%s) in %s\n", strings.Join(did, ", "),
		size(rep.Before.GetTotal()), size(rep.After.GetTotal()), freed, time.Duration(rep.TookSeconds*float64(time.Second)).Round(time.Millisecond))
	if rep.Skipped != "" {
		fmt.Fprintf(w, "gc: skipped for want of space: %s\n", rep.Skipped)
	}
}

func statusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the store's size on disk and by key space, its commits and its garbage collection",
		Long: "status reports the store (GET /admin/storage with --server; the data directory otherwise): its files'\n" +
			"size on disk by kind (tables, value log, write-ahead logs, other), the live size of each key space\n" +
			"(keys and the lengths of their values, measured now by a walk of every key: an estimate of its share\n" +
			"of the disk, which also holds garbage and compresses the tables), the commits made, the insertion\n" +
			"log's end, the free space and the garbage collection's passes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return storeReport(cmd, g, (*client.Client).Storage, func(st *store.Store) (*messages.StorageStatus, error) {
				return api.StorageStatus(cmd.Context(), st)
			}, printStatus)
		},
	}
	clientFlags(cmd, g)
	return cmd
}

func printStatus(w io.Writer, st *messages.StorageStatus) {
	d := st.Disk
	fmt.Fprintf(w, "on disk: %s (tables %s, value log %s, write-ahead logs %s, other %s)\n",
		size(d.GetTotal()), size(d.GetTables()), size(d.GetValueLog()), size(d.GetWal()), size(d.GetOther()))
	fmt.Fprintf(w, "commits: %d, insertion log: %d\n", st.Commits, st.Memseq)
	if st.FreeBytes > 0 {
		refused := ""
		if st.WritesRefused {
			refused = "; writes are refused"
		}
		fmt.Fprintf(w, "free: %s, reserve %s%s\n", size(st.FreeBytes), size(st.ReserveBytes), refused)
	}
	if gc := st.Gc; gc != nil && gc.Passes > 0 {
		fmt.Fprintf(w, "gc: %d passes (%d skipped, %d failed), %d value-log files rewritten, %s freed\n", gc.Passes, gc.Skipped, gc.Failed, gc.Rewritten, size(gc.Reclaimed))
	}
	fmt.Fprintln(w, "key spaces (live keys and value bytes, uncompressed):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "space\tkeys\tbytes\tin the value log\t")
	for _, sp := range st.Spaces {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", sp.Space, sp.Keys, size(sp.Bytes), size(sp.ValueLogBytes))
	}
	tw.Flush()
}

// size renders a byte count.
func size(n int64) string {
	switch a := max(n, -n); {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func backupCmd(g *globals) *cobra.Command {
	var out string
	var full bool
	cmd := &cobra.Command{
		Use:   "backup --out DIR [--full]",
		Short: "Back up the store into DIR while it serves: incremental after the first backup",
		Long: "backup writes a backup of the store into the directory --out: a full one the first time (or with\n" +
			"--full), then incremental ones holding what changed since the last backup of DIR. Each is read from\n" +
			"one snapshot of the store while writes go on (POST /admin/backup with --server; the data directory\n" +
			"otherwise, with no server running on it): every write acknowledged before the backup began is in it.\n" +
			"It is checked as it arrives (framing, checksums, every block against its CID) and stored as\n" +
			"DIR/NNNNNN-full.mbak or -incr.mbak with its manifest DIR/NNNNNN.json (commits, insertion-log\n" +
			"position, size, SHA-256). `memoria restore --in DIR --data NEWDIR` restores it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("name the backup directory with --out")
			}
			var e backup.Entry
			start := time.Now()
			take := func(src backup.Source) (err error) {
				e, err = backup.Take(cmd.Context(), out, full, src)
				return err
			}
			release, err := g.withStore(cmd.Context(), func(c *client.Client) error { return take(backup.FromServer(c)) },
				func(st *store.Store) error { return take(backup.FromStore(st)) })
			if release != nil {
				defer release()
			}
			if err != nil {
				return err
			}
			if g.json {
				return printIndented(cmd.OutOrStdout(), e)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup %d (%s): %s, %d entries (%d blocks) of %d keys, %d commits, insertion log at %d, in %s\n",
				e.Seq, e.Kind, filepath.Join(out, e.File), e.Entries, e.Blocks, e.Keys, e.Commits, e.MemSeq, time.Since(start).Round(time.Millisecond))
			fmt.Fprintf(cmd.OutOrStdout(), "%s, SHA-256 %s\n", size(e.Bytes), e.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the backup directory")
	cmd.Flags().BoolVar(&full, "full", false, "take a full backup even when DIR holds backups")
	clientFlags(cmd, g)
	return cmd
}

func restoreCmd(g *globals) *cobra.Command {
	var in string
	var upto int
	cmd := &cobra.Command{
		Use:   "restore --in DIR --data NEWDIR [--upto N]",
		Short: "Restore the backups of DIR into a new data directory, verified before it is made live",
		Long: "restore restores the last full backup of --in and the incremental ones after it (up to backup --upto)\n" +
			"into the data directory --data, which must not exist or be empty: a restore never deletes or\n" +
			"overwrites data. Before anything is made live it checks every backup's size and SHA-256 against its\n" +
			"manifest, then, in a temporary directory beside the target, every block against its CID and the\n" +
			"result against the snapshot's digests, then the store's invariants (it opens as the server does,\n" +
			"and every sona's chain is walked from its head); only then is the directory renamed to --data.\n" +
			"The restored store's acknowledged mark is the backup's, so it opens without a lost-writes alarm.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if in == "" {
				return errors.New("name the backup directory with --in")
			}
			if g.dataDir == "" {
				return errors.New("name the new data directory with --data (a restore writes only into a new or empty directory)")
			}
			cfg, err := g.loadConfig("warn")
			if err != nil {
				return err
			}
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			start := time.Now()
			res, err := backup.Restore(cmd.Context(), cfg, in, cfg.DataDir, upto, log)
			if err != nil {
				return err
			}
			if g.json {
				return printIndented(cmd.OutOrStdout(), res)
			}
			last := res.Chain[len(res.Chain)-1]
			fmt.Fprintf(cmd.OutOrStdout(), "restored backups %d–%d into %s in %s: %d sonas, %d memories, %d ACTs verified; %d commits, insertion log at %d\n",
				res.Chain[0].Seq, last.Seq, cfg.DataDir, time.Since(start).Round(time.Millisecond), res.Sonas, res.Memories, res.ACTs, last.Commits, last.MemSeq)
			r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
			fmt.Fprintf(cmd.OutOrStdout(), "checksums %s, store written and checked %s, opened (indexes rebuilt) %s, chains walked %s\n",
				r(res.Checked), r(res.Written), r(res.Opened), r(res.Walked))
			return nil
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "the backup directory")
	cmd.Flags().IntVar(&upto, "upto", 0, "restore up to this backup (default: the last)")
	cmd.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return cmd
}
