//go:build memoria_noetcd

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// etcdCmd in a build without the embedded etcd (-tags memoria_noetcd;
// see README, Build time and size): it says so.
func etcdCmd(*globals) *cobra.Command {
	return &cobra.Command{
		Use:   "etcd",
		Short: "Not in this build (built with -tags memoria_noetcd): run etcd itself",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("this memoria was built without the embedded etcd (-tags memoria_noetcd): run etcd itself (Debian: apt-get install etcd-server; etcd --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379)")
		},
	}
}
