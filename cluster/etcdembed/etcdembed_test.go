package etcdembed

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// freeAddr is a free client address below the ephemeral range
// (clusterproc.FreeAddr): TestServesAndRestarts starts a member on it
// again.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := clusterproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestServesAndRestarts runs a member, writes through the client
// protocol, stops it, and finds the write after a restart on the same
// directory (the peer port is picked afresh each time).
func TestServesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	put := func(s *Server) {
		c := client(t, s.ClientURL())
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	get := func(s *Server) string {
		c := client(t, s.ClientURL())
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 1 {
			return ""
		}
		return string(r.Kvs[0].Value)
	}
	s, err := Start(Options{Dir: dir, Listen: addr, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if s.ClientURL() != "http://"+addr {
		t.Fatalf("client URL %s, want http://%s", s.ClientURL(), addr)
	}
	put(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	// The client port is free again once Run returned.
	if err := probe(addr); err != nil {
		t.Fatalf("client port still held after Close: %v", err)
	}

	s, err = Start(Options{Dir: dir, Listen: addr, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := get(s); v != "v" {
		t.Fatalf("after restart k = %q, want v", v)
	}
}

func client(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: nil})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStartErrors: each refusal names what is wrong, and starts nothing.
func TestStartErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no data", Options{Listen: "127.0.0.1:2379"}, "--data is required"},
		{"no port", Options{Dir: t.TempDir(), Listen: "127.0.0.1"}, `--listen "127.0.0.1": want host:port`},
		{"no host", Options{Dir: t.TempDir(), Listen: ":2379"}, "want host:port"},
		{"port in use", Options{Dir: t.TempDir(), Listen: busy.Addr().String()}, "client address " + busy.Addr().String()},
		{"peer in use", Options{Dir: t.TempDir(), Listen: freeAddr(t), Peer: busy.Addr().String()}, "peer address " + busy.Addr().String()},
		{"bad level", Options{Dir: t.TempDir(), Listen: freeAddr(t), LogLevel: "loud"}, `log level "loud"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Log = io.Discard
			s, err := Start(tc.o)
			if err == nil {
				s.Close()
				t.Fatal("started")
			}
			if !errors.Is(err, ErrStart) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want ErrStart naming %q", err, tc.want)
			}
		})
	}
}
