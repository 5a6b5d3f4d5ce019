package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/loadgen"
)

func loadCmd(g *globals) *cobra.Command {
	var (
		o          loadgen.Options
		mix        string
		keep       bool
		serverLogs string
		profiles   string
	)
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Start a server on loopback and drive it with many concurrent clients; report errors, latency and its memory",
		Long: "Start `memoria serve` (this binary) on a temporary data directory (or --data) on loopback, or use\n" +
			"a running one (--server), create --sonas sonas, then run --clients concurrent clients for --duration,\n" +
			"each sending one request after the other, drawn from --mix (insert, recall, chat, get, list).\n" +
			"Reports requests, errors by status, p50/p99 per route, throughput and the server's RSS at the\n" +
			"start, middle and end; with --every, the same in stretches of that length as they end (with the\n" +
			"server's CPU time per request and the memories it holds), to see a long run change as its store\n" +
			"grows. Exits non-zero when any request failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := loadgen.ParseMix(mix)
			if err != nil {
				return err
			}
			o.Mix = m
			ctx := cmd.Context()
			var srv *loadgen.Server
			if g.server != "" {
				if profiles != "" {
					return fmt.Errorf("load: --server-profiles profiles the server load starts, not one given by --server")
				}
				o.URL, o.Token = g.server, os.Getenv(config.EnvToken)
			} else {
				var cleanup func()
				srv, cleanup, err = g.startChild(cmd, keep, serverLogs, profiles)
				if err != nil {
					return err
				}
				defer cleanup()
				o.URL, o.Server = srv.URL, srv.Sample
			}
			p := newProgress(cmd.ErrOrStderr(), g.json)
			if o.Every > 0 && !g.json {
				header := intervalHeader
				o.OnInterval = func(iv loadgen.Interval) {
					if header != "" {
						p.note(header)
						header = ""
					}
					p.note(intervalLine(iv))
				}
			}
			stopProgress := p.elapsed("load", o.Duration)
			rep, err := loadgen.Run(ctx, o)
			stopProgress()
			if err != nil {
				return err
			}
			if srv != nil {
				select {
				case <-srv.Exited():
					return fmt.Errorf("load: the server exited during the run (%v): %s", srv.Err(), srv.LastLog())
				default:
				}
			}
			out := cmd.OutOrStdout()
			if g.json {
				if err := printIndented(out, rep); err != nil {
					return err
				}
			} else {
				printLoad(out, rep)
			}
			if rep.Errors > 0 {
				return fmt.Errorf("load: %d of %d requests failed (%s)", rep.Errors, rep.Requests, statusCounts(rep.ErrorsByStatus))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Clients, "clients", 300, "concurrent clients")
	f.DurationVar(&o.Duration, "duration", time.Minute, "how long the load lasts")
	f.DurationVar(&o.Every, "every", 0, "also report the load in stretches of this length, each as it ends (0: none)")
	f.Float64Var(&o.Rate, "rate", 0, "offer this many requests a second on a fixed schedule (an open loop: latency counts from when a request was due) instead of each client sending its next once its last is answered (0)")
	f.IntVar(&o.Sonas, "sonas", 50, "sonas the clients spread over")
	f.IntVar(&o.SeedMemories, "seed-memories", 4, "memories inserted into each sona before the load")
	f.StringVar(&mix, "mix", loadgen.DefaultMix().String(), "weights of the operations")
	f.Int64Var(&o.Seed, "seed", 1, "seed of the workload")
	f.BoolVar(&keep, "keep", false, "keep the temporary data directory")
	f.StringVar(&serverLogs, "server-log", "", "append the server's log to this file")
	f.StringVar(&profiles, "server-profiles", "", "have the server it starts write a CPU profile of its whole run (setup included) and a heap profile when it stops into this directory (load.pprof, load.heap.pprof)")
	clientFlags(cmd, g)
	return cmd
}

