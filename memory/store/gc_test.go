package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// smallOptions are a store's options scaled down, so that the memtables
// flush and the value log rolls over within a test: 1 MiB memtables,
// 2 MiB value-log files, no background pass unless a test sets one.
func smallOptions() store.Options {
	o := store.OptionsOf(config.Default().Store)
	o.MemTableMB = 1
	o.ValueLogMB = 2
	o.MinFreeBytes = 2 << 20
	o.GC.Interval = 0
	return o
}

func openWith(t *testing.T, dir string, o store.Options) *store.Store {
	t.Helper()
	s, err := store.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rewrite sets every key of the round to fresh random bytes of size n,
// in operations of about 100 KB (a transaction takes 15% of a memtable).
func rewrite(t *testing.T, s *store.Store, rng *rand.ChaCha8, prefix string, keys, n int) {
	t.Helper()
	per := max(1, 100_000/n)
	for from := 0; from < keys; from += per {
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			for i := from; i < min(from+per, keys); i++ {
				v := make([]byte, n)
				rng.Read(v)
				tx.Set(fmt.Appendf(nil, "%s%06d", prefix, i), v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func disk(t *testing.T, s *store.Store) int64 {
	t.Helper()
	d, err := s.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	return d.Total()
}

// TestGCBoundsRewrittenStores rewrites a store's records over and over,
// as a long-lived self rewrites its metadata (importance, access counts,
// heat: records of a few hundred bytes, in the LSM tree) and as re-stored
// or replaced large values do (from 64 KiB, in the value log), with the
// passes of the collection and without, and checks the size of the data
// directory against a bound. The records stay bounded either way —
// Badger's compactions drop the versions replaced —; the value log grows
// with everything ever written unless the passes run, and with them stays
// within a few times what is live.
func TestGCBoundsRewrittenStores(t *testing.T) {
	const (
		records, recordSize, recordRounds = 1500, 300, 120   // 54 MB written, 0.45 MB live
		values, valueSize, valueRounds    = 8, 100 << 10, 40 // 33 MB written, 0.8 MB live
		passEvery                         = 5
	)
	type result struct{ peak, end int64 }
	run := func(t *testing.T, gc bool, prefix string, keys, size, rounds int) result {
		s := openWith(t, t.TempDir(), smallOptions())
		rng := rand.NewChaCha8([32]byte{1})
		var r result
		for round := range rounds {
			rewrite(t, s, rng, prefix, keys, size)
			if gc && round%passEvery == passEvery-1 {
				if _, err := s.GC(context.Background(), false); err != nil {
					t.Fatal(err)
				}
			}
			r.end = disk(t, s)
			r.peak = max(r.peak, r.end)
		}
		// Level 0 may hold up to three times its compaction trigger before
		// writes stall (levelZeroTables) while the compactions lag behind
		// the writes — on a busy machine they do: the end is measured once
		// they have caught up, the peak may be that much over.
		testutil.Eventually(t, "level 0 compacted", func() bool {
			n := 0
			for _, ti := range s.DB().Tables() {
				if ti.Level == 0 {
					n++
				}
			}
			return n <= 20
		})
		r.end = disk(t, s)
		return r
	}
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

	t.Run("records", func(t *testing.T) {
		live := int64(records * recordSize)
		// Memtables (five of 1 MiB, with their logs) and level 0's tables
		// (up to twenty of 1 MiB once compacted: levelZeroTables; up to
		// sixty while the compactions lag, when writes stall) come on top
		// of what is live; what is written is well over the first bound.
		bound, lagging := 4*live+32<<20, 4*live+72<<20
		for _, gc := range []bool{false, true} {
			r := run(t, gc, "m/", records, recordSize, recordRounds)
			t.Logf("records, gc %v: peak %s, end %s (live %s, %s written, bound %s, %s while compactions lag)", gc, mb(r.peak), mb(r.end), mb(live), mb(live*recordRounds), mb(bound), mb(lagging))
			if r.end > bound {
				t.Errorf("records, gc %v: the store ended at %s, over the bound %s", gc, mb(r.end), mb(bound))
			}
			if r.peak > lagging {
				t.Errorf("records, gc %v: the store reached %s, over the bound %s", gc, mb(r.peak), mb(lagging))
			}
		}
	})
	t.Run("value log", func(t *testing.T) {
		live := int64(values * valueSize)
		written := live * valueRounds
		off := run(t, false, "big/", values, valueSize, valueRounds)
		on := run(t, true, "big/", values, valueSize, valueRounds)
		// With the passes: what is live, the garbage of passEvery rounds,
		// the file being written and one rewritten (2 MiB each).
		bound := live + int64(passEvery)*live + 4<<20
		t.Logf("value log, gc off: peak %s, end %s; gc on: peak %s, end %s (live %s, %s written, bound %s)",
			mb(off.peak), mb(off.end), mb(on.peak), mb(on.end), mb(live), mb(written), mb(bound))
		if off.end < written*9/10 {
			t.Errorf("without the passes the value log kept %s of the %s written: the test no longer shows what the passes collect", mb(off.end), mb(written))
		}
		if on.peak > bound {
			t.Errorf("with the passes the store reached %s, over the bound %s", mb(on.peak), mb(bound))
		}
	})
}

// TestGCFreesDeletedData deletes large and small values and finds, after
// a pass on demand, the space freed and their bytes in no file of the
// store.
func TestGCFreesDeletedData(t *testing.T) {
	dir := t.TempDir()
	s := openWith(t, dir, smallOptions())
	ctx := context.Background()
	rng := rand.NewChaCha8([32]byte{2})
	rewrite(t, s, rng, "keep/", 4, 100<<10) // stays
	empty := disk(t, s)
	marker := []byte("forget-me-7f3a9c")
	doomed := func(i int, n int) []byte {
		v := make([]byte, n)
		rng.Read(v)
		copy(v[n/2:], marker)
		return v
	}
	for round := range 10 {
		if err := s.Update(ctx, func(tx store.Tx) error {
			for i := range 8 {
				tx.Set(fmt.Appendf(nil, "file/%d-%d", round, i), doomed(i, 200<<10))
				tx.Set(fmt.Appendf(nil, "meta/%d-%d", round, i), doomed(i, 200))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	full := disk(t, s)
	if full < empty+12<<20 {
		t.Fatalf("the store grew from %d to %d bytes only", empty, full)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		for round := range 10 {
			for i := range 8 {
				tx.Delete(fmt.Appendf(nil, "file/%d-%d", round, i))
				tx.Delete(fmt.Appendf(nil, "meta/%d-%d", round, i))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if after := disk(t, s); after < full {
		t.Fatalf("deleting freed space before any pass (%d → %d): the test shows nothing", full, after)
	}
	rep, err := s.GC(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	after := disk(t, s)
	t.Logf("before %d, full %d, after the pass %d bytes: %+v", empty, full, after, rep)
	if !rep.Compacted || rep.Rewritten == 0 || rep.Skipped != "" {
		t.Fatalf("the pass did not compact and rewrite: %+v", rep)
	}
	if after > empty+4<<20 {
		t.Fatalf("after the pass the store holds %d bytes, %d more than before the deleted data", after, after-empty)
	}
	if st := s.GCStats(); st.Passes != 1 || st.Rewritten != int64(rep.Rewritten) || st.Reclaimed <= 0 {
		t.Fatalf("stats %+v after one pass %+v", st, rep)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, marker) {
			t.Errorf("%s still holds deleted bytes", filepath.Base(f))
		}
	}
	for i := range 4 {
		if _, err := get(s, fmt.Sprintf("keep/%06d", i)); err != nil {
			t.Fatalf("a kept value after the pass: %v", err)
		}
	}
}

func get(s *store.Store, key string) ([]byte, error) {
	var v []byte
	err := s.View(func(r store.Reader) error {
		var err error
		v, err = r.Get([]byte(key))
		return err
	})
	return v, err
}

// TestGCWhileWriting runs passes on demand (which flush the memtables
// through the committer and compact) while writers write: every write is
// acknowledged and reads back.
func TestGCWhileWriting(t *testing.T) {
	s := openWith(t, t.TempDir(), smallOptions())
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	written := make([]int, 4)
	var slowest atomic.Int64 // the longest write, in ns (logged: timing is not asserted)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.NewChaCha8([32]byte{byte(w)})
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := make([]byte, 300+(i%3)*(50<<10)) // small, and large into the value log
				rng.Read(v)
				key := fmt.Sprintf("w%d/%06d", w, i)
				start := time.Now()
				if err := s.Update(ctx, func(tx store.Tx) error {
					tx.Set([]byte(key), v)
					tx.Set(fmt.Appendf(nil, "w%d/last", w), v) // rewritten: garbage for the passes
					return nil
				}); err != nil {
					errs <- fmt.Errorf("writer %d, write %d: %w", w, i, err)
					return
				}
				written[w] = i + 1
				for took := int64(time.Since(start)); ; {
					if old := slowest.Load(); took <= old || slowest.CompareAndSwap(old, took) {
						break
					}
				}
			}
		}()
	}
	var passes time.Duration
	for range 4 {
		rep, err := s.GC(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		passes += rep.Took
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("4 passes took %v; writes %v, the longest %v", passes, written, time.Duration(slowest.Load()))
	for w, n := range written {
		if n == 0 {
			t.Fatalf("writer %d wrote nothing during the passes", w)
		}
		for i := range n {
			if _, err := get(s, fmt.Sprintf("w%d/%06d", w, i)); err != nil {
				t.Fatalf("writer %d, write %d: %v", w, i, err)
			}
		}
	}
}

// TestGCLeavesHalfTheReserve: a pass that would take the disk below half
// the free-space reserve is skipped and says why; writes are not
// affected by it.
func TestGCLeavesHalfTheReserve(t *testing.T) {
	o := smallOptions()
	o.MinFreeBytes = 100 << 20
	var free sync.Map
	free.Store("bytes", uint64(1<<30))
	o.FreeSpace = func() (uint64, error) { v, _ := free.Load("bytes"); return v.(uint64), nil }
	s := openWith(t, t.TempDir(), o)
	ctx := context.Background()
	rng := rand.NewChaCha8([32]byte{3})
	for range 30 {
		rewrite(t, s, rng, "big/", 4, 100<<10)
	}
	free.Store("bytes", uint64(50<<20)) // the reserve's half: no room for what a pass writes
	rep, err := s.GC(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Compacted || rep.Rewritten != 0 || rep.Skipped == "" {
		t.Fatalf("pass with too little room: %+v", rep)
	}
	t.Logf("skipped: %s", rep.Skipped)
	if err := s.Update(ctx, func(tx store.Tx) error { tx.Set([]byte("k"), []byte("v")); return nil }); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("a write under the reserve: %v, want ErrDiskFull", err)
	}
	free.Store("bytes", uint64(1<<30))
	if rep, err = s.GC(ctx, true); err != nil || !rep.Compacted || rep.Rewritten == 0 {
		t.Fatalf("pass with room: %+v, %v", rep, err)
	}
	if st := s.GCStats(); st.Skipped != 1 || st.Passes != 2 {
		t.Fatalf("stats: %+v", st)
	}
}

// openPassing opens a small store whose passes run in the background
// every 10 minutes of the fake clock it returns; the caller closes it.
func openPassing(t *testing.T) (*store.Store, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	o := smallOptions()
	o.GC.Interval = 10 * time.Minute
	o.Clock = clk
	o.SkipTableCheck = true // its timer on the same clock: the passes' is the only one
	s, err := store.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

// nextPass moves the clock to the next background pass, once the loop has
// set its timers (the pass's, and the one that lets the value log's
// written pages go): the pass before it is counted before the loop sets
// the next timer, and a clock moved in between would fire nothing.
func nextPass(t *testing.T, clk *clock.Fake) {
	t.Helper()
	testutil.Eventually(t, "the pass's timer", func() bool { return clk.Pending() == 2 })
	clk.Advance(10 * time.Minute)
}

// TestGCRunsInTheBackground: with an interval, passes run on the store's
// clock, and stop with the store.
func TestGCRunsInTheBackground(t *testing.T) {
	s, clk := openPassing(t)
	rng := rand.NewChaCha8([32]byte{4})
	for range 30 {
		rewrite(t, s, rng, "big/", 4, 100<<10)
	}
	before := disk(t, s)
	if st := s.GCStats(); st.Passes != 0 {
		t.Fatalf("a pass before the interval: %+v", st)
	}
	nextPass(t, clk)
	testutil.Eventually(t, "a pass after the interval", func() bool { return s.GCStats().Passes > 0 })
	st := s.GCStats()
	if st.Last == nil || !st.Last.Compacted || st.Last.Rewritten == 0 || disk(t, s) >= before {
		t.Fatalf("the background pass freed nothing: %+v (disk %d → %d)", st.Last, before, disk(t, s))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers left after Close", clk.Pending())
	}
}

// A pass in the background that finds the store quiet since the last one
// (a commit every 10 s or fewer: 60 in its 10 minutes) compacts its tables
// into one level, whatever the value log's garbage; one that follows more
// writes does not, nor one that finds them in one level already.
func TestGCCompactsAnIdleStore(t *testing.T) {
	s, clk := openPassing(t)
	defer s.Close()
	levels := func() map[int]int {
		out := map[int]int{}
		for _, ti := range s.DB().Tables() {
			out[ti.Level]++
		}
		return out
	}
	rng := rand.NewChaCha8([32]byte{5})
	for range 4 { // small records, rewritten: flushed tables, no value-log garbage
		rewrite(t, s, rng, "rec/", 4000, 300)
	}
	testutil.Eventually(t, "tables in level 0", func() bool { return levels()[0] > 0 })
	commits := func(n int) {
		t.Helper()
		for i := range n {
			if err := s.Update(context.Background(), func(tx store.Tx) error {
				tx.Set([]byte("tick"), fmt.Append(nil, i))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	commits(61)
	pass := func(n int) *store.GCReport {
		t.Helper()
		nextPass(t, clk)
		testutil.Eventually(t, fmt.Sprintf("pass %d", n), func() bool { return s.GCStats().Passes >= int64(n) })
		return s.GCStats().Last
	}
	if rep := pass(1); rep.Compacted {
		t.Fatalf("the pass after writes compacted: %+v", rep)
	}
	before := levels()
	commits(60) // a background writer's trickle
	rep := pass(2)
	if !rep.Compacted {
		t.Fatalf("the pass of an idle store did not compact (tables by level %v): %+v", before, rep)
	}
	if after := levels(); len(after) != 1 || after[0] != 0 {
		t.Fatalf("after the idle pass, tables by level %v (were %v): want one level below 0", after, before)
	}
	if rep := pass(3); rep.Compacted {
		t.Fatalf("an idle store already in one level compacted again: %+v", rep)
	}
	rewrite(t, s, rng, "rec/", 4000, 300)
	commits(61)
	if rep := pass(4); rep.Compacted {
		t.Fatalf("the pass after writes compacted: %+v", rep)
	}
}

// TestPutBlockStoresLargeBlocksOnce: storing a large block again writes
// nothing (a second copy would be garbage in the value log), unless the
// stored copy is damaged.
func TestPutBlockStoresLargeBlocksOnce(t *testing.T) {
	s := openWith(t, t.TempDir(), smallOptions())
	ctx := context.Background()
	block := bytes.Repeat([]byte("a file's bytes "), 10_000) // 150 KB
	c := rawCID(t, block)
	put := func() {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutBlock(c, block) }); err != nil {
			t.Fatal(err)
		}
	}
	put()
	d0, _ := s.DiskUsage()
	for range 20 {
		put()
	}
	if d, _ := s.DiskUsage(); d.ValueLog > d0.ValueLog+64<<10 {
		t.Fatalf("storing the block 20 more times grew the value log from %d to %d bytes", d0.ValueLog, d.ValueLog)
	}
	damaged := bytes.Clone(block)
	damaged[100] ^= 1
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set(store.BlockKey(c), damaged) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(c); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("damaged block: %v", err)
	}
	put()
	if b, err := s.Block(c); err != nil || !bytes.Equal(b, block) {
		t.Fatalf("the block stored again over a damaged copy: %v", err)
	}
}

// TestSpaces measures key spaces: keys and bytes by prefix, the value
// log's share apart.
func TestSpaces(t *testing.T) {
	for name, open := range map[string]func(o store.Options) (*store.Store, error){
		"badger": func(o store.Options) (*store.Store, error) { return store.Open(t.TempDir(), o) },
		"memory": store.OpenMemory,
	} {
		t.Run(name, func(t *testing.T) {
			s, err := open(smallOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			big := make([]byte, 70<<10)
			if err := s.Update(context.Background(), func(tx store.Tx) error {
				tx.Set([]byte("m/one"), make([]byte, 10))
				tx.Set([]byte("m/two"), make([]byte, 20))
				tx.Set([]byte("b/big"), big)
				tx.Set([]byte("noslash"), nil)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			spaces, err := s.Spaces(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]store.SpaceUsage{}
			for _, sp := range spaces {
				got[sp.Space] = sp
			}
			if m := got["m/"]; m.Keys != 2 || m.Bytes != 5+10+5+20 || m.ValueLogBytes != 0 {
				t.Errorf("m/: %+v", m)
			}
			// A value in the value log is sized by Badger's estimate, within a few bytes.
			if b := got["b/"]; b.Keys != 1 || b.Bytes < 5+70<<10-16 || b.Bytes > 5+70<<10+16 || b.ValueLogBytes < 70<<10 {
				t.Errorf("b/: %+v", b)
			}
			if o := got["other"]; o.Keys != 1 || o.Bytes != 7 {
				t.Errorf("other: %+v", o)
			}
			if x := got["x/"]; x.Keys != 1 { // x/commits
				t.Errorf("x/: %+v", x)
			}
		})
	}
}
