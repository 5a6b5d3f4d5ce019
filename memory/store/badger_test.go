package store_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"expvar"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/store"
)

func openTestStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rawCID(t *testing.T, b []byte) cid.Cid {
	t.Helper()
	h, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(0x55, h)
}

// TestCorruptBlockIsNotServed damages stored blocks two ways: a value
// overwritten in Badger behind the door's back, and a byte flipped in the
// value log file on disk. Both read as base.ErrCorrupt.
func TestCorruptBlockIsNotServed(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	ctx := context.Background()

	small := []byte("a small memory block")
	cs := rawCID(t, small)
	large := bytes.Repeat([]byte("memoria-large-block-"), 10_000) // 200 KB: value log
	cl := rawCID(t, large)
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutBlock(cs, small); err != nil {
			return err
		}
		return tx.PutBlock(cl, large)
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Block(cl); err != nil || !bytes.Equal(b, large) {
		t.Fatalf("before corruption: %v", err)
	}
	// Tamper with the small block through Badger directly.
	if err := s.WriteBehind(func(txn *badger.Txn) error {
		return txn.Set(store.BlockKey(cs), []byte("a smell memory block"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(cs); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("tampered block: err = %v, want base.ErrCorrupt", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Flip one byte of the large block inside the value log on disk.
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	flipped := false
	for _, p := range vlogs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, large[:64]); i >= 0 {
			data[i+1000] ^= 0x01
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatal("large block not found in any value log file")
	}
	s = openTestStore(t, dir)
	defer s.Close()
	if b, err := s.Block(cl); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("flipped block: err = %v (%d bytes), want base.ErrCorrupt", err, len(b))
	}
}

func TestStoreDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	if _, err := store.Open(dir, store.OptionsOf(config.Default().Store)); !errors.Is(err, base.ErrLocked) {
		t.Fatalf("second open: err = %v, want base.ErrLocked", err)
	}
}

// openLogged opens the store in dir, its log in a buffer.
func openLogged(t *testing.T, dir string) (*store.Store, *bytes.Buffer, error) {
	t.Helper()
	var buf bytes.Buffer
	o := store.OptionsOf(config.Default().Store)
	o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	s, err := store.Open(dir, o)
	return s, &buf, err
}

// A table that passed the check at an open is not checked block by block
// again while its bytes stay the same (memoria.tables records them), and
// one damaged since is still named at the next open — also when its
// record is damaged too.
func TestUnchangedTablesAreNotCheckedAgain(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	for i := range 200 {
		b := []byte(fmt.Sprintf("block %d of a table that is checked once", i))
		if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutBlock(rawCID(t, b), b) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil { // the memtable flushed into a table
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table")
	}
	want := func(logs *bytes.Buffer, says string) {
		t.Helper()
		if !strings.Contains(logs.String(), says) {
			t.Fatalf("the open did not log %q:\n%s", says, logs)
		}
	}
	s, logs, err := openLogged(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	want(logs, fmt.Sprintf("in_full=%d unchanged=0", len(tables)))
	s, logs, err = openLogged(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	want(logs, fmt.Sprintf("in_full=0 unchanged=%d", len(tables)))

	testutil.FlipByte(t, tables[0], 1.0/3, 0xff)
	for _, recordToo := range []bool{false, true} {
		if recordToo {
			if err := os.WriteFile(filepath.Join(dir, "memoria.tables"), []byte("{\"format\":"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err = openLogged(t, dir)
		if name := filepath.Base(tables[0]); !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Fatalf("record damaged too: %v; err = %v, want corruption of %s", recordToo, err, name)
		}
	}
}

// Level 0 is compacted after as many memtables' bytes whatever
// store.memtable_mb (up to 20 tables): smaller memtables must not mean
// more compactions of level 0, each of which rewrites what it overlaps.
func TestLevelZeroHoldsTheSameBytesWhateverTheMemtable(t *testing.T) {
	for _, c := range []struct{ memtableMB, tables int }{{1, 20}, {8, 20}, {16, 20}, {32, 10}, {64, 5}, {256, 5}} {
		o := store.OptionsOf(config.Default().Store)
		o.MemTableMB = c.memtableMB
		s, err := store.Open(t.TempDir(), o)
		if err != nil {
			t.Fatal(err)
		}
		bo := s.DB().Opts()
		s.Close()
		if bo.NumLevelZeroTables != c.tables || bo.NumLevelZeroTablesStall != 3*c.tables {
			t.Errorf("memtable_mb %d: level 0 compacted at %d tables, writes stalled at %d; want %d and %d",
				c.memtableMB, bo.NumLevelZeroTables, bo.NumLevelZeroTablesStall, c.tables, 3*c.tables)
		}
	}
}

// TestBadgerCountsNothingProcessWide: the store's reads and writes leave
// Badger's expvar counters as they were (its metrics are off: the
// store's own are on /metrics).
func TestBadgerCountsNothingProcessWide(t *testing.T) {
	counters := []string{"badger_get_num_user", "badger_put_num_user", "badger_get_num_memtable", "badger_get_num_lsm", "badger_hit_num_lsm_bloom_filter"}
	before := make([]string, len(counters))
	for i, name := range counters {
		before[i] = expvar.Get(name).String()
	}
	dir := t.TempDir()
	s := openTestStore(t, dir)
	ctx := context.Background()
	for i := range 100 {
		if err := s.Update(ctx, func(tx store.Tx) error {
			tx.Set([]byte(fmt.Sprintf("x/%03d", i)), []byte("v"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openTestStore(t, dir) // the memtable flushed at the close: reads reach the tables
	if err := s.View(func(r store.Reader) error {
		for i := range 200 { // half of them absent
			if _, err := r.Get([]byte(fmt.Sprintf("x/%03d", i))); err != nil && !errors.Is(err, base.ErrNotFound) {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for i, name := range counters {
		if after := expvar.Get(name).String(); after != before[i] {
			t.Errorf("%s: %s before the store's work, %s after", name, before[i], after)
		}
	}
}

// TestValueLogSpaces: the embeddings (v/) go to Badger's value log
// whatever their size, the rest by its size as before;
// the key spaces report what each keeps there; all reads back after a
// reopen. A restored store places its values alike.
func TestValueLogSpaces(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	kv := map[string][]byte{
		"v/vector":   bytes.Repeat([]byte{1}, 1536),
		"e/eval":     bytes.Repeat([]byte{2}, 200),
		"m/meta":     bytes.Repeat([]byte{3}, 1536),
		"h/coaccess": bytes.Repeat([]byte{4}, 2048),
		"f/large":    bytes.Repeat([]byte{5}, 70<<10),
	}
	inLog := map[string]bool{"v/vector": true, "f/large": true}
	put(t, s, kv)
	placed := func(t *testing.T, db *badger.DB) {
		t.Helper()
		if err := db.View(func(txn *badger.Txn) error {
			for k := range kv {
				item, err := txn.Get([]byte(k))
				if err != nil {
					return err
				}
				if got := store.InValueLog(item); got != inLog[k] {
					t.Errorf("%s in the value log: %v, want %v", k, got, inLog[k])
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	placed(t, s.DB())
	spaces, err := s.Spaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range spaces {
		var want int64
		for k, v := range kv {
			if inLog[k] && strings.HasPrefix(k, sp.Space) {
				want += int64(len(k) + len(v))
			}
		}
		// Badger estimates the size of a value in its value log (the
		// length of the entry's header is not kept).
		if sp.ValueLogBytes < want-4 || sp.ValueLogBytes > want+4 || want == 0 && sp.ValueLogBytes != 0 {
			t.Errorf("space %s: %d bytes in the value log, want %d", sp.Space, sp.ValueLogBytes, want)
		}
	}
	buf, _ := backup(t, s, nil)
	s.Close()
	s = openTestStore(t, dir)
	got := contents(t, s)
	s.Close()
	for k, v := range kv {
		if got[k] != string(v) {
			t.Errorf("%s read back %d bytes, want %d", k, len(got[k]), len(v))
		}
	}
	r, _ := restore(t, buf)
	defer r.Close()
	placed(t, r.DB())
}

// TestStateDigestWhereverTheValueIs: a value a byte under the digest's
// bound for a large value digests alike whether Badger keeps it in its
// value log (where it gives only an estimate of its size) or in its tree.
func TestStateDigestWhereverTheValueIs(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	key, val := []byte("v/near"), bytes.Repeat([]byte{7}, 64<<10-64-1)
	put(t, s, map[string][]byte{string(key): val}) // v/: the value log
	_, inLog := backup(t, s, nil)
	// The same value again, written behind the store at Badger's own
	// threshold: in its tree.
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set(key, val) }); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err == nil && store.InValueLog(item) {
			t.Fatal("the rewritten value is in the value log")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, inTree := backup(t, s, nil)
	if inLog.State != inTree.State {
		t.Errorf("state digest %s with the value in the value log, %s in the tree", inLog.State, inTree.State)
	}
}

// The committer counts each batch by how long it took over it, on the
// store's clock — here each batch is one operation that moves a fake clock
// on by its duration — and logs one that took a second or more.
func TestCommitStatsCountBatchesByTheirTime(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	o := smallOptions()
	o.Clock = clk
	var logs memorytest.LogBuffer
	o.Logger = logs.Logger()
	s := openWith(t, t.TempDir(), o)
	t.Cleanup(func() { s.Close() })
	took := []time.Duration{3 * time.Millisecond, 5 * time.Millisecond, 30 * time.Millisecond,
		150 * time.Millisecond, 3 * time.Second}
	before := s.CommitStats()
	for i, d := range took {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			clk.Advance(d)
			tx.Set([]byte(fmt.Sprintf("k/%d", i)), []byte("v"))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The committer counts a batch, and logs the 3 s one, after its writes
	// are acknowledged: wait for the line before reading the counts. The
	// 150 ms batch is not logged.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "slow batch"); {
		if time.Now().After(deadline) {
			t.Fatalf("no slow batch logged: %s", logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	got := s.CommitStats()
	var counted [len(store.BatchBounds) + 1]uint64
	for i := range counted {
		counted[i] = got.Batches[i] - before.Batches[i]
	}
	// 3 and 5 ms at most 5 ms, 30 ms at most 50, 150 ms at most 200, 3 s
	// past the last bound (a batch of the store's own would take no time
	// on the fake clock).
	want := [len(store.BatchBounds) + 1]uint64{0: 2, 3: 1, 5: 1, len(store.BatchBounds): 1}
	if counted[0] >= want[0] {
		counted[0] = want[0]
	}
	if counted != want {
		t.Errorf("batches counted by time %v, want %v (bounds %v)", counted, want, store.BatchBounds)
	}
	if busy := got.Busy - before.Busy; busy < 3188*time.Millisecond {
		t.Errorf("busy %v on batches, want at least their 3.188 s", busy)
	}
	if n := strings.Count(logs.String(), "slow batch"); n != 1 || !strings.Contains(logs.String(), "took=3s ops=1") {
		t.Errorf("%d slow batches logged, want the one of 3 s and one write: %s", n, logs.String())
	}
}

// A submitted write's wait is counted by stage: queued, in its batch
// (operations and commit), until acknowledged. A deferred write (nobody
// waits for it) and an operation alone in a batch that committed nothing
// are not counted.
func TestCommitStatsCountWritesWaitsByStage(t *testing.T) {
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	o := smallOptions()
	o.Clock = clk
	s := openWith(t, t.TempDir(), o)
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	before := s.CommitStats()
	for i, d := range []time.Duration{30 * time.Millisecond, 300 * time.Millisecond} {
		if err := s.Update(ctx, func(tx store.Tx) error {
			clk.Advance(d)
			tx.Set([]byte(fmt.Sprintf("k/%d", i)), []byte("v"))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx store.Tx) error { clk.Advance(time.Second); return nil }); err != nil {
		t.Fatal(err)
	}
	// A deferred write shares the next batch: the write submitted after
	// it waits for both; it is not counted itself.
	deferred := s.Defer(func(tx store.Tx) error {
		clk.Advance(time.Second)
		tx.Set([]byte("deferred"), []byte("v"))
		return nil
	})
	if err := s.Update(ctx, func(tx store.Tx) error { tx.Set([]byte("after"), []byte("v")); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := deferred.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got := s.CommitStats()
	var batch [len(store.WaitBounds) + 1]uint64
	for i := range batch {
		batch[i] = got.Waits[store.StageBatch].Counts[i] - before.Waits[store.StageBatch].Counts[i]
	}
	// 30 ms within 50 ms, 300 ms within 500 ms, the write after the
	// deferred one within 1 s; no other write.
	want := [len(store.WaitBounds) + 1]uint64{5: 1, 8: 1, 9: 1}
	if batch != want {
		t.Errorf("writes counted by their batch's time %v, want %v (bounds %v)", batch, want, store.WaitBounds)
	}
	if total := got.Waits[store.StageBatch].Total - before.Waits[store.StageBatch].Total; total != 1330*time.Millisecond {
		t.Errorf("%v in batches, want the 1.33 s of the three writes", total)
	}
	for _, stage := range []int{store.StageQueued, store.StageAcknowledge} {
		w, b := got.Waits[stage], before.Waits[stage]
		if n := w.Counts[0] - b.Counts[0]; n != 3 || w.Total != b.Total {
			t.Errorf("stage %d: %d writes within the first bound, %v in all, want the 3 writes and no time (the clock stood still)", stage, n, w.Total-b.Total)
		}
	}
}

// The committer counts its work: every operation that wrote, the group
// commits that carried them (one per fsync), its time on batches and,
// within it, in Badger's commits. A read-only operation commits nothing.
func TestCommitStatsCountTheCommitterWork(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	before := s.CommitStats()
	for i := range 10 {
		if err := s.Update(ctx, func(tx store.Tx) error { tx.Set([]byte(fmt.Sprintf("k/%d", i)), []byte("v")); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(ctx, func(tx store.Tx) error { _, err := tx.Get([]byte("k/0")); return err }); err != nil {
		t.Fatal(err)
	}
	got := s.CommitStats()
	if ops := got.Ops - before.Ops; ops != 10 {
		t.Errorf("%d operations counted committed, want the 10 that wrote", ops)
	}
	if n := got.Commits - before.Commits; n < 1 || n > 10 {
		t.Errorf("%d commits for 10 sequential writes, want 1..10", n)
	}
	if got.Commit <= before.Commit || got.Busy < got.Commit {
		t.Errorf("busy %v, in Badger's commits %v (before: %v, %v)", got.Busy, got.Commit, before.Busy, before.Commit)
	}
}

// TestCommitStatsCountWrittenBySpace: the commits' writes are counted by
// key space — keys and bytes, a deletion its key, a key written twice in
// a batch once at its last value, a key of no space as other —, most
// bytes first.
func TestCommitStatsCountWrittenBySpace(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	t.Cleanup(func() { s.Close() })
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		tx.Set([]byte("a/1"), make([]byte, 100))
		tx.Set([]byte("a/1"), make([]byte, 10)) // the same key again: its last value
		tx.Set([]byte("a/2"), make([]byte, 20))
		tx.Delete([]byte("q/1"))
		tx.Set([]byte("nospace"), []byte("v"))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got := map[string]store.SpaceWrites{}
	var order []string
	for _, w := range s.CommitStats().Written {
		got[w.Space] = w
		order = append(order, w.Space)
	}
	want := map[string]store.SpaceWrites{
		"a/":    {Space: "a/", Keys: 2, Bytes: 3 + 10 + 3 + 20},
		"q/":    {Space: "q/", Keys: 1, Bytes: 3},
		"other": {Space: "other", Keys: 1, Bytes: 8},
	}
	for space, w := range want {
		if got[space] != w {
			t.Errorf("%s: %+v, want %+v", space, got[space], w)
		}
	}
	if !slices.IsSortedFunc(s.CommitStats().Written, func(a, b store.SpaceWrites) int { return cmp.Compare(b.Bytes, a.Bytes) }) {
		t.Errorf("spaces in the order %v, want the most bytes first", order)
	}
}

// TestCommitIntervalGathersConcurrentWrites: once a batch held three
// submitted writes, the next commit waits out the interval since the last
// began, and the writes that come meanwhile share it; a lone writer's
// writes, and those after a batch of two, never wait. (The wait is the
// test's: the interval is an hour.)
func TestCommitIntervalGathersConcurrentWrites(t *testing.T) {
	o := smallOptions()
	o.CommitInterval = time.Hour
	s := openWith(t, t.TempDir(), o)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	waits, resume := make(chan time.Duration, 8), make(chan struct{})
	store.SetPause(s, func(d time.Duration) {
		waits <- d
		select {
		case <-resume:
		case <-ctx.Done(): // the test failed: let the store close
		}
	})
	write := func(key string) store.Op {
		return func(tx store.Tx) error { tx.Set([]byte(key), []byte("v")); return nil }
	}
	wait := func(ps ...*store.Pending) {
		t.Helper()
		for _, p := range ps {
			if err := p.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	noWait := func(when string) {
		t.Helper()
		if len(waits) != 0 {
			t.Fatalf("%s: the committer waited %v", when, <-waits)
		}
	}
	commits := func() uint64 { return s.CommitStats().Commits }

	for i := range 3 {
		wait(s.Submit(write(fmt.Sprintf("lone/%d", i))))
	}
	noWait("a lone writer")

	// A batch of n: the writes queue while a blocking one's commit runs.
	batchOf := func(n int) {
		t.Helper()
		gate, entered := make(chan struct{}), make(chan struct{})
		pa := s.Submit(func(tx store.Tx) error {
			close(entered)
			<-gate
			tx.Set([]byte("a"), []byte("v"))
			return nil
		})
		<-entered
		before := commits()
		ps := []*store.Pending{pa}
		for i := range n {
			ps = append(ps, s.Submit(write(fmt.Sprintf("batch/%d/%d", n, i))))
		}
		close(gate)
		wait(ps...)
		if got := commits() - before; got != 2 {
			t.Fatalf("a, then %d writes took %d commits, want 2 (the %d in one)", n, got, n)
		}
	}
	batchOf(2)
	noWait("after batches of one and two")
	wait(s.Submit(write("after two")))
	noWait("after a batch of two")
	batchOf(3)
	noWait("after a batch of one")

	// The next write waits; one submitted meanwhile shares its commit.
	before := commits()
	pd := s.Submit(write("d"))
	select {
	case d := <-waits:
		if d <= 0 || d > time.Hour {
			t.Fatalf("waited %v, want within the interval", d)
		}
	case <-ctx.Done():
		t.Fatal("no wait after a batch of two")
	}
	pe := s.Submit(write("e"))
	select {
	case <-pd.Done():
		t.Fatal("d was committed during the wait")
	default:
	}
	resume <- struct{}{}
	wait(pd, pe)
	if n := commits() - before; n != 1 {
		t.Fatalf("d and e took %d commits, want 1", n)
	}

	// Then a lone writer: no wait after that batch of two.
	wait(s.Submit(write("f")), s.Submit(write("g")))
	noWait("after a batch of two")
}

// TestBarrierWaitsForDeferred: an operation submitted after a deferred
// one is not committed before it — a Barrier after a Defer returns with
// the deferred operation durable — while other writers keep the committer
// filling batches.
func TestBarrierWaitsForDeferred(t *testing.T) {
	o := smallOptions()
	o.DeferFor = time.Hour // a deferred operation goes only with the next batch
	s := openWith(t, t.TempDir(), o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stop := make(chan struct{})
	var busy sync.WaitGroup
	for w := range 4 {
		busy.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("busy/%d/%d", w, i)
				s.Update(ctx, func(tx store.Tx) error { tx.Set([]byte(key), []byte("v")); return nil })
			}
		})
	}
	defer func() { close(stop); busy.Wait() }()
	for i := range 500 {
		d := s.Defer(func(tx store.Tx) error { tx.Set([]byte(fmt.Sprintf("deferred/%d", i)), []byte("v")); return nil })
		if err := s.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-d.Done():
		default:
			t.Fatalf("write %d: a Barrier after a Defer returned before the deferred write was committed", i)
		}
	}
}

// An operation after a write behind the committer's back reads the
// insertion log's end it wrote, not the committer's record of it.
func TestOpsReadTheLogEndWrittenBehind(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	set := func(tx store.Tx) error { tx.Set(store.KeyMemSeq, base.U64(7)); return nil }
	if err := s.Update(ctx, set); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set(store.KeyMemSeq, base.U64(42)) }); err != nil {
		t.Fatal(err)
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		if v, err := tx.Get(store.KeyMemSeq); err != nil || base.DecodeU64(v) != 42 {
			return fmt.Errorf("an op read the log's end %x, %v after a write behind, want 42", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewGetsAValueOfItsOwn: a view's Get gives a value of the tree in
// the buffer Badger made for that read, not copied again — one
// allocation fewer than ValueCopy —, each read its own; a value of the
// value log copied out of its mapped file, readable once the store is
// closed.
func TestViewGetsAValueOfItsOwn(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	kv := map[string][]byte{
		"m/tree":  bytes.Repeat([]byte{3}, 300),
		"v/log":   bytes.Repeat([]byte{1}, 1536),
		"f/large": bytes.Repeat([]byte{5}, 70<<10),
	}
	put(t, s, kv)
	var held [][]byte
	if err := s.View(func(r store.Reader) error {
		for k, want := range kv {
			a, err := r.Get([]byte(k))
			if err != nil {
				return err
			}
			b, err := r.Get([]byte(k))
			if err != nil {
				return err
			}
			a[0]++
			if !bytes.Equal(b, want) {
				t.Errorf("%s: a second read sees the first's change", k)
			}
			a[0]--
			held = append(held, a)
		}
		key := []byte("m/tree")
		gets := testing.AllocsPerRun(50, func() { _, _ = r.Get(key) })
		copies := testing.AllocsPerRun(50, func() {
			it, _ := r.Item(key)
			_, _ = it.ValueCopy(nil)
		})
		if gets >= copies {
			t.Errorf("Get allocates %v times a read, Item and ValueCopy %v", gets, copies)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, v := range held { // read after the value log's files are unmapped
		if n := bytes.Count(v, v[:1]); n != len(v) {
			t.Errorf("a value read before the close changed: %d of %d bytes as its first", n, len(v))
		}
	}
}
