// Package storetest is the conformance suite of memory/store's backends
// (perkeep's kvtest): every backend passes Run, so that what memory/
// builds on the store holds on each. It tests what a backend decides —
// reads, iteration order and snapshots, a transaction's size limit,
// refused batches, blocks, events — through the Store's public API.
// Durability across a crash is the Badger backend's alone and is tested
// with it (memory's fault tests kill a writer child).
package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// Opener opens an empty store of the backend under test with o; the
// suite closes it.
type Opener func(t *testing.T, o store.Options) *store.Store

// Run runs the suite against the stores open makes.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"GetSetDelete", testGetSetDelete},
		{"FailedOpLeavesNothing", testFailedOp},
		{"OpsApplyOnceInOrder", testOpsInOrder},
		{"LogEnd", testLogEnd},
		{"TxReads", testTxReads},
		{"Iteration", testIteration},
		{"ViewIsASnapshot", testSnapshot},
		{"OversizedBatchesSplit", testSplit},
		{"RefusedBatch", testRefused},
		{"Blocks", testBlocks},
		{"Events", testEvents},
		{"Barrier", testBarrier},
		{"Deferred", testDeferred},
		{"UpdateDeferred", testUpdateDeferred},
		{"ViewsSeeWhatWasTold", testViewsSeeWhatWasTold},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// options are the configuration's store options.
func options() store.Options { return store.OptionsOf(config.Default().Store) }

func openDefault(t *testing.T, open Opener) *store.Store {
	t.Helper()
	s := open(t, options())
	t.Cleanup(func() { s.Close() })
	return s
}

