//go:build !memoria_noetcd

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/cluster/etcdembed"
)

// etcdCmd runs a one-member etcd for trying a cluster out (README, Cluster).
func etcdCmd(g *globals) *cobra.Command {
	var listen, peer string
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run a one-member embedded etcd for a cluster on one machine (production: a real etcd cluster)",
		Long: "Runs a one-member etcd whose client URL is http://HOST:PORT (--listen), keeping its data in --data.\n" +
			"Point serve at it with --cluster.etcd HOST:PORT. SIGINT or SIGTERM stops it cleanly.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.dataDir == "" {
				return fmt.Errorf("--data is required: the directory etcd keeps its data in")
			}
			s, err := etcdembed.Start(etcdembed.Options{Dir: g.dataDir, Listen: listen, Peer: peer, LogLevel: g.logLevel, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "memoria etcd: serving clients at %s (data %s)\n", s.ClientURL(), g.dataDir)
			err = s.Run(cmd.Context())
			fmt.Fprintln(cmd.ErrOrStderr(), "memoria etcd: stopped")
			return err
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:2379", "client address host:port (the client URL is http://host:port)")
	cmd.Flags().StringVar(&peer, "peer", "", "peer address host:port (default: a free port)")
	return cmd
}
