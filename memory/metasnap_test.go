package memory_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
)

// plainState is what recall knows of every stored memory without reading
// its metadata, in each of sonas.
func plainState(t *testing.T, s *memory.Self, sonas ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := s.Store().View(func(r store.Reader) error {
		return store.Keys(r, meta.Prefix, func(k []byte) {
			c, err := cid.Cast(k[len(meta.Prefix):])
			if err != nil {
				t.Fatal(err)
			}
			for _, sona := range sonas {
				created, ok := s.Recaller.KnownPlain(c, sona)
				out[c.String()+" "+sona] = fmt.Sprint(created, ok)
			}
			out[c.String()+" score"] = s.Recaller.KnownScore(c)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetaSnapshotTakesWhatAFullScanTakes: an open after a crash that
// takes the metadata from its snapshot and the records written after it
// (new memories, forgotten ones, evaluations written since into records of
// the snapshot) counts the same memories, loads the same metric profiles
// and knows the same of each memory's visibility and score as an open
// that reads every record; a damaged snapshot is not used.
func TestMetaSnapshotTakesWhatAFullScanTakes(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	metrics := eumas.Metrics(cfg.Evaluation.Archetypes)
	ev := eumas.NewHeuristic(cfg.Evaluation.Archetypes)
	open := func() (*memory.Self, *memorytest.LogBuffer) {
		t.Helper()
		logs := &memorytest.LogBuffer{}
		s, err := memorytest.OpenWith(memory.Options{Config: cfg, Evaluator: ev, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		// (Open's second try would hide a count that disagrees.)
		if strings.Contains(logs.String(), "snapshot disagrees with the store") {
			t.Fatalf("the open tried again:\n%s", logs)
		}
		return s, logs
	}
	ctx := context.Background()
	// The snapshot of an empty store (the first open writes it).
	path := memory.MetaSnapshotPath(dir)
	s, _ := open()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	empty, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// crashed closes s and puts back snap, a snapshot of before its
	// writes, as a crash would have left it (a close writes the snapshot
	// again when it is far behind: the next open would catch up nothing).
	crashed := func(snap []byte) {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, snap, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, _ = open()
	a, b := memorytest.NewOwner(t, s, "a"), memorytest.NewOwner(t, s, "b")
	var doomed []cid.Cid
	text := func(i int) cid.Cid {
		o := a
		if i%3 == 0 {
			o = b
		}
		return o.Text(fmt.Sprintf("memory %d: I decided to book the train to Lyon on day %d, it was urgent and I felt great about it", i, i))
	}
	for i := range 60 {
		if c := text(i); i%11 == 4 {
			doomed = append(doomed, c)
		}
	}
	// Half of them evaluated: the rest will be after the snapshot.
	if _, err := s.Evals.EvaluatePending(ctx, ev, 30); err != nil {
		t.Fatal(err)
	}
	crashed(empty)
	// The empty store's snapshot and every record after it; this open
	// writes it again in the background (it was far behind), which its
	// close waits for.
	s, logs := open()
	memorytest.MustLog(t, logs, "metadata: from its snapshot and the records written after it")
	if changed := logValue(logs.String(), "changed"); changed != 60 {
		t.Errorf("%d records taken as written after the empty store's snapshot, want 60:\n%s", changed, logs)
	}
	checkLoaded(t, s, metrics, "from the first snapshot", true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// After that snapshot: forgets, new memories, some evaluated.
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, _ = open()
	if _, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{CIDs: doomed}, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	a.S, b.S = s, s
	for i := range 15 {
		text(100 + i)
	}
	if _, err := s.Evals.EvaluatePending(ctx, ev, 40); err != nil {
		t.Fatal(err)
	}
	crashed(before)

	s, logs = open()
	memorytest.MustLog(t, logs, "metadata: from its snapshot and the records written after it")
	if changed := logValue(logs.String(), "changed"); changed < 15 {
		t.Errorf("%d records taken as written after the snapshot, want at least the 15 new ones:\n%s", changed, logs)
	}
	checkLoaded(t, s, metrics, "from the snapshot", true)
	_, fromSnap := s.Counts()
	gotPlain := plainState(t, s, a.Sona, b.Sona)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(memory.MetaSnapshotPath(dir)); err != nil {
		t.Fatal(err)
	}
	s, logs = open()
	memorytest.MustLog(t, logs, "metadata: no snapshot; every record read")
	checkLoaded(t, s, metrics, "from every record", true)
	if _, n := s.Counts(); n != fromSnap || n != 60+15-int64(len(doomed)) {
		t.Errorf("%d memories counted from every record, %d from the snapshot, want %d", n, fromSnap, 60+15-len(doomed))
	}
	wantPlain := plainState(t, s, a.Sona, b.Sona)
	known := 0
	for k, w := range wantPlain {
		if g := gotPlain[k]; g != w {
			t.Errorf("%s: from the snapshot recall knows %q, from every record %q", k, g, w)
		}
		if w[len(w)-4:] == "true" {
			known++
		}
	}
	if known < 60 {
		t.Errorf("%d memories known visible: not the case under test", known)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A damaged snapshot: every record read, and the same taken.
	testutil.FlipByte(t, path, 0.5, 0x40)
	s, logs = open()
	defer s.Close()
	memorytest.MustLog(t, logs, "metadata: the snapshot not used; every record read")
	checkLoaded(t, s, metrics, "after a damaged snapshot", true)
	if _, n := s.Counts(); n != fromSnap {
		t.Errorf("%d memories counted after a damaged snapshot, want %d", n, fromSnap)
	}
}

// TestMetaSnapshotWrittenAgainWhenFarBehind: at each snapshot interval a
// server whose metadata snapshot is behind by more records than a tenth of
// its memories (or 50,000) writes it again, in the background, and the
// next open reads only what came after it.
func TestMetaSnapshotWrittenAgainWhenFarBehind(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	cfg.Index.SnapshotInterval = config.Duration(time.Minute)
	fake := clock.NewFake(memorytest.Epoch)
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Clock: fake, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	o := memorytest.NewOwner(t, s, "a")
	for i := range 30 {
		o.Text(fmt.Sprintf("memory %d of a sona whose snapshot falls behind", i))
	}
	written := func() int { return metaSnapsWritten(logs) }
	if n := written(); n != 1 { // the open's, of the empty store
		t.Fatalf("%d snapshots written before the interval, want 1:\n%s", n, logs)
	}
	// The loop sets its timer in its own goroutine, maybe after a move of
	// the clock: moved again until a snapshot is written.
	testutil.EventuallyShow(t, "a snapshot written after the interval", func() (bool, string) {
		fake.Advance(time.Minute)
		return written() >= 2, logs.String()
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs = &memorytest.LogBuffer{}
	s, err = memorytest.OpenWith(memory.Options{Config: cfg, Clock: fake, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	memorytest.MustLog(t, logs, "metadata: from its snapshot and the records written after it", "changed=0")
	if _, n := s.Counts(); n != 30 {
		t.Errorf("%d memories counted, want 30", n)
	}
}

// logValue is the integer value of the first key=N in logs (text
// handler), -1 when none.
func logValue(logs, key string) int {
	_, after, ok := strings.Cut(logs, " "+key+"=")
	if !ok {
		return -1
	}
	n := 0
	for _, c := range after {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// metaSnapsWritten counts the metadata snapshots logs says were written.
func metaSnapsWritten(logs *memorytest.LogBuffer) int {
	return strings.Count(logs.String(), "metadata: snapshot written")
}

// TestMetaSnapshotWrittenAtCloseWhenFarBehind: a server that closes with
// its metadata snapshot behind by more records than a tenth of its
// memories (or 50,000) — here one whose interval never came — writes it
// at Close, and the next open reads nothing after it; one that closes
// with its snapshot current does not scan its records again.
func TestMetaSnapshotWrittenAtCloseWhenFarBehind(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	cfg.Index.SnapshotInterval = config.Duration(time.Hour)
	open := func() (*memory.Self, *memorytest.LogBuffer) {
		t.Helper()
		logs := &memorytest.LogBuffer{}
		s, err := memorytest.OpenWith(memory.Options{Config: cfg, Clock: clock.NewFake(memorytest.Epoch), Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		return s, logs
	}
	s, logs := open()
	// The open's, of the empty store, is written in the background.
	testutil.EventuallyShow(t, "the open's snapshot written", func() (bool, string) {
		return metaSnapsWritten(logs) == 1, logs.String()
	})
	o := memorytest.NewOwner(t, s, "a")
	for i := range 30 {
		o.Text(fmt.Sprintf("memory %d written before the interval came", i))
	}
	if n := metaSnapsWritten(logs); n != 1 {
		t.Fatalf("%d snapshots written before Close, want 1:\n%s", n, logs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := metaSnapsWritten(logs); n != 2 {
		t.Fatalf("%d snapshots written by Close, want 2 (the open's and Close's):\n%s", n, logs)
	}

	s, logs = open()
	memorytest.MustLog(t, logs, "metadata: from its snapshot and the records written after it", "changed=0")
	if _, n := s.Counts(); n != 30 {
		t.Errorf("%d memories counted, want 30", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := metaSnapsWritten(logs); n != 0 {
		t.Errorf("%d snapshots written by a Close with the snapshot current, want 0:\n%s", n, logs)
	}
}
