package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/bench"
)

func benchCmd(g *globals) *cobra.Command {
	var (
		o                      bench.Options
		sizes, clients, locomo string
		svgFile, serverLogs    string
		keep                   bool
	)
	cmd := &cobra.Command{
		Use:   "bench [scenario…]",
		Short: "Measure what users run: a real server on loopback driven over HTTP, beside the references it is judged against",
		Long: "Start `memoria serve` (this binary) on loopback and drive it over HTTP with many clients, then report\n" +
			"p50/p99/max latency, throughput, the server's CPU time per operation and its RSS (a window of a minute or\n" +
			"more also by its tenths). Scenarios (default: all):\n" +
			"  insert   POST /memories, --clients (64) into as many sonas, on an empty store\n" +
			"  recall   POST /sona/{uuid}/recall with 1 and 16 clients on a store of each --sizes, queries that hit\n" +
			"  restart  SIGTERM, then SIGKILL, of a store of each size: until /healthz, until recall is at its steady\n" +
			"           latency, until the server is idle, and its RSS\n" +
			"  ann      Memoria's HNSW in process over the store's vectors: recall@10 against exact search\n" +
			"  refs     raw Badger (one fsynced transaction per write, as many writers as insert), exact search,\n" +
			"           coder/hnsw and chromem-go over the same vectors\n" +
			"  mixed    recalls from --clients (16), inserts from one more and chats from another in one window, on a\n" +
			"           fresh store of each size: how long a write waits while recalls keep the server busy\n" +
			"  advance  POST /sona/{uuid}/chat (offline model) over --advance-sonas sonas, 64 and 128 clients\n" +
			"  forget   (only when named) POST /forget of a sona of 10,000 memories, three times\n" +
			"The store of --sizes is grown through POST /memories and kept in --data DIR (a temporary directory\n" +
			"without it), so a later run with the same corpus, seed and binary continues it. A default run takes a\n" +
			"few minutes on two cores; --sizes 100k,1m and --duration scale it up (coder/hnsw's build alone takes\n" +
			"minutes at 100k).",
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Duration <= 0 {
				return fmt.Errorf("--duration: %s is not above zero", o.Duration)
			}
			if o.Requests < 0 {
				return fmt.Errorf("--requests: %d is negative", o.Requests)
			}
			for _, f := range []struct {
				name string
				n    int
			}{{"advance-sonas", o.AdvanceSonas}, {"store-sonas", o.StoreSonas}, {"queries", o.Queries}} {
				if f.n < 1 {
					return fmt.Errorf("--%s: %d is not a positive number", f.name, f.n)
				}
			}
			if o.AdvanceKeep && g.dataDir == "" {
				return fmt.Errorf("--advance-keep: needs --data DIR, where the advance store is kept")
			}
			o.Scenarios = args
			if o.Sizes, err = parseList(sizes, bench.ParseSize); err != nil {
				return err
			}
			if o.Clients, err = parseList(clients, func(s string) (int, error) {
				n, err := strconv.Atoi(s)
				if err != nil || n < 1 {
					return 0, fmt.Errorf("--clients: %q is not a positive number", s)
				}
				return n, nil
			}); err != nil {
				return err
			}
			cfg, err := g.loadConfig("")
			if err != nil {
				return err
			}
			o.Config = &cfg
			if cfg.Embedder.Provider != "hashed" {
				fmt.Fprintf(cmd.ErrOrStderr(), "bench: the server embeds with %s; ann and refs embed with the hashed embedder, not the server's vectors\n", cfg.Embedder.Provider)
			}
			if o.Binary, err = os.Executable(); err != nil {
				return err
			}
			if g.configFile != "" {
				o.ServerArgs = []string{"--config", g.configFile}
			}
			o.Token = os.Getenv(config.EnvToken)
			if locomo != "" {
				if o.Corpus, err = bench.LoadLoCoMo(locomo, o.Seed); err != nil {
					return err
				}
			}
			var svg *os.File
			if svgFile != "" { // refused now rather than after the run
				if svg, err = os.Create(svgFile + ".tmp"); err != nil {
					return fmt.Errorf("--svg: %w", err)
				}
				defer os.Remove(svg.Name())
				defer svg.Close()
			}
			if serverLogs != "" {
				f, err := os.OpenFile(serverLogs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err != nil {
					return err
				}
				defer f.Close()
				o.ServerLog = f
			}
			o.Dir = g.dataDir
			if o.Dir == "" {
				if o.Dir, err = os.MkdirTemp("", "memoria-bench-"); err != nil {
					return err
				}
				defer func() {
					if keep {
						fmt.Fprintf(cmd.ErrOrStderr(), "data directory kept: %s\n", o.Dir)
					} else {
						os.RemoveAll(o.Dir)
					}
				}()
			}
			p := newBenchProgress(cmd.ErrOrStderr())
			o.Progress = p.report
			rep, err := bench.Run(cmd.Context(), o)
			p.done()
			if rep == nil {
				return err
			}
			rep.Command = "memoria " + strings.Join(os.Args[1:], " ")
			out := cmd.OutOrStdout()
			if g.json {
				if perr := printIndented(out, rep); perr != nil {
					return perr
				}
			} else {
				bench.WriteTable(out, rep)
			}
			if svg != nil {
				if serr := writeSVG(svg, svgFile, rep); serr != nil && err == nil {
					err = serr
				}
			}
			if err != nil {
				return err
			}
			for _, r := range rep.Results {
				if r.Errors > 0 {
					return fmt.Errorf("bench: %d of %d operations of %s (%s) failed: %s", r.Errors, r.Ops, r.Scenario, r.Name, r.ErrorStatuses)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&sizes, "sizes", sizeList(bench.DefaultSizes), "store sizes of recall, restart, mixed, ann and refs' searches (10k, 1m, …)")
	f.StringVar(&clients, "clients", "", "client counts, replacing every scenario's own (insert 64; recall 1,16; mixed 16 and two writers; advance 64,128)")
	f.DurationVar(&o.Duration, "duration", bench.DefaultDuration, "length of each measured window of load")
	f.Int64Var(&o.Requests, "requests", 0, "end each window of load after this many requests, if --duration has not ended it (0: no limit)")
	f.Float64Var(&o.Rate, "rate", 0, "offer each window of insert, recall and advance this many requests a second on a fixed schedule (an open loop: a request's latency counts from when it was due; those no client was free to send are reported), instead of each client sending its next once its last is answered (0)")
	f.IntVar(&o.AdvanceSonas, "advance-sonas", bench.DefaultAdvanceSonas, "sonas the advance scenario chats with")
	f.BoolVar(&o.AdvanceKeep, "advance-keep", false, "keep the advance scenario's store and sonas in --data DIR/advance-kept; a later run with it chats with the same sonas on that store (a new server), its texts following on")
	f.IntVar(&o.StoreSonas, "store-sonas", bench.DefaultStoreSonas, "sonas the sized store's memories are spread over")
	f.IntVar(&o.Queries, "queries", bench.DefaultQueries, "searches of each in-process vector index")
	f.Int64Var(&o.Seed, "seed", 1, "seed of the texts, queries and workload")
	f.StringVar(&locomo, "locomo", "", "directory of LoCoMo conversations: their turns, repeated and perturbed to size, as the texts")
	f.StringVar(&svgFile, "svg", "", "write plots of latency, throughput and restart times against store size to this SVG file")
	f.BoolVar(&keep, "keep", false, "keep the temporary data directory (with --data the directory is always kept)")
	f.StringVar(&serverLogs, "server-log", "", "append the servers' logs to this file")
	f.StringVar(&o.ProfileDir, "server-profiles", "", "have every server write a CPU profile of its run and a heap profile when it stops into this directory (insert-1.pprof, insert-1.heap.pprof, …)")
	f.BoolVar(&o.Trace, "server-trace", false, "with --server-profiles, have every server also write a Go execution trace of its run there (insert-1.trace, …; go tool trace reads it)")
	f.BoolVar(&g.json, "json", false, "print JSON")
	return cmd
}

func parseList(s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		n, err := parse(part)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func sizeList(sizes []int) string {
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		parts[i] = bench.FormatSize(n)
	}
	return strings.Join(parts, ",")
}

// writeSVG writes the plots into f, a temporary file, and renames it to
// path.
func writeSVG(f *os.File, path string, rep *bench.Report) error {
	if err := bench.WriteSVG(f, rep); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// benchProgress shows a run's progress on stderr: a bar on a terminal,
// else a line as each phase begins and every linesEvery within a long one.
// Progress is reported from many goroutines.
type benchProgress struct {
	mu    sync.Mutex
	bar   *progress
	lines io.Writer // when not a terminal
	phase string
	start time.Time
	last  time.Time // of the last line
}

const linesEvery = 30 * time.Second

func newBenchProgress(w io.Writer) *benchProgress {
	p := &benchProgress{bar: newProgress(w, false), start: time.Now()}
	if !p.bar.on {
		p.lines = w
	}
	return p
}

func (p *benchProgress) report(s bench.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := s.Phase != p.phase
	if changed {
		p.phase = s.Phase
		p.bar.start(s.Phase, s.Total)
	}
	p.bar.set(s.Done)
	if p.lines != nil && (changed || time.Since(p.last) >= linesEvery) {
		p.last = time.Now()
		fmt.Fprintf(p.lines, "bench %5.0fs %s", p.last.Sub(p.start).Seconds(), s.Phase)
		switch {
		case changed:
		case s.Total > 0:
			fmt.Fprintf(p.lines, " %d/%d", s.Done, s.Total)
		default:
			fmt.Fprintf(p.lines, " %d", s.Done)
		}
		fmt.Fprintln(p.lines)
	}
}

func (p *benchProgress) done() { p.bar.done() }
