package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/serving"
)

func serveCmd(g *globals) *cobra.Command {
	var listen, etcd, peer, cpuProfile, memProfile, traceFile string
	var replicas int
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the server (REST API, MCP at /mcp, metrics) on the data directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig("")
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if listen != "" || f.Changed("cluster.etcd") || f.Changed("cluster.replicas") || f.Changed("cluster.peer") {
				if listen != "" {
					cfg.Server.Listen = listen
				}
				if f.Changed("cluster.etcd") {
					cfg.Cluster.Etcd = etcd
				}
				if f.Changed("cluster.replicas") {
					cfg.Cluster.Replicas = replicas
				}
				if f.Changed("cluster.peer") {
					cfg.Cluster.Peer = peer
				}
				if err := cfg.Validate(); err != nil {
					return err
				}
			}
			if err := cfg.Server.CheckExposure(cfg.Server.Listen); err != nil {
				return err
			}
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			if cpuProfile != "" {
				stop, err := startWriting("--cpuprofile", cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if traceFile != "" {
				stop, err := startWriting("--trace", traceFile, trace.Start, trace.Stop)
				if err != nil {
					return err
				}
				defer stop()
			}
			ctx := cmd.Context()
			// Listen first: a cluster member publishes the address.
			ln, err := net.Listen("tcp", cfg.Server.Listen)
			if err != nil {
				return err
			}
			defer ln.Close()
			var o app.Options
			if cfg.Cluster.Enabled() {
				o.ClusterURL = "http://" + ln.Addr().String()
			}
			a, err := app.Open(ctx, cfg, log, o)
			if err != nil {
				return err
			}
			defer a.Close()
			if memProfile != "" {
				f, err := os.Create(memProfile)
				if err != nil {
					return fmt.Errorf("--memprofile: %w", err)
				}
				defer writeHeapProfile(f, log) // before Close: the heap of a serving process
			}
			var handler http.Handler = a.API
			if a.Cluster != nil {
				handler = a.Cluster.Route(a.API) // requests about a sona go to its owner
			}
			srv := serving.New(serving.Options{Config: cfg.Server, Handler: handler, Limit: a.API.RequestLimit,
				Metrics: a.Metrics, Log: log})
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			log.Info("memoria serving", "listen", "http://"+ln.Addr().String(), "ui", "http://"+ln.Addr().String()+"/ui/", "data", cfg.DataDir,
				"tokens", len(cfg.Server.Auth.Tokens), // how many, never which
				"max_connections", cfg.Server.MaxConnections)
			if a.Cluster != nil {
				self := a.Cluster.Node().Self()
				log.Info("memoria cluster member", "member", self.ID, "url", self.URL, "peer", self.Peer,
					"members", len(a.Cluster.Node().Members()), "replicas", cfg.Cluster.Replicas)
			}
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
			}
			log.Info("shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default 127.0.0.1:7777)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (written at shutdown; go tool pprof reads it)")
	cmd.Flags().StringVar(&traceFile, "trace", "", "write a Go execution trace of the whole run to this file (written as it runs, closed at shutdown; go tool trace reads it)")
	cmd.Flags().StringVar(&memProfile, "memprofile", "", "write a heap profile to this file at shutdown, after a collection (go tool pprof reads it)")
	cmd.Flags().StringVar(&etcd, "cluster.etcd", "", "join a cluster: etcd client URLs, comma-separated (cluster.etcd)")
	cmd.Flags().IntVar(&replicas, "cluster.replicas", 0, "members that hold an append before it is acknowledged (cluster.replicas, default 2)")
	cmd.Flags().StringVar(&peer, "cluster.peer", "", "listen address of the peer traffic (cluster.peer; default a free port)")
	return cmd
}

// writeHeapProfile writes the live heap, collected first, into f.
func writeHeapProfile(f *os.File, log *slog.Logger) {
	runtime.GC()
	err := pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Error("--memprofile", "file", f.Name(), "err", err)
	}
}

// startWriting runs start on a new file at path (a CPU profile, an
// execution trace) until the returned stop; flag names it in errors.
func startWriting(flag, path string, start func(io.Writer) error, stop func()) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return func() {
		stop()
		f.Close()
	}, nil
}
