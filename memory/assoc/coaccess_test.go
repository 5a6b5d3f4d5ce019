package assoc_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/store/storetest"
)

// buffered is a store whose graph buffers co-access, and the number of
// co-access lists its commits wrote.
type buffered struct {
	s      *store.Store
	g      *assoc.Graph
	writes *atomic.Int64
}

func openBuffered(t testing.TB, o assoc.BufferOptions, so store.Options) buffered {
	t.Helper()
	s, err := store.OpenMemory(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := buffered{s: s, g: assoc.NewGraph(s, 64), writes: new(atomic.Int64)}
	s.Subscribe(func(e store.Event) {
		for _, k := range e.Keys {
			if strings.HasPrefix(k, string(assoc.KeyCoAccess)) {
				b.writes.Add(1)
			}
		}
	})
	b.g.Buffer(s, o)
	return b
}

func (b buffered) strengthen(t *testing.T, agent string, together []cid.Cid, now int64) {
	t.Helper()
	if err := b.s.Update(context.Background(), b.g.Strengthen(agent, together, 0.05, now)); err != nil {
		t.Fatal(err)
	}
}

// partners reads c's co-access partners for "agent" through g.
func partners(t *testing.T, g *assoc.Graph, c cid.Cid) []assoc.Link {
	t.Helper()
	out, err := g.CoAccess("agent", c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// forget forgets gone's links for "agent" in s, telling g's buffer first
// (as the forgetting does) when g is not nil.
func forget(t *testing.T, s *store.Store, g *assoc.Graph, gone cid.Cid) {
	t.Helper()
	err := s.Update(context.Background(), func(tx store.Tx) error {
		if g != nil {
			g.Forgotten([]cid.Cid{gone})
		}
		return assoc.Forget(tx, []cid.Cid{gone}, []string{"agent"}, func(x cid.Cid) bool { return x == gone })
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stored reads c's co-access list for agent as the store holds it.
func stored(t *testing.T, s *store.Store, agent string, c cid.Cid) []assoc.Link {
	t.Helper()
	var out []assoc.Link
	if err := s.View(func(r store.Reader) error {
		var err error
		out, err = assoc.Read(r, assoc.CoAccessKey(agent, c))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameLinks(got, want []assoc.Link) error {
	if len(got) != len(want) {
		return fmt.Errorf("%v, want %v", got, want)
	}
	for i := range got {
		if got[i].Target != want[i].Target || got[i].Type != want[i].Type || math.Abs(got[i].Strength-want[i].Strength) > 1e-12 {
			return fmt.Errorf("%v, want %v", got, want)
		}
	}
	return nil
}

func TestBufferedCoAccessIsReadBackThenWrittenOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: 5 * time.Second, Clock: clk}, store.OptionsOf(config.Default().Store))
	direct := openStore(t) // each recall's strengthening written with it
	dg := assoc.NewGraph(direct, 64)
	a, bb, c, d := cidOf(t, "a"), cidOf(t, "b"), cidOf(t, "c"), cidOf(t, "d")
	recalls := [][]cid.Cid{{a, bb, c}, {a, bb}, {bb, c, d}, {a, bb}, {d, a}}
	for i, together := range recalls {
		b.strengthen(t, "agent", together, int64(100+i))
		if err := direct.Update(context.Background(), assoc.Strengthen("agent", together, 0.05, int64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	b.strengthen(t, "other", []cid.Cid{a, d}, 200)

	for _, x := range []cid.Cid{a, bb, c, d} {
		if err := sameLinks(partners(t, b.g, x), partners(t, dg, x)); err != nil {
			t.Errorf("%s's partners before the write: %v", x, err)
		}
	}
	if n := b.writes.Load(); n != 0 {
		t.Fatalf("%d co-access lists written before the interval, want none", n)
	}

	clk.Advance(5 * time.Second)
	if err := b.s.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.writes.Load(); n != 6 {
		t.Fatalf("%d co-access lists written, want 6: each list once (a, b, c, d; a and d for the other agent)", n)
	}
	for _, x := range []cid.Cid{a, bb, c, d} {
		if err := sameLinks(stored(t, b.s, "agent", x), stored(t, direct, "agent", x)); err != nil {
			t.Errorf("%s's stored partners: %v", x, err)
		}
		got, _ := b.g.CoAccess("agent", x)
		if err := sameLinks(got, stored(t, direct, "agent", x)); err != nil {
			t.Errorf("%s's partners after the write: %v (not applied twice)", x, err)
		}
	}
	if got := stored(t, b.s, "other", a); len(got) != 1 || got[0].Target != d {
		t.Errorf("the other agent's partners of a: %v, want d alone", got)
	}
}

func TestBufferedCoAccessForgetsTheForgotten(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Minute, Clock: clk}, store.OptionsOf(config.Default().Store))
	a, gone, c := cidOf(t, "a"), cidOf(t, "gone"), cidOf(t, "c")
	b.strengthen(t, "agent", []cid.Cid{a, gone, c}, 100)
	if err := b.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.strengthen(t, "agent", []cid.Cid{a, gone}, 101) // buffered when the forgetting comes
	forget(t, b.s, b.g, gone)
	b.strengthen(t, "agent", []cid.Cid{a, gone, c}, 102) // a recall that read it before

	check := func(when string, read func(cid.Cid) []assoc.Link) {
		t.Helper()
		if got := read(gone); len(got) != 0 {
			t.Errorf("%s: the forgotten memory's partners %v, want none", when, got)
		}
		for _, x := range []cid.Cid{a, c} {
			for _, l := range read(x) {
				if l.Target == gone {
					t.Errorf("%s: %s still partners the forgotten memory: %v", when, x, read(x))
				}
			}
		}
		if got := read(a); len(got) != 1 || got[0].Target != c {
			t.Errorf("%s: a's partners %v, want c", when, got)
		}
	}
	check("buffered", func(x cid.Cid) []assoc.Link {
		got, err := b.g.CoAccess("agent", x)
		if err != nil {
			t.Fatal(err)
		}
		return got
	})
	if err := b.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("written", func(x cid.Cid) []assoc.Link { return stored(t, b.s, "agent", x) })

	// A minute on, with nothing else happening, the buffer lets go of
	// the forgotten (a forget of a million memories would hold them all).
	clk.Advance(2 * time.Minute)
	b.strengthen(t, "agent", []cid.Cid{a, gone}, 103)
	if got, _ := b.g.CoAccess("agent", gone); len(got) != 1 {
		t.Fatalf("two minutes after the forgetting, the buffer still keeps the memory out: %v", got)
	}
}

func TestBufferedCoAccessIsWrittenAgainAfterAFailure(t *testing.T) {
	full, so := storetest.FillableDisk()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Minute, Clock: clk}, so)
	a, c := cidOf(t, "a"), cidOf(t, "c")
	b.strengthen(t, "agent", []cid.Cid{a, c}, 100)
	full.Store(true)
	if err := b.g.Flush(context.Background()); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("a flush on a full disk: %v, want ErrDiskFull", err)
	}
	b.strengthen(t, "agent", []cid.Cid{a, c}, 101)
	if got, _ := b.g.CoAccess("agent", a); len(got) != 1 || math.Abs(got[0].Strength-(1-0.95*0.95)) > 1e-12 {
		t.Fatalf("a's partners after the failed write: %v, want c at %v (both recalls)", got, 1-0.95*0.95)
	}
	full.Store(false)
	if err := b.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, b.s, "agent", a); len(got) != 1 || math.Abs(got[0].Strength-(1-0.95*0.95)) > 1e-12 {
		t.Fatalf("a's stored partners: %v, want c at %v", got, 1-0.95*0.95)
	}
}

func TestBufferedCoAccessPastMaxListsIsWrittenAtOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, MaxLists: 2, Clock: clk}, store.OptionsOf(config.Default().Store))
	a, c := cidOf(t, "a"), cidOf(t, "c")
	b.strengthen(t, "agent", []cid.Cid{a, c}, 100)
	for deadline := time.Now().Add(10 * time.Second); len(stored(t, b.s, "agent", a)) == 0 || len(stored(t, b.s, "agent", c)) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("two lists waiting, at most two allowed: not written without the clock moving")
		}
		if err := b.s.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestClosingTheGraphWritesEveryBufferedList(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, MaxLists: 1 << 20, Clock: clk}, store.OptionsOf(config.Default().Store))
	const pairs = 1100 // more lists than one flush writes
	for i := range pairs {
		b.strengthen(t, "agent", []cid.Cid{cidOf(t, fmt.Sprint("x", i)), cidOf(t, fmt.Sprint("y", i))}, 100)
	}
	if err := b.g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := b.s.View(func(r store.Reader) error {
		return store.Scan(r, assoc.KeyCoAccess, func(k, v []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2*pairs {
		t.Fatalf("%d co-access lists stored after Close, want %d", n, 2*pairs)
	}
}

func TestFlushEndsUnderASteadyLoad(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, Clock: clk}, store.OptionsOf(config.Default().Store))
	a, c := cidOf(t, "a"), cidOf(t, "c")
	b.strengthen(t, "agent", []cid.Cid{a, c}, 100)
	stop := make(chan struct{})
	var adders sync.WaitGroup
	for g := range 4 { // recalls that never stop, their traces not waited for
		adders.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				x, y := cidOf(t, fmt.Sprint("x", g, i)), cidOf(t, fmt.Sprint("y", g, i))
				b.s.Submit(b.g.Strengthen("agent", []cid.Cid{x, y}, 0.05, 100))
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := b.g.Flush(ctx)
	close(stop)
	adders.Wait()
	if err != nil {
		t.Fatalf("Flush while recalls go on: %v, want it done with what was buffered when it was called", err)
	}
	if got := stored(t, b.s, "agent", a); len(got) != 1 {
		t.Fatalf("a's stored partners after the Flush: %v, want c", got)
	}
}

// While writes fail, the buffer stops growing at twice MaxLists lists
// (besides those the failed flush holds): what more recalls strengthen is
// dropped; what it holds is written once the writes succeed.
func TestBufferedCoAccessIsBoundedWhileWritesFail(t *testing.T) {
	full, so := storetest.FillableDisk()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Minute, MaxLists: 2, Clock: clk}, so)
	full.Store(true)
	pair := func(i int) []cid.Cid { return []cid.Cid{cidOf(t, fmt.Sprint("x", i)), cidOf(t, fmt.Sprint("y", i))} }
	for i := range 10 {
		b.strengthen(t, "agent", pair(i), 100)
		if err := b.g.Flush(context.Background()); !errors.Is(err, base.ErrDiskFull) {
			t.Fatalf("a flush on a full disk: %v, want ErrDiskFull", err)
		}
	}
	buffered := 0
	for i := range 10 {
		if got, _ := b.g.CoAccess("agent", pair(i)[0]); len(got) > 0 {
			buffered++
		}
	}
	if buffered != 3 { // the first, which the failed flush holds, and 4 lists, twice MaxLists
		t.Fatalf("%d of 10 pairs buffered while the writes fail, want 3", buffered)
	}
	full.Store(false)
	if err := b.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Buffered again, not dropped. (At MaxLists the add starts a flush: a
	// read that races it sees the list buffered, flushing or written —
	// or, from a view begun before the flush committed, flushed:
	// TestViewOlderThanAFlushKeepsItsStrengthening.)
	b.strengthen(t, "agent", pair(10), 100)
	if got, _ := b.g.CoAccess("agent", pair(10)[0]); len(got) != 1 {
		t.Fatalf("after the writes succeed: %v, want the new pair buffered", got)
	}
	for i := range 3 {
		if got := stored(t, b.s, "agent", pair(i)[0]); len(got) != 1 {
			t.Fatalf("pair %d's list as stored: %v, want its partner", i, got)
		}
	}
}

// A view begun before a flush commits reads the lists as they were, and
// the buffer no longer holds what the flush wrote: the view still gets
// that strengthening, once — as a view begun after the flush does.
func TestViewOlderThanAFlushKeepsItsStrengthening(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, Clock: clk}, store.OptionsOf(config.Default().Store))
	a, c := cidOf(t, "a"), cidOf(t, "c")
	b.strengthen(t, "agent", []cid.Cid{a, c}, 100)
	b.strengthen(t, "agent", []cid.Cid{a, c}, 100)
	old := readInViewBeforeFlush(t, b.s, b.g, assoc.CoAccessKey("agent", a))
	if got := stored(t, b.s, "agent", a); len(got) != 1 {
		t.Fatalf("a's stored partners after the flush: %v", got)
	}
	now, err := b.g.CoAccess("agent", a)
	if err != nil {
		t.Fatal(err)
	}
	if len(old) != 1 || len(now) != 1 || old[0].Target != c || old[0].Strength != now[0].Strength {
		t.Fatalf("a's partners in a view older than the flush %v, in a newer one %v: want c, as strong", old, now)
	}
}

