package backup_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/backup"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// node is a serving app on a data directory.
type node struct {
	app *app.App
	c   *client.Client
}

func testConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Evaluation.Mode = "off"
	cfg.Heartbeat.Interval = config.Duration(365 * 24 * time.Hour) // no tick writes behind the test's back
	return cfg
}

// serve opens dir and serves it on loopback, on clk.
func serve(t *testing.T, dir string, clk clock.Clock) *node {
	t.Helper()
	a, err := app.Open(context.Background(), testConfig(dir), slog.New(slog.DiscardHandler), app.Options{Clock: clk})
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	srv := httptest.NewServer(a.API)
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("close %s: %v", dir, err)
		}
	})
	return &node{app: a, c: client.New(srv.URL, nil)}
}

// acked is an insert the server acknowledged.
type acked struct {
	sona, cid string
	seq       int64
}

var topics = []string{"llamas graze on the altiplano", "the harbour crane broke down", "tea harvest in the hills",
	"a comet over the lake", "the bridge reopened to traffic", "orchestra rehearsal ran late"}

// TestOnlineBackupRestore backs up a real server over HTTP while four
// writers insert, three times (a full backup, then incremental ones), and
// once more when they have stopped; restores several points of the chain
// into new data directories, each verified before it is made live; and
// finds in each every insert acknowledged before its backup began, at its
// seq, in chains that verify. The last restore, of a quiescent store,
// serves the same heads, recall results (memory for memory, score for
// score) and counts as the original, and opens without a lost-writes
// alarm.
func TestOnlineBackupRestore(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC))
	src := serve(t, filepath.Join(t.TempDir(), "data"), clk)
	ctx := context.Background()
	var sonas []string
	for i := range 4 {
		s, err := src.c.CreateSona(ctx, fmt.Sprintf("writer-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		sonas = append(sonas, s.Uuid)
	}

	var mu sync.Mutex
	var log []acked
	stop := make(chan struct{})
	errs := make(chan error, len(sonas))
	var wg sync.WaitGroup
	for w, sona := range sonas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d, _ := structpb.NewStruct(map[string]any{"kind": "text", "content": fmt.Sprintf("writer %d, note %d: %s", w, i, topics[(w+i)%len(topics)])})
				res, err := src.c.Insert(ctx, &messages.InsertRequest{Sona: sona, Data: d, Dedup: proto.Bool(false)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				log = append(log, acked{sona, res.Cid, res.GetSeq()})
				mu.Unlock()
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(log) }
	dir := filepath.Join(t.TempDir(), "backups")
	var before []int // acknowledged inserts before each backup began
	take := func() backup.Entry {
		t.Helper()
		before = append(before, count())
		e, err := backup.Take(ctx, dir, false, backup.FromServer(src.c))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	var entries []backup.Entry
	for range 3 {
		for n := count(); count() < n+40; { // writes between backups
			select {
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		entries = append(entries, take())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	entries = append(entries, take()) // quiescent
	for i, e := range entries {
		t.Logf("backup %d: %s, %d bytes, %d entries, %d key lists, %d keys, %d commits", e.Seq, e.Kind, e.Bytes, e.Entries, e.KeyLists, e.Keys, e.Commits)
		if want := map[bool]string{true: "full", false: "incremental"}[i == 0]; e.Kind != want {
			t.Fatalf("backup %d is %s, want %s", e.Seq, e.Kind, want)
		}
	}

	for _, upto := range []int{1, 3, 4} {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("restored-%d", upto))
		res, err := backup.Restore(ctx, testConfig(out), dir, out, upto, nil)
		if err != nil {
			t.Fatalf("restore up to %d: %v", upto, err)
		}
		if len(res.Chain) != upto || res.ACTs == 0 {
			t.Fatalf("restore up to %d: %+v", upto, res)
		}
		if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*restore*")); len(leftovers) > 0 {
			t.Fatalf("a restore left %v", leftovers)
		}
		dst := serve(t, out, clk)
		for i, a := range log[:before[upto-1]] {
			page, err := dst.app.Self.Sonas.Chain(a.sona, a.seq, 1)
			if err != nil || len(page.Items) != 1 || page.Items[0].Memory.String() != a.cid {
				t.Fatalf("restore up to %d: insert %d (%s at seq %d of %s), acknowledged before the backup began, is not restored: %v %v",
					upto, i, a.cid, a.seq, a.sona, page.Items, err)
			}
		}
		if n, err := backup.VerifyChains(ctx, dst.app.Self); err != nil || n != res.ACTs {
			t.Fatalf("restore up to %d: chains: %d ACTs, %v", upto, n, err)
		}
		if upto == 4 {
			sameSelf(t, src, dst, sonas)
		}
	}
}

// sameSelf compares two quiescent selves: heads, counts, index sizes and
// recalls (run on both in the same order, since a recall reinforces what
// it returns).
func sameSelf(t *testing.T, a, b *node, sonas []string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range []*node{a, b} {
		if err := n.app.Self.Text.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range sonas {
		x, err1 := a.c.Sona(ctx, id)
		y, err2 := b.c.Sona(ctx, id)
		if err1 != nil || err2 != nil || x.GetHead() != y.GetHead() || x.Length != y.Length || x.Name != y.Name {
			t.Fatalf("sona %s: %v / %v (%v, %v)", id, x, y, err1, err2)
		}
	}
	s1, m1 := a.app.Self.Counts()
	s2, m2 := b.app.Self.Counts()
	if s1 != s2 || m1 != m2 {
		t.Fatalf("counts: %d sonas, %d memories; restored %d, %d", s1, m1, s2, m2)
	}
	if x, y := a.app.Self.IndexSizes(), b.app.Self.IndexSizes(); fmt.Sprint(x) != fmt.Sprint(y) {
		t.Fatalf("index sizes %v, restored %v", x, y)
	}
	for _, id := range sonas {
		for _, q := range topics[:3] {
			x, err1 := a.c.Recall(ctx, id, &messages.RecallRequest{Query: q})
			y, err2 := b.c.Recall(ctx, id, &messages.RecallRequest{Query: q})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			// A recall submits its co-access and access writes before it
			// answers: let them land before the next one reads them.
			for _, n := range []*node{a, b} {
				if err := n.app.Self.Store().Barrier(ctx); err != nil {
					t.Fatal(err)
				}
			}
			render := func(r *messages.RecallResponse) []string {
				var out []string
				for _, m := range r.Memories {
					out = append(out, fmt.Sprintf("%s %.9f %s", m.Cid, m.Score, m.Via))
				}
				return out
			}
			if len(x.Memories) == 0 || !slices.Equal(render(x), render(y)) {
				t.Fatalf("recall %q in %s:\n%s\nrestored:\n%s", q, id, strings.Join(render(x), "\n"), strings.Join(render(y), "\n"))
			}
		}
	}
}

// TestRestoreRefuses: a restore never writes into a directory that holds
// anything, nor restores a backup whose file does not match its manifest,
// and leaves nothing behind when it refuses.
func TestRestoreRefuses(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC))
	src := serve(t, filepath.Join(t.TempDir(), "data"), clk)
	ctx := context.Background()
	s, err := src.c.CreateSona(ctx, "solo")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := structpb.NewStruct(map[string]any{"kind": "text", "content": "the only memory"})
	if _, err := src.c.Insert(ctx, &messages.InsertRequest{Sona: s.Uuid, Data: d}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "backups")
	e, err := backup.Take(ctx, dir, false, backup.FromServer(src.c))
	if err != nil {
		t.Fatal(err)
	}

	parent := t.TempDir()
	occupied := filepath.Join(parent, "occupied")
	os.MkdirAll(occupied, 0o755)
	os.WriteFile(filepath.Join(occupied, "live-data"), []byte("precious"), 0o644)
	_, err = backup.Restore(ctx, testConfig(occupied), dir, occupied, 0, nil)
	if !errors.Is(err, backup.ErrNotEmpty) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(occupied, "live-data")); string(b) != "precious" {
		t.Fatal("the occupied directory was touched")
	}

	path := filepath.Join(dir, e.File)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 1
	os.WriteFile(path, b, 0o644)
	out := filepath.Join(parent, "new")
	_, err = backup.Restore(ctx, testConfig(out), dir, out, 0, nil)
	if !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("restore of a damaged backup: %v", err)
	}
	if names, _ := os.ReadDir(parent); len(names) != 1 {
		t.Fatalf("a refused restore left %v beside the target", names)
	}

	// Backups of another store do not continue this directory's chain.
	other := serve(t, filepath.Join(t.TempDir(), "other"), clk)
	b[len(b)/2] ^= 1
	os.WriteFile(path, b, 0o644)
	if _, err := backup.Take(ctx, dir, false, backup.FromServer(other.c)); err == nil || !strings.Contains(err.Error(), "take a full backup") {
		t.Fatalf("an incremental backup of another store into the directory: %v", err)
	}
	if e2, err := backup.Take(ctx, dir, true, backup.FromServer(other.c)); err != nil || e2.Kind != "full" || e2.Seq != 2 {
		t.Fatalf("a full backup of another store: %+v, %v", e2, err)
	}
}
