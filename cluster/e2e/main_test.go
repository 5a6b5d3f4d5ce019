// Package e2e tests the cluster as a user runs it: separate OS processes
// on 127.0.0.1 — one `memoria etcd`, N `memoria serve` — built once per
// test binary from ./cmd/memoria. Set MEMORIA_CLUSTER_RACE=1 to build the
// members with -race too.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
	"github.com/memoria-ai/memoria/internal/testdeps"
)

// bin is the memoria binary the tests run.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "memoria-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "memoria")
	var flags []string
	if os.Getenv("MEMORIA_CLUSTER_RACE") == "1" {
		flags = append(flags, "-race")
	}
	// The members inherit the environment, and refuse a MEMORIA_ variable
	// that is not a setting.
	os.Unsetenv("MEMORIA_CLUSTER_RACE")
	if out, err := testdeps.BuildMemoria(bin, flags...); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot build memoria: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logs keeps each process's output and prints it when the test failed.
type logs struct {
	mu  sync.Mutex
	buf map[string]*bytes.Buffer
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (l *logs) writer(name string) io.Writer {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf[name] == nil {
		l.buf[name] = &bytes.Buffer{}
	}
	return lockedWriter{&l.mu, l.buf[name]}
}

func (l *logs) dump(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, b := range l.buf {
		t.Logf("---- %s ----\n%s", name, b.String())
	}
}

// startCluster starts etcd and n members for the test, stopped (cleanly,
// or the test fails) at its end.
func startCluster(t *testing.T, n, replicas int, env ...string) (*clusterproc.Cluster, *logs) {
	t.Helper()
	l := &logs{buf: map[string]*bytes.Buffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := clusterproc.Start(ctx, clusterproc.Options{Bin: bin, Dir: t.TempDir(), Nodes: n, Replicas: replicas, Env: env, Log: l.writer})
	if err != nil {
		l.dump(t)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
		if t.Failed() {
			l.dump(t)
		}
	})
	return c, l
}

// contains reports whether process name logged s.
func (l *logs) contains(name, s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf[name] != nil && bytes.Contains(l.buf[name].Bytes(), []byte(s))
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return time.Since(start)
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, last)
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, under a deadline
	}
}
