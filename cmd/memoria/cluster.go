package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/cluster"
	"github.com/memoria-ai/memoria/cluster/clusterproc"
	"github.com/memoria-ai/memoria/config"
)

func clusterCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect a cluster, or start one on this machine for a demo",
	}
	cmd.AddCommand(clusterStatusCmd(g), clusterDevCmd(g), clusterBenchCmd(g))
	return cmd
}

func clusterStatusCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The cluster as a member sees it: its members, etcd, replicas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.server == "" {
				return errors.New("--server is required: the URL of a cluster member")
			}
			c := client.New(g.server, nil).WithToken(os.Getenv(config.EnvToken))
			raw, err := c.Cluster(cmd.Context())
			var ce *client.Error
			if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
				return fmt.Errorf("%s is a single node, not a cluster member (no GET /cluster)", g.server)
			}
			if err != nil {
				return err
			}
			if g.json {
				_, err := cmd.OutOrStdout().Write(raw)
				return err
			}
			var st cluster.Status
			if err := json.Unmarshal(raw, &st); err != nil {
				return fmt.Errorf("bad answer from %s/cluster: %w", g.server, err)
			}
			return printClusterStatus(cmd.OutOrStdout(), st)
		},
	}
	clientFlags(cmd, g)
	return cmd
}

func printClusterStatus(w io.Writer, st cluster.Status) error {
	health := "answers"
	if !st.Etcd.Healthy {
		health = "DOES NOT ANSWER"
	}
	fmt.Fprintf(w, "etcd %v: %s; replicas (R) %d; %d members\n", st.Etcd.Endpoints, health, st.Replicas, len(st.Members))
	if st.Sonas != nil {
		fmt.Fprintf(w, "%d sonas, %d held by fewer than %d live members\n", *st.Sonas, *st.UnderReplicated, st.Replicas)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tURL\tPEER\tOWNS\tHOLDS\tUP SINCE\t")
	for _, m := range st.Members {
		id := m.ID
		if m.Self {
			id += " (answered)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t\n", id, m.URL, m.Peer, m.Owned, m.Held, time.UnixMilli(m.Started).Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Lacking) > 0 {
		fmt.Fprintln(w, "under-replicated (restored by their next write):")
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SONA	HEAD SEQ	HELD BY (LIVE)	")
		for _, l := range st.Lacking {
			fmt.Fprintf(tw, "%s\t%d\t%s\t\n", l.Sona, l.Seq, strings.Join(l.Live, ", "))
		}
		if more := *st.UnderReplicated - len(st.Lacking); more > 0 {
			fmt.Fprintf(tw, "… and %d more\t\t\t\n", more)
		}
		return tw.Flush()
	}
	return nil
}

func clusterDevCmd(g *globals) *cobra.Command {
	var nodes, replicas int
	var keep bool
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start etcd and N members on loopback, each its own process, until Ctrl-C (a demo)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 1 || nodes > 9 {
				return fmt.Errorf("--nodes must be within 1..9, got %d", nodes)
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			dir := g.dataDir
			if dir == "" {
				if dir, err = os.MkdirTemp("", "memoria-cluster-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
			}
			logs := map[string]*os.File{}
			defer func() {
				for _, f := range logs {
					f.Close()
				}
			}()
			out := cmd.ErrOrStderr()
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			fmt.Fprintf(out, "starting etcd and %d members in %s (logs: %s/*.log)\n", nodes, dir, dir)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			c, err := clusterproc.Start(ctx, clusterproc.Options{Bin: bin, Dir: dir, Nodes: nodes, Replicas: replicas,
				Log: func(name string) io.Writer {
					f, err := os.Create(filepath.Join(dir, name+".log"))
					if err != nil {
						return io.Discard
					}
					logs[name] = f
					return f
				}})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "etcd     %s\n", c.Etcd.URL)
			for _, n := range c.Nodes {
				fmt.Fprintf(out, "%-8s %s   (memoria cluster status --server %s)\n", n.Name, n.URL, n.URL)
			}
			fmt.Fprintln(out, "Ctrl-C stops them")
			<-cmd.Context().Done()
			fmt.Fprintln(out, "stopping")
			return c.Stop()
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 3, "members to start")
	cmd.Flags().IntVar(&replicas, "replicas", 2, "cluster.replicas")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary directory (default: removed at the end)")
	return cmd
}