// startChild starts `memoria serve` from this binary on --data (or a
// temporary directory, removed by cleanup unless keep) with --config —
// writing its CPU and heap profiles into profiles, unless "" — and waits
// until it is healthy.
func (g *globals) startChild(cmd *cobra.Command, keep bool, logFile, profiles string) (*loadgen.Server, func(), error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	dir := g.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "memoria-"+cmd.Name()+"-"); err != nil {
			return nil, nil, err
		}
		if keep {
			undo = append(undo, func() { fmt.Fprintf(cmd.ErrOrStderr(), "data directory kept: %s\n", dir) })
		} else {
			undo = append(undo, func() { os.RemoveAll(dir) })
		}
	}
	so := loadgen.ServerOptions{Binary: bin, DataDir: dir}
	if g.configFile != "" {
		so.Args = []string{"--config", g.configFile}
	}
	if profiles != "" {
		if err := os.MkdirAll(profiles, 0o755); err != nil {
			cleanup()
			return nil, nil, err
		}
		so.Args = append(so.Args, loadgen.ProfileArgs(filepath.Join(profiles, "load"))...)
	}
	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		so.Stderr = f
		undo = append(undo, func() { f.Close() })
	}
	srv, err := loadgen.StartServer(cmd.Context(), so)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	undo = append(undo, func() { _ = srv.Stop(time.Minute) })
	if err := srv.WaitHealthy(cmd.Context()); err != nil {
		cleanup()
		return nil, nil, err
	}
	return srv, cleanup, nil
}

// elapsed draws p as a bar of elapsed seconds until the returned function
// is called.
func (p *progress) elapsed(label string, total time.Duration) func() {
	p.start(label, int(total.Seconds()))
	stop := loadgen.EverySecond(total, p.set)
	return func() {
		stop()
		p.done()
	}
}

func printLoad(w io.Writer, rep *loadgen.Report) {
	fmt.Fprintf(w, "%d clients over %d sonas for %.1f s (mix %s): %d requests, %.0f/s, %d errors\n",
		rep.Clients, rep.Sonas, rep.Seconds, rep.Mix, rep.Requests, rep.PerSecond, rep.Errors)
	if rep.Rate > 0 {
		fmt.Fprintf(w, "offered %g/s (open loop): %d due but not sent\n", rep.Rate, rep.Unsent)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-26s %9s %7s %8s %9s %9s %9s %15s\n", "route", "requests", "errors", "per s", "p50 ms", "p99 ms", "max ms", "server p50/p99")
	for _, r := range rep.Routes {
		server := "-" // the server told no time (a sona-scoped token)
		if r.ServerP50Ms > 0 {
			server = fmt.Sprintf("%.1f/%.1f", r.ServerP50Ms, r.ServerP99Ms)
		}
		fmt.Fprintf(w, "%-26s %9d %7d %8.1f %9.1f %9.1f %9.1f %15s\n", r.Route, r.Requests, r.Errors, r.PerSecond, r.P50Ms, r.P99Ms, r.MaxMs, server)
	}
	if len(rep.Intervals) > 0 {
		fmt.Fprintf(w, "\n%s\n", intervalHeader)
		for _, iv := range rep.Intervals {
			fmt.Fprintln(w, intervalLine(iv))
		}
	}
	if len(rep.Memory) > 0 {
		fmt.Fprintln(w, "\nserver memory (MiB)     RSS    anon    file    peak")
		for _, m := range rep.Memory {
			fmt.Fprintf(w, "  %-18s %7.0f %7.0f %7.0f %7.0f\n", m.At, mib(m.RSS), mib(m.Anon), mib(m.File), mib(m.Peak))
		}
	}
	for _, s := range rep.ErrorSamples {
		fmt.Fprintf(w, "error: %s\n", s)
	}
}

const intervalHeader = "  until s  requests  errors    per s   p50 ms   p99 ms  server CPU ms/req  RSS MiB  anon MiB  memories"

// intervalLine is a stretch of the load as a row under intervalHeader; what
// was not measured is "-".
func intervalLine(iv loadgen.Interval) string {
	cpu, rss, anon, mem := "-", "-", "-", "-"
	if iv.ServerCPUPerRequestMs > 0 {
		cpu = fmt.Sprintf("%.2f", iv.ServerCPUPerRequestMs)
	}
	if iv.RSS > 0 {
		rss, anon = fmt.Sprintf("%.0f", mib(iv.RSS)), fmt.Sprintf("%.0f", mib(iv.Anon))
	}
	if iv.Memories >= 0 {
		mem = fmt.Sprint(iv.Memories)
	}
	return fmt.Sprintf("%9.0f %9d %7d %8.1f %8.1f %8.1f %18s %8s %9s %9s",
		iv.EndSeconds, iv.Requests, iv.Errors, iv.PerSecond, iv.P50Ms, iv.P99Ms, cpu, rss, anon, mem)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// statusCounts renders {"503": 2, "transport": 1} as "503: 2, transport: 1".
func statusCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
