package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/internal/torture"
)

func tortureCmd(g *globals) *cobra.Command {
	var (
		o          torture.Options
		keep       bool
		serverLogs string
	)
	cmd := &cobra.Command{
		Use:   "torture",
		Short: "Kill a server with SIGKILL under write load, again and again, and check that nothing acknowledged was lost",
		Long: "Start `memoria serve` (this binary) on loopback on a temporary data directory (or --data), create\n" +
			"--sonas sonas, and --cycles times: run --writers concurrent writers (inserts and chats), kill the\n" +
			"server with SIGKILL at a random point within --duration, restart it and check every acknowledged\n" +
			"memory (served, and its raw block hashes to its CID), every chain (linear from head to genesis,\n" +
			"holding every acknowledged step), the indexes (they catch up; recall finds acknowledged texts).\n" +
			"The seed is printed: the same seed kills at the same points. Exits non-zero on any loss.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("seed") {
				o.Seed = time.Now().UnixNano() % 1_000_000
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			dir := g.dataDir
			if dir == "" {
				if dir, err = os.MkdirTemp("", "memoria-torture-"); err != nil {
					return err
				}
				defer func() {
					if keep {
						fmt.Fprintf(cmd.ErrOrStderr(), "data directory kept: %s\n", dir)
					} else {
						os.RemoveAll(dir)
					}
				}()
			}
			o.Server = loadgen.ServerOptions{Binary: bin, DataDir: dir}
			if g.configFile != "" {
				o.Server.Args = []string{"--config", g.configFile}
			}
			if serverLogs != "" {
				f, err := os.OpenFile(serverLogs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err != nil {
					return err
				}
				defer f.Close()
				o.Server.Stderr = f
			}
			errOut := cmd.ErrOrStderr()
			if !g.json {
				fmt.Fprintf(errOut, "torture: seed %d, %d cycles, %d writers over %d sonas, kills within %s, data %s\n",
					o.Seed, o.Cycles, o.Writers, o.Sonas, o.Duration, dir)
			}
			p := newProgress(errOut, g.json)
			p.start("torture", o.Cycles)
			o.Cycle = func(c torture.CycleReport) {
				p.add(1)
				if !g.json && !p.on {
					fmt.Fprintf(errOut, "cycle %d: killed after %.0f ms, %d acknowledged, restarted in %.0f ms, %d losses, %d violations\n",
						c.Cycle, c.KilledAfter, c.Acknowledged, c.RestartMs, c.Losses, c.Violations)
				}
			}
			rep, err := torture.Run(cmd.Context(), o)
			p.done()
			if rep != nil {
				out := cmd.OutOrStdout()
				if g.json {
					if err := printIndented(out, rep); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(out, "seed %d: %d cycles in %.0f s, %d memories acknowledged (%d inserts, %d chats), %d ACTs\n",
						rep.Seed, rep.Cycles, rep.Seconds, rep.Acknowledged, rep.Inserts, rep.Chats, rep.ACTs)
					fmt.Fprintf(out, "losses %d, violations %d; restart to healthy p50 %.0f ms, max %.0f ms; indexes caught up within %.0f ms\n",
						rep.Losses, rep.Violations, rep.RestartP50Ms, rep.RestartMaxMs, rep.IndexCatchUpMaxMs)
					for _, p := range rep.Problems {
						fmt.Fprintf(out, "  %s\n", p)
					}
				}
			}
			if errors.Is(err, torture.ErrLoss) {
				return err
			}
			if err != nil {
				return fmt.Errorf("torture (seed %d): %w", o.Seed, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Cycles, "cycles", 20, "how many times the server is killed")
	f.IntVar(&o.Writers, "writers", 8, "concurrent writers")
	f.IntVar(&o.Sonas, "sonas", 16, "sonas the writers spread over")
	f.DurationVar(&o.Duration, "duration", 5*time.Second, "longest load of a cycle (the kill falls between a quarter of it and all of it)")
	f.Float64Var(&o.ChatShare, "chat-share", 0.25, "share of writes that are chats")
	f.IntVar(&o.RecallChecks, "recall-checks", 10, "acknowledged texts recalled after each restart")
	f.DurationVar(&o.IndexDeadline, "index-deadline", 2*time.Minute, "how long the indexes may take to catch up after a restart")
	f.Int64Var(&o.Seed, "seed", 0, "seed of the kill points and the workload (default: random, printed)")
	f.BoolVar(&keep, "keep", false, "keep the temporary data directory")
	f.StringVar(&serverLogs, "server-log", "", "append the servers' logs to this file")
	f.BoolVar(&g.json, "json", false, "print JSON")
	return cmd
}
