package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/store/storetest"
	"github.com/memoria-ai/memoria/messages"
)

// buffered is a store whose metadata buffers touches, and the hot states
// its commits wrote.
type buffered struct {
	st     *store.Store
	m      *Store
	writes *atomic.Int64
}

func openTouches(t *testing.T, o TouchOptions, so store.Options) buffered {
	t.Helper()
	st, err := store.OpenMemory(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := buffered{st: st, m: New(st, 64, config.Default().Recall), writes: new(atomic.Int64)}
	st.Subscribe(func(e store.Event) {
		for _, k := range e.Keys {
			if strings.HasPrefix(k, string(HotPrefix)) {
				b.writes.Add(1)
			}
		}
	})
	b.m.BufferTouches(st, o)
	return b
}

// touch records a recall of cids, all of sona s at tick.
func (b buffered) touch(t *testing.T, tick int64, cids ...cid.Cid) {
	t.Helper()
	sonas := slices.Repeat([]string{"s"}, len(cids))
	if err := b.st.Update(context.Background(), b.m.Touch(cids, sonas, func(string) (int64, bool) { return tick, true })); err != nil {
		t.Fatal(err)
	}
}

// stored is c's hot state as the store holds it, past the buffer.
func (b buffered) stored(t *testing.T, c cid.Cid) Hot {
	t.Helper()
	var h Hot
	err := b.st.View(func(r store.Reader) error {
		m, err := Read(r, c)
		if err == nil {
			h = HotOf(m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Touches wait in memory, read back into every view's read of the
// metadata, then are written once for each memory, as the writes of each
// recall's would have left them.
func TestBufferedTouchesAreReadBackThenWrittenOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openTouches(t, TouchOptions{Every: 30 * time.Second, Clock: clk}, store.OptionsOf(config.Default().Store))
	direct, dm := open(t) // each recall's touches written with it
	var cids, dcids []cid.Cid
	for i, text := range []string{"a", "b", "c"} {
		meta := &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.5, AccessCount: int64(i), LastAccessTick: 4}
		cids = append(cids, put(t, b.st, text, meta))
		dcids = append(dcids, put(t, direct, text, meta))
	}
	a, bb := cids[0], cids[1]
	metaOf(t, b.m, a) // cached before the touches
	recalls := []struct {
		tick int64
		of   []int
	}{{5, []int{0, 1}}, {7, []int{0}}, {6, []int{1, 0}}, {3, []int{2}}}
	for _, r := range recalls {
		var of, dof []cid.Cid
		for _, i := range r.of {
			of, dof = append(of, cids[i]), append(dof, dcids[i])
		}
		b.touch(t, r.tick, of...)
		activity := func(string) (int64, bool) { return r.tick, true }
		if err := direct.Update(context.Background(), dm.Touch(dof, slices.Repeat([]string{"s"}, len(dof)), activity)); err != nil {
			t.Fatal(err)
		}
	}
	want := func(i int) Hot { return HotOf(metaOf(t, dm, dcids[i])) }
	if w := want(0); w.AccessCount != 3 || w.LastAccessTick != 7 {
		t.Fatalf("the direct store's a: %+v", w)
	}
	check := func(when string) {
		t.Helper()
		for i, x := range cids {
			if got := HotOf(metaOf(t, b.m, x)); got != want(i) {
				t.Errorf("%s: memory %d reads %+v, want %+v", when, i, got, want(i))
			}
		}
	}
	check("buffered")
	if n := b.writes.Load(); n != 0 {
		t.Fatalf("%d hot states written before the interval, want none", n)
	}
	if n := b.m.TouchesWaiting(); n != 3 {
		t.Fatalf("%d memories' touches waiting, want 3", n)
	}
	if got := b.stored(t, a); got.AccessCount != 0 {
		t.Fatalf("a stored before the interval: %+v", got)
	}
	// An operation reads the hot state as stored: it may write it, and
	// the buffer adds the touches when it writes them.
	if err := b.st.Update(context.Background(), func(tx store.Tx) error {
		m, err := b.m.MetaIn(tx, bb)
		if err == nil && m.AccessCount != 1 {
			err = fmt.Errorf("an operation reads b's access count as %d, want 1 as stored", m.AccessCount)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	clk.Advance(30 * time.Second)
	if err := b.st.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.writes.Load(); n != 3 {
		t.Fatalf("%d hot states written, want 3: each memory once", n)
	}
	testutil.Eventually(t, "no touches waiting once written", func() bool { return b.m.TouchesWaiting() == 0 })
	for i, x := range cids {
		if got := b.stored(t, x); got != want(i) {
			t.Errorf("memory %d stored %+v, want %+v", i, got, want(i))
		}
	}
	check("written (not counted twice)")
}

// A write of more touches than one transaction takes is written in
// parts, and Close writes what waits.
func TestClosingWritesEveryBufferedTouch(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openTouches(t, TouchOptions{Every: time.Hour, Max: 1 << 20, Clock: clk}, store.OptionsOf(config.Default().Store))
	const n = 2*maxFlushTouches + 10
	var cids []cid.Cid
	for i := range n {
		cids = append(cids, put(t, b.st, fmt.Sprint("memory ", i), &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}}))
	}
	b.touch(t, 9, cids...)
	b.touch(t, 8, cids[:5]...)
	if err := b.m.CloseTouches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.writes.Load(); got != n {
		t.Fatalf("%d hot states written at Close, want %d", got, n)
	}
	for i, x := range cids {
		want := Hot{AccessCount: 1, LastAccessTick: 9}
		if i < 5 {
			want.AccessCount = 2
		}
		if got := b.stored(t, x); got != want {
			t.Fatalf("memory %d stored %+v, want %+v", i, got, want)
		}
	}
}

func TestBufferedTouchesPastMaxAreWrittenAtOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openTouches(t, TouchOptions{Every: time.Hour, Max: 2, Clock: clk}, store.OptionsOf(config.Default().Store))
	a := put(t, b.st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}})
	c := put(t, b.st, "c", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}})
	b.touch(t, 3, a, c)
	for deadline := time.Now().Add(10 * time.Second); b.stored(t, a).AccessCount != 1 || b.stored(t, c).AccessCount != 1; {
		if time.Now().After(deadline) {
			t.Fatal("two memories' touches waiting, at most two allowed: not written without the clock moving")
		}
		if err := b.st.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A write that fails keeps its touches (read back meanwhile) and is tried
// again; a memory forgotten while its touches wait is passed over.
func TestBufferedTouchesAreWrittenAgainAfterAFailure(t *testing.T) {
	full, so := storetest.FillableDisk()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openTouches(t, TouchOptions{Every: time.Minute, Clock: clk}, so)
	a := put(t, b.st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}})
	gone := put(t, b.st, "gone", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}})
	b.touch(t, 3, a, gone)
	full.Store(true)
	if err := b.m.FlushTouches(context.Background()); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("a write on a full disk: %v, want ErrDiskFull", err)
	}
	b.touch(t, 4, a)
	if got := HotOf(metaOf(t, b.m, a)); got.AccessCount != 2 || got.LastAccessTick != 4 {
		t.Fatalf("a after the failed write: %+v, want both recalls", got)
	}
	full.Store(false)
	if err := b.st.Update(context.Background(), func(tx store.Tx) error {
		tx.Delete(Key(gone))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.m.FlushTouches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.stored(t, a); got.AccessCount != 2 || got.LastAccessTick != 4 {
		t.Fatalf("a stored: %+v, want both recalls", got)
	}
	if err := b.st.View(func(r store.Reader) error {
		if ok, err := r.Has(HotKey(gone)); err != nil || ok {
			return fmt.Errorf("the forgotten memory's hot state written (%v)", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// While writes fail, the buffer stops growing at twice Max memories
// (besides those the failed write holds): what more recalls touch is
// dropped; what it holds is written once the writes succeed.
func TestBufferedTouchesAreBoundedWhileWritesFail(t *testing.T) {
	full, so := storetest.FillableDisk()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openTouches(t, TouchOptions{Every: time.Minute, Max: 2, Clock: clk}, so)
	var cids []cid.Cid
	for i := range 10 {
		cids = append(cids, put(t, b.st, fmt.Sprint("memory ", i), &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}}))
	}
	full.Store(true)
	for _, c := range cids {
		b.touch(t, 3, c)
		if err := b.m.FlushTouches(context.Background()); !errors.Is(err, base.ErrDiskFull) {
			t.Fatalf("a write on a full disk: %v, want ErrDiskFull", err)
		}
	}
	held := 0
	for _, c := range cids {
		if metaOf(t, b.m, c).AccessCount > 0 {
			held++
		}
	}
	if held != 5 { // the first, which the failed write holds, and 4 more, twice Max
		t.Fatalf("%d of 10 memories' touches held while the writes fail, want 5", held)
	}
	full.Store(false)
	if err := b.m.FlushTouches(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, c := range cids {
		if got, want := b.stored(t, c).AccessCount, int64(min(1, max(0, 5-i))); got != want {
			t.Fatalf("memory %d stored with %d accesses, want %d", i, got, want)
		}
	}
}