// readInViewBeforeFlush reads the list under key through g in a view of
// s begun before g's Flush, once the flush has committed.
func readInViewBeforeFlush(t *testing.T, s *store.Store, g *assoc.Graph, key []byte) []assoc.Link {
	t.Helper()
	viewOpen, written, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var old []assoc.Link
	var oldErr error
	go func() {
		defer close(done)
		oldErr = s.View(func(r store.Reader) error {
			close(viewOpen)
			<-written
			var err error
			old, err = g.In(r, key)
			return err
		})
	}()
	<-viewOpen
	err := g.Flush(context.Background())
	close(written)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if oldErr != nil {
		t.Fatal(oldErr)
	}
	return old
}

// The buffer numbers the memories its strengthening goes to, in tables it
// renews (targets): across many renewals and a forgetting, what it shows
// and writes is what each recall's strengthening written with it makes,
// and its pending lists use at most two tables.
func TestBufferedCoAccessAcrossRenumberedTables(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	// Written only when the test says (no flush at MaxLists, none
	// dropped); a table renewed every 8 memories.
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, MaxLists: 1 << 20, Clock: clk}, store.OptionsOf(config.Default().Store))
	assoc.SetBufferTableMax(b.g, 8)
	direct := openStore(t)
	dg := assoc.NewGraph(direct, 64)
	var pool []cid.Cid // 30 memories: no list reaches MaxLinks partners
	for i := range 30 {
		pool = append(pool, cidOf(t, fmt.Sprint("m", i)))
	}
	// same compares x's partners as the buffer shows them, and as written
	// when written.
	same := func(when string, x cid.Cid, written bool) {
		t.Helper()
		if err := sameSet(partners(t, b.g, x), partners(t, dg, x)); err != nil {
			t.Fatalf("%s: %s's partners: %v", when, x, err)
		}
		if !written {
			return
		}
		if err := sameSet(stored(t, b.s, "agent", x), stored(t, direct, "agent", x)); err != nil {
			t.Fatalf("%s: %s's partners as written: %v", when, x, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	gone := pool[0]
	renewed, lastSize := 0, 0
	for step := range 300 {
		if step == 150 {
			forget(t, b.s, b.g, gone)
			forget(t, direct, nil, gone)
		}
		var together []cid.Cid
		for _, i := range rng.Perm(len(pool))[:2+rng.IntN(4)] {
			if step < 150 || pool[i] != gone {
				together = append(together, pool[i])
			}
		}
		now := int64(100 + step)
		b.strengthen(t, "agent", together, now)
		if err := direct.Update(context.Background(), assoc.Strengthen("agent", together, 0.05, now)); err != nil {
			t.Fatal(err)
		}
		for _, x := range together {
			same(fmt.Sprint("step ", step), x, false)
		}
		size, inUse := assoc.BufferTables(b.g)
		if inUse > 2 {
			t.Fatalf("step %d: the pending lists use %d tables, want at most 2", step, inUse)
		}
		if size < lastSize {
			renewed++
		}
		lastSize = size
		if step%10 == 9 {
			if err := b.g.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, x := range pool {
				same(fmt.Sprint("flushed at step ", step), x, true)
			}
		}
	}
	if renewed < 50 {
		t.Fatalf("the buffer renewed its table %d times, want many", renewed)
	}
}

// sameSet is sameLinks up to the order of links whose strengths differ
// only by rounding (the buffer multiplies what is left, a direct write
// adds to the strength).
func sameSet(got, want []assoc.Link) error {
	if len(got) != len(want) {
		return fmt.Errorf("%v, want %v", got, want)
	}
	byTarget := map[cid.Cid]assoc.Link{}
	for _, l := range got {
		byTarget[l.Target] = l
	}
	for _, w := range want {
		g, ok := byTarget[w.Target]
		if !ok || g.Type != w.Type || math.Abs(g.Strength-w.Strength) > 1e-9 {
			return fmt.Errorf("%v, want %v", got, want)
		}
	}
	return nil
}

// Recalls strengthening and reading co-access at once, while the buffer
// writes at MaxLists and renews its table every 8 memories: under -race,
// no view's merge reads a table as the strengthening grows it (it fails
// with the merge's copy made after the lock is let go), and what is
// written names only the memories recalled, never a memory as its own
// partner.
func TestBufferedCoAccessTablesUnderConcurrentRecalls(t *testing.T) {
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, MaxLists: 4}, store.OptionsOf(config.Default().Store))
	assoc.SetBufferTableMax(b.g, 8)
	var pool []cid.Cid
	in := map[cid.Cid]bool{}
	for i := range 40 {
		c := cidOf(t, fmt.Sprint("m", i))
		pool = append(pool, c)
		in[c] = true
	}
	var recalls, readers sync.WaitGroup
	done := make(chan struct{})
	for g := range 4 {
		recalls.Add(1)
		go func() {
			defer recalls.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 200 {
				var together []cid.Cid
				for _, j := range rng.Perm(len(pool))[:2+rng.IntN(4)] {
					together = append(together, pool[j])
				}
				if err := b.s.Update(context.Background(), b.g.Strengthen("agent", together, 0.05, int64(100+i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for g := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if _, err := b.g.CoAccess("agent", pool[(i*7+g)%len(pool)]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	recalls.Wait()
	close(done)
	readers.Wait()
	if err := b.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	written := 0
	for _, x := range pool {
		for _, l := range stored(t, b.s, "agent", x) {
			written++
			if !in[l.Target] || l.Target == x || l.Strength <= 0 || l.Strength >= 1 {
				t.Fatalf("%s's written partner %v", x, l)
			}
		}
	}
	if written == 0 {
		t.Fatal("nothing written")
	}
	if _, inUse := assoc.BufferTables(b.g); inUse > 2 {
		t.Fatalf("the pending lists use %d tables, want at most 2", inUse)
	}
}

// TestBufferedCoAccessMatchesDirectAtScale reads buffered strengthening
// back as writing each recall's would have left it, with full lists and
// many partners waiting for each (more than a list keeps, counting
// those written and those waiting), before and after the buffer is
// written. A memory has at most MaxLinks partners here: past that, the
// buffer keeps partners a list written at each recall would have dropped.
func TestBufferedCoAccessMatchesDirectAtScale(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, Clock: clk}, store.OptionsOf(config.Default().Store))
	direct := openStore(t)
	dg := assoc.NewGraph(direct, 64)
	mems := make([]cid.Cid, assoc.MaxLinks+1)
	for i := range mems {
		mems[i] = cidOf(t, fmt.Sprint("m", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	recall := func(i int) {
		together := make([]cid.Cid, 2+rng.IntN(9))
		for j := range together {
			together[j] = mems[rng.IntN(len(mems))]
		}
		b.strengthen(t, "agent", together, int64(100+i))
		if err := direct.Update(context.Background(), assoc.Strengthen("agent", together, 0.05, int64(100+i))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		full := 0
		for _, x := range mems {
			want := partners(t, dg, x)
			if len(want) == assoc.MaxLinks {
				full++
			}
			// Strengths computed in another order differ in their last
			// bits, so links alike but for those may come in either order.
			got := partners(t, b.g, x)
			byTarget := func(a, b assoc.Link) int { return strings.Compare(a.Target.KeyString(), b.Target.KeyString()) }
			slices.SortFunc(got, byTarget)
			slices.SortFunc(want, byTarget)
			if err := sameLinks(got, want); err != nil {
				t.Fatalf("%s: %s's partners: %v", when, x, err)
			}
		}
		if full == 0 {
			t.Fatalf("%s: no list is full: the test reads no list past MaxLinks", when)
		}
	}
	for i := range 400 {
		recall(i)
	}
	check("buffered")
	if err := b.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 200 { // and more on top of what was written
		recall(400 + i)
	}
	check("written, then buffered again")
}

// BenchmarkBufferedCoAccessRead reads full co-access lists whose partners
// are all strengthened again in the buffer: what a recall's affinity and
// co-access paths read at 100k memories under load.
func BenchmarkBufferedCoAccessRead(b *testing.B) {
	bs := openBuffered(b, assoc.BufferOptions{Every: time.Hour}, store.OptionsOf(config.Default().Store))
	mems := make([]cid.Cid, 2*assoc.MaxLinks)
	for i := range mems {
		mems[i] = cidOf(b, fmt.Sprint("m", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	recall := func() {
		together := make([]cid.Cid, 10)
		for j := range together {
			together[j] = mems[rng.IntN(len(mems))]
		}
		if err := bs.s.Update(context.Background(), bs.g.Strengthen("agent", together, 0.05, 100)); err != nil {
			b.Fatal(err)
		}
	}
	for range 300 {
		recall()
	}
	if err := bs.g.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	for range 100 {
		recall()
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := bs.g.CoAccess("agent", mems[i%len(mems)]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBufferedCoAccessWritesTheOldestListsFirst: a flush takes the lists
// that have waited longest, so that none waits longer than the lists
// before it take to be written.
func TestBufferedCoAccessWritesTheOldestListsFirst(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: 5 * time.Second, Clock: clk}, store.OptionsOf(config.Default().Store))
	mems := make([]cid.Cid, assoc.MaxFlushLists+1000) // more lists than a flush writes
	for i := range mems {
		mems[i] = cidOf(t, fmt.Sprint("m", i))
	}
	for i := 0; i < len(mems); i += 2 { // each recall's two lists, in mems' order
		b.strengthen(t, "agent", mems[i:i+2], int64(100+i))
	}
	if n := b.g.Waiting(); n != len(mems) {
		t.Fatalf("%d lists waiting, want %d", n, len(mems))
	}
	clk.Advance(5 * time.Second)
	testutil.Eventually(t, "a flush", func() bool { return b.writes.Load() >= assoc.MaxFlushLists })
	if err := b.s.Barrier(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := b.writes.Load(); n != assoc.MaxFlushLists {
		t.Fatalf("%d lists written, want one flush's %d", n, assoc.MaxFlushLists)
	}
	testutil.Eventually(t, "the flush's lists to stop waiting", func() bool { return b.g.Waiting() == len(mems)-assoc.MaxFlushLists })
	for i, m := range mems {
		if written, oldest := stored(t, b.s, "agent", m) != nil, i < assoc.MaxFlushLists; written != oldest {
			t.Fatalf("list %d of %d written: %v, want %v (the oldest first)", i, len(mems), written, oldest)
		}
	}
}

// A list the buffer holds is one object — its deltas —: its key is a
// hash, the list a value in the map, and the partners' CIDs bytes in the
// buffer's table, not the recalls' strings kept alive (10,000 lists were
// 30,000 objects with a string key and a pointer a list, and some 40,000
// when the table held the recalls' CIDs).
func TestBufferedListsAreFewObjects(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, Clock: clk}, store.OptionsOf(config.Default().Store))
	const pairs = 5000
	before := testutil.HeapObjects()
	for i := range pairs {
		b.strengthen(t, "agent", []cid.Cid{cidOf(t, fmt.Sprint("x", i)), cidOf(t, fmt.Sprint("y", i))}, 100)
	}
	grew := int64(testutil.HeapObjects()) - int64(before)
	t.Logf("%d lists waiting: %d more objects on the heap", 2*pairs, grew)
	if n := b.g.Waiting(); n != 2*pairs {
		t.Fatalf("%d lists waiting, want %d", n, 2*pairs)
	}
	if grew > 3*pairs {
		t.Fatalf("%d lists waiting added %d objects", 2*pairs, grew)
	}
	if got := partners(t, b.g, cidOf(t, "x42")); len(got) != 1 || got[0].Target != cidOf(t, "y42") {
		t.Fatalf("x42's partners %v, want y42", got)
	}
}

// A new list's deltas are one slice the size of its partners: appended
// one by one, ten memories recalled together left each of their lists a
// slice of sixteen deltas for nine (and four slices before it) — at 1M
// memories under recalls, 72 of the buffer's 128 MB (README, stop 107).
func TestBufferedListsHoldRoomForTheirPartnersOnly(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	b := openBuffered(t, assoc.BufferOptions{Every: time.Hour, Clock: clk}, store.OptionsOf(config.Default().Store))
	const groups, size = 2000, 10
	together := make([][]cid.Cid, groups)
	for i := range together {
		for j := range size {
			together[i] = append(together[i], cidOf(t, fmt.Sprint(i, "/", j)))
		}
	}
	before := testutil.HeapBytes()
	for _, cs := range together {
		b.strengthen(t, "agent", cs, 100)
	}
	grew := int64(testutil.HeapBytes()) - int64(before)
	perList := float64(grew) / (groups * size)
	t.Logf("%d lists of %d partners waiting: %.0f bytes of heap each", groups*size, size-1, perList)
	if n := b.g.Waiting(); n != groups*size {
		t.Fatalf("%d lists waiting, want %d", n, groups*size)
	}
	// Nine deltas of 16 bytes are 144; the list's place in the map, its
	// key's in the order and its memory's CID in the table ~130 more.
	if perList > 320 {
		t.Fatalf("a list of %d partners takes %.0f bytes of heap", size-1, perList)
	}
	if got := partners(t, b.g, cidOf(t, "7/3")); len(got) != size-1 {
		t.Fatalf("7/3 has %d partners, want %d", len(got), size-1)
	}
}