func update(t *testing.T, s *store.Store, op store.Op) {
	t.Helper()
	if err := s.Update(context.Background(), op); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s *store.Store, key string) ([]byte, bool) {
	t.Helper()
	var v []byte
	err := s.View(func(r store.Reader) error {
		var err error
		v, err = r.Get([]byte(key))
		return err
	})
	if errors.Is(err, base.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func testGetSetDelete(t *testing.T, open Opener) {
	s := openDefault(t, open)
	update(t, s, func(tx store.Tx) error {
		tx.Set([]byte("t/a"), []byte("1"))
		tx.Set([]byte("t/b"), []byte("22"))
		return nil
	})
	if v, ok := get(t, s, "t/a"); !ok || string(v) != "1" {
		t.Fatalf("t/a = %q, %v", v, ok)
	}
	err := s.View(func(r store.Reader) error {
		if ok, err := r.Has([]byte("t/b")); err != nil || !ok {
			return fmt.Errorf("Has(t/b) = %v, %v", ok, err)
		}
		if ok, err := r.Has([]byte("t/c")); err != nil || ok {
			return fmt.Errorf("Has(t/c) = %v, %v", ok, err)
		}
		it, err := r.Item([]byte("t/b"))
		if err != nil {
			return err
		}
		v, err := it.ValueCopy(nil)
		if err != nil || string(v) != "22" || it.ValueSize() != 2 || string(it.KeyCopy(nil)) != "t/b" {
			return fmt.Errorf("item t/b: %q %v size %d key %q", v, err, it.ValueSize(), it.KeyCopy(nil))
		}
		if _, err := r.Item([]byte("t/c")); !errors.Is(err, base.ErrNotFound) {
			return fmt.Errorf("Item(t/c): err = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	update(t, s, func(tx store.Tx) error {
		tx.Delete([]byte("t/a"))
		tx.Set([]byte("t/b"), []byte("3"))
		return nil
	})
	if _, ok := get(t, s, "t/a"); ok {
		t.Fatal("deleted key still read")
	}
	if v, _ := get(t, s, "t/b"); string(v) != "3" {
		t.Fatalf("overwritten t/b = %q", v)
	}
}

func testFailedOp(t *testing.T, open Opener) {
	s := openDefault(t, open)
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx store.Tx) error {
		tx.Set([]byte("t/a"), []byte("1"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the op's", err)
	}
	if _, ok := get(t, s, "t/a"); ok {
		t.Fatal("a failed op left a write")
	}
}

// Many concurrent ops: each is applied once, and an op sees the writes of
// the ops before it (a counter incremented by all of them).
func testOpsInOrder(t *testing.T, open Opener) {
	s := openDefault(t, open)
	var wg sync.WaitGroup
	const n = 200
	for i := range n {
		wg.Go(func() {
			err := s.Update(context.Background(), func(tx store.Tx) error {
				v, err := tx.Get([]byte("t/count"))
				if err != nil && !errors.Is(err, base.ErrNotFound) {
					return err
				}
				var c int
				fmt.Sscan(string(v), &c)
				tx.Set([]byte("t/count"), []byte(fmt.Sprint(c+1)))
				tx.Set(fmt.Appendf(nil, "t/item/%03d", i), []byte("x"))
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if v, _ := get(t, s, "t/count"); string(v) != fmt.Sprint(n) {
		t.Fatalf("count = %s, want %d", v, n)
	}
}

// The insertion log's end (store.KeyMemSeq), which the store answers
// without its engine once it has a value: an op reads it — with Get and
// Item — as the last commit left it, or as its batch wrote it, and not as
// a failed op or a refused batch wrote it; a view reads it as committed.
func testLogEnd(t *testing.T, open Opener) {
	full, o := FillableDisk()
	s := open(t, o)
	defer s.Close()
	read := func(tx store.Tx) (uint64, error) {
		v, err := tx.Get(store.KeyMemSeq)
		if errors.Is(err, base.ErrNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		it, err := tx.Item(store.KeyMemSeq)
		if err != nil {
			return 0, err
		}
		w, err := it.ValueCopy(nil)
		if err != nil {
			return 0, err
		}
		if string(v) != string(w) || len(v) != 8 {
			return 0, fmt.Errorf("Get %x, Item %x", v, w)
		}
		return base.DecodeU64(v), nil
	}
	next := func(tx store.Tx) error {
		n, err := read(tx)
		if err != nil {
			return err
		}
		tx.Set(store.KeyMemSeq, base.U64(n+1))
		return nil
	}
	want := func(n uint64) {
		t.Helper()
		update(t, s, func(tx store.Tx) error {
			if got, err := read(tx); err != nil || got != n {
				return fmt.Errorf("an op read the log's end %d (%v), want %d", got, err, n)
			}
			return nil
		})
		if n == 0 {
			return
		}
		if v, ok := get(t, s, string(store.KeyMemSeq)); !ok || base.DecodeU64(v) != n {
			t.Fatalf("a view read the log's end %x, want %d", v, n)
		}
	}
	want(0)
	for range 2 { // the store's engine, then the store, answers the first
		for _, err := range batch(t, s, next, next, next) { // each sees the one before
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	want(6)
	boom := errors.New("boom")
	if err := s.Update(context.Background(), func(tx store.Tx) error { next(tx); return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failed op: %v", err)
	}
	want(6)
	full.Store(true)
	if errs := batch(t, s, next, next); !errors.Is(errs[0], base.ErrDiskFull) {
		t.Fatalf("a refused batch: %v", errs)
	}
	full.Store(false)
	want(6)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := s.Update(context.Background(), next); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	want(56)
}

// batch submits ops behind one that holds the committer, so that they
// form one batch, and waits for them.
func batch(t *testing.T, s *store.Store, ops ...store.Op) []error {
	t.Helper()
	started, release := make(chan struct{}), make(chan struct{})
	hold := s.Submit(func(store.Tx) error { close(started); <-release; return nil })
	<-started // the committer's batch is formed: ops queue for the next one
	ps := make([]*store.Pending, len(ops))
	for i, op := range ops {
		ps[i] = s.Submit(op)
	}
	close(release)
	ctx := context.Background()
	if err := hold.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p.Wait(ctx)
	}
	return errs
}

// An op reads its own buffered writes (Get, Item, Has) and what earlier
// ops of its batch wrote (iterators too), but its iterators do not see
// its own buffered writes.
func testTxReads(t *testing.T, open Opener) {
	s := openDefault(t, open)
	update(t, s, func(tx store.Tx) error { tx.Set([]byte("t/0"), []byte("c")); return nil })
	var seen, own []string
	errs := batch(t, s,
		func(tx store.Tx) error { tx.Set([]byte("t/1"), []byte("a")); return nil },
		func(tx store.Tx) error {
			tx.Set([]byte("t/2"), []byte("b"))
			tx.Delete([]byte("t/0"))
			if v, err := tx.Get([]byte("t/2")); err != nil || string(v) != "b" {
				return fmt.Errorf("own write: %q %v", v, err)
			}
			if ok, err := tx.Has([]byte("t/0")); err != nil || ok {
				return fmt.Errorf("own delete: Has = %v %v", ok, err)
			}
			if it, err := tx.Item([]byte("t/2")); err != nil || it.ValueSize() != 1 {
				return fmt.Errorf("own write as item: %v", err)
			}
			if v, err := tx.Get([]byte("t/1")); err != nil || string(v) != "a" {
				return fmt.Errorf("earlier op's write: %q %v", v, err)
			}
			for key, want := range map[string]bool{"t/0": false, "t/1": false, "t/2": false, "t/3": true} {
				if got := tx.Committed([]byte(key)); got != want {
					return fmt.Errorf("Committed(%s) = %v, want %v (own writes and deletes, an earlier op's: false)", key, got, want)
				}
			}
			own = nil
			it := tx.NewIterator(store.IterOptions{Prefix: []byte("t/")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				own = append(own, string(it.Item().Key()))
			}
			return nil
		},
		func(tx store.Tx) error {
			if tx.Committed([]byte("t/0")) || !tx.Committed([]byte("t/9")) {
				return fmt.Errorf("Committed: an earlier op's delete reads as the last commit's, or an untouched key does not")
			}
			seen = nil
			it := tx.NewIterator(store.IterOptions{Prefix: []byte("t/")})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				seen = append(seen, string(it.Item().Key()))
			}
			return nil
		},
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if want := []string{"t/0", "t/1"}; !slices.Equal(own, want) {
		t.Errorf("an op's iterator saw %q, want %q (committed and the earlier op's, not its own)", own, want)
	}
	if want := []string{"t/1", "t/2"}; !slices.Equal(seen, want) {
		t.Errorf("the next op's iterator saw %q, want %q", seen, want)
	}
}

func keys(t *testing.T, s *store.Store, o store.IterOptions, seek []byte) []string {
	t.Helper()
	var out []string
	err := s.View(func(r store.Reader) error {
		it := r.NewIterator(o)
		defer it.Close()
		if seek != nil {
			it.Seek(seek)
		} else {
			it.Rewind()
		}
		for ; it.Valid(); it.Next() {
			item := it.Item()
			var v []byte
			if err := item.Value(func(b []byte) error { v = slices.Clone(b); return nil }); err != nil {
				return err
			}
			if want := "v" + string(item.Key()); string(v) != want {
				return fmt.Errorf("value of %q = %q, want %q", item.Key(), v, want)
			}
			out = append(out, string(item.KeyCopy(nil)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func testIteration(t *testing.T, open Opener) {
	s := openDefault(t, open)
	all := []string{"a/x", "b/", "b/1", "b/2\x00", "b/20", "b/2\xff", "b/3", "c/1"}
	shuffled := []string{"b/3", "a/x", "b/2\xff", "c/1", "b/", "b/20", "b/1", "b/2\x00"}
	for _, k := range shuffled { // one commit each, out of order
		update(t, s, func(tx store.Tx) error { tx.Set([]byte(k), []byte("v"+k)); return nil })
	}
	under := all[1:7]
	for _, c := range []struct {
		name string
		o    store.IterOptions
		seek []byte
		want []string
	}{
		{"prefix", store.IterOptions{Prefix: []byte("b/"), PrefetchValues: true, PrefetchSize: 2}, nil, under},
		{"seek in prefix", store.IterOptions{Prefix: []byte("b/")}, []byte("b/2"), under[2:]},
		{"seek between keys", store.IterOptions{Prefix: []byte("b/")}, []byte("b/2\x01"), under[3:]},
		{"seek past the prefix", store.IterOptions{Prefix: []byte("b/")}, []byte("b/4"), nil},
		{"reverse from the prefix's end", store.IterOptions{Prefix: []byte("b/"), Reverse: true}, []byte("b/\xff"), reversed(under)},
		{"reverse seek to a key", store.IterOptions{Prefix: []byte("b/"), Reverse: true}, []byte("b/20"), reversed(under[:4])},
		{"reverse seek between keys", store.IterOptions{Prefix: []byte("b/"), Reverse: true}, []byte("b/2\x01"), reversed(under[:3])},
		{"empty prefix", store.IterOptions{Prefix: []byte("d/")}, nil, nil},
	} {
		if got := keys(t, s, c.o, c.seek); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	update(t, s, func(tx store.Tx) error { tx.Delete([]byte("b/2\x00")); return nil })
	if got, want := keys(t, s, store.IterOptions{Prefix: []byte("b/2")}, nil), []string{"b/20", "b/2\xff"}; !slices.Equal(got, want) {
		t.Errorf("after a delete: %q, want %q", got, want)
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// A view reads one snapshot: what commits while it runs is not seen.
func testSnapshot(t *testing.T, open Opener) {
	s := openDefault(t, open)
	update(t, s, func(tx store.Tx) error { tx.Set([]byte("t/a"), []byte("old")); return nil })
	err := s.View(func(r store.Reader) error {
		update(t, s, func(tx store.Tx) error {
			tx.Set([]byte("t/a"), []byte("new"))
			tx.Set([]byte("t/b"), []byte("new"))
			return nil
		})
		if v, err := r.Get([]byte("t/a")); err != nil || string(v) != "old" {
			return fmt.Errorf("t/a in the view = %q, %v; want old", v, err)
		}
		if ok, _ := r.Has([]byte("t/b")); ok {
			return errors.New("the view saw a key committed after it began")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, s, "t/a"); string(v) != "new" {
		t.Fatalf("after the view: t/a = %q", v)
	}
}

// A batch too big for one transaction is committed in several, each op
// run once (the transaction is committed before an op whose writes it
// could not take, not discarded and run again); one op too big for any
// fails alone, writing nothing.
func testSplit(t *testing.T, open Opener) {
	o := options()
	o.MemTableMB = 8 // a transaction holds about 1.2 MiB
	s := open(t, o)
	defer s.Close()
	val := bytes.Repeat([]byte{7}, 32<<10) // under the value-log threshold
	ops := make([]store.Op, 8)
	runs := make([]atomic.Int32, len(ops))
	for i := range ops {
		ops[i] = func(tx store.Tx) error { // 512 KiB each
			runs[i].Add(1)
			for j := range 16 {
				tx.Set(fmt.Appendf(nil, "t/big/%02d/%02d", i, j), val)
			}
			return nil
		}
	}
	huge := func(tx store.Tx) error { // 3 MiB
		for j := range 96 {
			tx.Set(fmt.Appendf(nil, "t/huge/%02d", j), val)
		}
		return nil
	}
	errs := batch(t, s, append(ops[:4:4], append([]store.Op{huge}, ops[4:]...)...)...)
	for i, err := range errs {
		if i == 4 {
			if !errors.Is(err, base.ErrTooLarge) {
				t.Errorf("the oversized op: err = %v, want ErrTooLarge", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("op %d: %v", i, err)
		}
	}
	for i := range ops {
		if v, ok := get(t, s, fmt.Sprintf("t/big/%02d/15", i)); !ok || len(v) != len(val) {
			t.Errorf("op %d not written", i)
		}
		if n := runs[i].Load(); n != 1 {
			t.Errorf("op %d ran %d times, want once", i, n)
		}
	}
	if _, ok := get(t, s, "t/huge/00"); ok {
		t.Error("the oversized op left a partial write")
	}
}

// A batch that would take the file system below the reserve is refused
// (ErrDiskFull) and writes nothing; an op of it that writes nothing is
// answered as it stands on what is committed; writes resume with space.
func testRefused(t *testing.T, open Opener) {
	var free atomic.Uint64
	free.Store(1 << 19)
	o := options()
	o.MinFreeBytes = 1 << 20
	o.FreeSpace = func() (uint64, error) { return free.Load(), nil }
	s := open(t, o)
	defer s.Close()
	var saw atomic.Bool
	errs := batch(t, s,
		func(tx store.Tx) error { tx.Set([]byte("t/k"), []byte("v")); return nil },
		func(tx store.Tx) error {
			ok, err := tx.Has([]byte("t/k"))
			saw.Store(ok)
			return err
		})
	if !errors.Is(errs[0], base.ErrDiskFull) {
		t.Fatalf("the write: err = %v, want ErrDiskFull", errs[0])
	}
	if errs[1] != nil || saw.Load() {
		t.Fatalf("the read: err = %v, saw the refused write: %v", errs[1], saw.Load())
	}
	if err := s.CheckSpace(); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("CheckSpace = %v, want ErrDiskFull", err)
	}
	if _, ok := get(t, s, "t/k"); ok {
		t.Fatal("a refused write was stored")
	}
	free.Store(1 << 30)
	update(t, s, func(tx store.Tx) error { tx.Set([]byte("t/k"), []byte("v")); return nil })
	if _, ok := get(t, s, "t/k"); !ok {
		t.Fatal("writes did not resume once space was freed")
	}
}

func sum(t *testing.T, codec uint64, b []byte) cid.Cid {
	t.Helper()
	h, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(codec, h)
}

// A block enters only with the bytes of its CID and within the size
// limit, and is read back verified.
func testBlocks(t *testing.T, open Opener) {
	o := options()
	o.MaxBlockBytes = 1 << 10
	s := open(t, o)
	defer s.Close()
	ctx := context.Background()
	right := sum(t, 0x55, []byte("right"))
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutBlock(right, []byte("wrong")) }); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("mismatched block: err = %v, want ErrCorrupt", err)
	}
	big := bytes.Repeat([]byte{1}, 1<<10+1)
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutBlock(sum(t, 0x55, big), big) }); !errors.Is(err, base.ErrTooLarge) {
		t.Fatalf("oversized block: err = %v, want ErrTooLarge", err)
	}
	if ok, err := s.HasBlock(right); ok || err != nil {
		t.Fatalf("HasBlock of a refused block = %v, %v", ok, err)
	}
	if _, err := s.Block(right); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("Block of a refused block: err = %v, want ErrNotFound", err)
	}
	blocks := [][]byte{[]byte("one"), []byte("two"), bytes.Repeat([]byte{3}, 1<<10)}
	var cids []cid.Cid
	update(t, s, func(tx store.Tx) error {
		for _, b := range blocks {
			c := sum(t, 0x71, b)
			cids = append(cids, c)
			if err := tx.PutBlock(c, b); err != nil {
				return err
			}
		}
		return nil
	})
	for i, c := range cids {
		b, err := s.Block(c)
		if err != nil || !bytes.Equal(b, blocks[i]) {
			t.Fatalf("Block %d: %v", i, err)
		}
		// Blocks are keyed by multihash: another codec reads the same bytes.
		if ok, err := s.HasBlock(cid.NewCidV1(0x55, c.Hash())); !ok || err != nil {
			t.Fatalf("HasBlock %d under the raw codec = %v, %v", i, ok, err)
		}
		if n, err := s.BlockSize(c); err != nil || n != len(blocks[i]) {
			t.Fatalf("BlockSize %d = %d, %v", i, n, err)
		}
	}
	if _, err := s.BlockSize(right); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("BlockSize of a missing block: err = %v, want ErrNotFound", err)
	}
	var hashes []string
	if err := s.BlockHashes(ctx, func(h multihash.Multihash) error { hashes = append(hashes, string(h)); return nil }); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range cids {
		want = append(want, string(c.Hash()))
	}
	slices.Sort(want)
	if !slices.Equal(hashes, want) {
		t.Fatalf("BlockHashes gave %d hashes, want %d in key order", len(hashes), len(want))
	}
}

// Every durable commit is told to subscribers, in commit order, with the
// keys it wrote and their values, before its operations are acknowledged; failed ops and
// commits that write nothing are not.
func testEvents(t *testing.T, open Opener) {
	s := open(t, options())
	defer s.Close()
	var mu sync.Mutex
	var events []store.Event
	s.Subscribe(func(e store.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	told := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(events)
	}
	update(t, s, func(tx store.Tx) error {
		tx.Set([]byte("t/a"), []byte("1"))
		tx.Delete([]byte("t/b"))
		return nil
	})
	if told() != 1 {
		t.Fatalf("%d events once the first write was acknowledged, want 1", told())
	}
	s.Update(context.Background(), func(tx store.Tx) error { tx.Set([]byte("t/x"), nil); return errors.New("no") })
	update(t, s, func(tx store.Tx) error { return nil })
	errs := batch(t, s,
		func(tx store.Tx) error { tx.Set([]byte("t/c"), []byte("2")); return nil },
		func(tx store.Tx) error { tx.Set([]byte("t/y"), nil); return errors.New("no") },
		func(tx store.Tx) error { tx.Set([]byte("t/d"), nil); return nil },
	)
	if errs[0] != nil || errs[2] != nil {
		t.Fatal(errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 {
		t.Fatalf("%d events, want 2 (failed ops and empty commits tell nothing)", len(events))
	}
	var got [][]string
	for _, e := range events {
		got = append(got, e.Keys)
	}
	if want := [][]string{{"t/a", "t/b"}, {"t/c", "t/d"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("event keys %q, want %q", got, want)
	}
	// The values written, nil where deleted (a write of nothing is empty).
	if v := events[0].Values; len(v) != 2 || string(v[0]) != "1" || v[1] != nil {
		t.Errorf("first event's values %q, want 1 and nil", v)
	}
	if v := events[1].Values; len(v) != 2 || string(v[0]) != "2" || v[1] == nil || len(v[1]) != 0 {
		t.Errorf("second event's values %q, want 2 and empty", v)
	}
	if events[1].Commit != events[0].Commit+1 {
		t.Errorf("commits %d then %d, want consecutive", events[0].Commit, events[1].Commit)
	}
}

// Barrier returns once everything submitted before it is durable.
// Views taken while commits come and go — sharing snapshots between
// commits, the in-flight commit's during one — each see every commit
// told before them: the counter a view reads is at least what the last
// commit told before it wrote.
func testViewsSeeWhatWasTold(t *testing.T, open Opener) {
	s := open(t, options())
	t.Cleanup(func() { s.Close() })
	var mu sync.Mutex
	wrote := map[uint64]uint64{} // told → the counter it wrote
	s.Subscribe(func(e store.Event) {
		for i, k := range e.Keys {
			if k == "t/n" {
				mu.Lock()
				wrote[e.Told] = binary.BigEndian.Uint64(e.Values[i])
				mu.Unlock()
			}
		}
	})
	type seen struct{ told, n uint64 }
	var (
		wg    sync.WaitGroup
		views = make([][]seen, 4)
		stop  atomic.Bool
	)
	for r := range views {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				err := s.View(func(rd store.Reader) error {
					var n uint64
					if v, err := rd.Get([]byte("t/n")); err == nil {
						n = binary.BigEndian.Uint64(v)
					} else if !errors.Is(err, base.ErrNotFound) {
						return err
					}
					views[r] = append(views[r], seen{store.ToldBefore(rd), n})
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range uint64(300) {
		update(t, s, func(tx store.Tx) error {
			tx.Set([]byte("t/n"), binary.BigEndian.AppendUint64(nil, i+1))
			return nil
		})
	}
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	checked := 0
	for _, vs := range views {
		for _, v := range vs {
			// The last commit told before the view that wrote the counter.
			var want uint64
			for told := v.told; told > 0; told-- {
				if n, ok := wrote[told]; ok {
					want = n
					break
				}
			}
			if v.n < want {
				t.Fatalf("a view with ToldBefore %d read the counter at %d, but commit %d had written %d", v.told, v.n, v.told, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no view ran")
	}
}

// deferring opens a store whose deferred ops wait deferFor on a fake
// clock, recording its commits' keys, and set is an op that sets key. No
// timer is set on the clock but the deferred ops': no GC passes, no
// background table checks (with their timer set first, a wait for the
// deferred ops' ended before theirs was set, and the advance missed it: a
// hang).
func deferring(t *testing.T, open Opener, deferFor time.Duration) (s *store.Store, clk *clock.Fake, commits func() [][]string) {
	clk = clock.NewFake(time.Unix(1_000_000, 0))
	o := options()
	o.Clock, o.DeferFor = clk, deferFor
	o.GC.Interval, o.SkipTableCheck = 0, true
	s = open(t, o)
	var mu sync.Mutex
	var keys [][]string
	s.Subscribe(func(e store.Event) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, e.Keys)
	})
	return s, clk, func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(keys)
	}
}

func set(key string) store.Op {
	return func(tx store.Tx) error { tx.Set([]byte(key), []byte("v")); return nil }
}

// A deferred op waits for a group commit: one of its own once DeferFor
// has passed, with the ops deferred meanwhile, or any before that (a
// Barrier's); Close commits what is still deferred.
func testDeferred(t *testing.T, open Opener) {
	s, clk, commits := deferring(t, open, 50*time.Millisecond)
	done := func(p *store.Pending) bool {
		select {
		case <-p.Done():
			if p.Err() != nil {
				t.Fatal(p.Err())
			}
			return true
		default:
			return false
		}
	}
	a, b := s.Defer(set("t/a")), s.Defer(set("t/b"))
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no timer set for the deferred ops")
		}
		runtime.Gosched()
	}
	if done(a) || done(b) {
		t.Fatal("a deferred op was committed before DeferFor passed")
	}
	clk.Advance(50 * time.Millisecond)
	ctx := context.Background()
	if a.Wait(ctx) != nil || b.Wait(ctx) != nil {
		t.Fatal("deferred ops failed")
	}
	if c := commits(); len(c) != 1 || !slices.Equal(c[0], []string{"t/a", "t/b"}) {
		t.Fatalf("commits %q, want one of both deferred ops", c)
	}

	c := s.Defer(set("t/c"))
	if err := s.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if !done(c) {
		t.Fatal("a deferred op not committed by a barrier after it")
	}
	d := s.Defer(set("t/d"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !done(d) {
		t.Fatal("a deferred op not committed by Close")
	}
	if p := s.Defer(set("t/e")); !errors.Is(p.Err(), base.ErrClosed) {
		t.Fatalf("Defer after Close: %v", p.Err())
	}
}

// testUpdateDeferred: a deferred write waited for (a tier's step) shares
// the next group commit of a submitted one, and on a clock that does not
// move is committed all the same.
func testUpdateDeferred(t *testing.T, open Opener) {
	s, clk, commits := deferring(t, open, 20*time.Millisecond)
	ctx := context.Background()
	deferred := func(key string) chan error {
		errc := make(chan error, 1)
		go func() { errc <- s.UpdateDeferred(ctx, set(key)) }()
		return errc
	}
	wait := func(errc chan error) {
		t.Helper()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("UpdateDeferred did not return")
		}
	}

	a := deferred("t/a")
	for deadline := time.Now().Add(10 * time.Second); clk.Pending() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the committer set no timer for the deferred op")
		}
		runtime.Gosched()
	}
	if err := s.Update(ctx, set("t/b")); err != nil {
		t.Fatal(err)
	}
	wait(a)
	// Nothing else to commit, and the store's clock stands still.
	wait(deferred("t/c"))
	want := [][]string{{"t/a", "t/b"}, {"t/c"}}
	if c := commits(); !slices.EqualFunc(c, want, slices.Equal) {
		t.Fatalf("commits %q, want %q", c, want)
	}
	if c := s.CommitStats(); c.Deferred != 2 || c.Ops != 4 { // and the Barrier that committed t/c
		t.Fatalf("%d deferred ops of %d committed, want 2 of 4", c.Deferred, c.Ops)
	}
}

func testBarrier(t *testing.T, open Opener) {
	s := openDefault(t, open)
	var ps []*store.Pending
	for i := range 50 {
		ps = append(ps, s.Submit(func(tx store.Tx) error { tx.Set(fmt.Appendf(nil, "t/%02d", i), nil); return nil }))
	}
	if err := s.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		select {
		case <-p.Done():
			if p.Err() != nil {
				t.Fatalf("op %d: %v", i, p.Err())
			}
		default:
			t.Fatalf("op %d not acknowledged when the barrier after it was", i)
		}
	}
	n := 0
	err := s.View(func(r store.Reader) error {
		it := r.NewIterator(store.IterOptions{Prefix: []byte("t/")})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil || n != len(ps) {
		t.Fatalf("%d keys after the barrier (%v), want %d", n, err, len(ps))
	}
}

func testClosed(t *testing.T, open Opener) {
	s := open(t, options())
	update(t, s, func(tx store.Tx) error { tx.Set([]byte("t/a"), []byte("1")); return nil })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Update(context.Background(), func(store.Tx) error { return nil }); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("Update after Close: err = %v, want ErrClosed", err)
	}
}

// FillableDisk is the default store options on a disk that is full while
// full is set (Options.FreeSpace): a write then fails with ErrDiskFull.
func FillableDisk() (full *atomic.Bool, o store.Options) {
	full = new(atomic.Bool)
	o = store.OptionsOf(config.Default().Store)
	o.FreeSpace = func() (uint64, error) {
		if full.Load() {
			return 0, nil
		}
		return 1 << 40, nil
	}
	return full, o
}
