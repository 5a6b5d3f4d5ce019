package assoc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/store/storetest"
)

// memoryCID is a CID of the memories' form (DAG-CBOR, SHA2-256), whose
// links back a graph holds.
func memoryCID(t testing.TB, name string) cid.Cid {
	t.Helper()
	return cidOfCodec(t, model.CodecDagCBOR, name)
}

// holding is a store whose graph holds links back, the insertion log its
// puts made (by position), and the number of a/ lists its commits wrote.
type holding struct {
	t      testing.TB
	s      *store.Store
	g      *assoc.Graph
	log    *[]cid.Cid
	writes *atomic.Int64
}

func openHolding(t testing.TB, s *store.Store, log *[]cid.Cid, hold time.Duration, clk clock.Clock) holding {
	t.Helper()
	if log == nil {
		log = new([]cid.Cid)
	}
	h := holding{t: t, s: s, g: assoc.NewGraph(s, 64), log: log, writes: new(atomic.Int64)}
	s.Subscribe(func(e store.Event) {
		for _, k := range e.Keys {
			if strings.HasPrefix(k, string(assoc.KeyAssoc)) {
				h.writes.Add(1)
			}
		}
	})
	h.g.HoldLinksBack(s, assoc.HoldOptions{Hold: hold, Clock: clk, Log: func(r store.Reader, after uint64, fn func(uint64, cid.Cid) error) error {
		for i := after; i < uint64(len(*log)); i++ {
			if err := fn(i+1, (*log)[i]); err != nil {
				return err
			}
		}
		return nil
	}})
	return h
}

// put appends from, new, with its links, as an append does: its
// insertion-log position taken in the same write.
func (h holding) put(from cid.Cid, now int64, links ...assoc.Link) {
	t := h.t
	t.Helper()
	*h.log = append(*h.log, from)
	seq := uint64(len(*h.log))
	err := h.s.Update(context.Background(), func(tx store.Tx) error {
		tx.Set(store.KeyMemSeq, base.U64(seq))
		return assoc.PutNew(h.g, tx, from, links, now, seq)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// typed reads c's typed links through g (a view: what is held merged).
func typed(t *testing.T, g *assoc.Graph, c cid.Cid) []assoc.Link {
	t.Helper()
	out, err := g.Associations(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storedRaw is the list under c's a/ key as the store holds it.
func storedRaw(t *testing.T, s *store.Store, c cid.Cid) []byte {
	t.Helper()
	var raw []byte
	err := s.View(func(r store.Reader) error {
		v, err := r.Get(assoc.Key(c))
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		raw = v
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// chainOfPuts has sequential memories each link to the one before, to
// the first (drawn on by every one), and to one made by a Raw CID (whose
// link back is written at once).
func chainOfPuts(t *testing.T, put func(from cid.Cid, now int64, links ...assoc.Link)) []cid.Cid {
	var ms []cid.Cid
	raw := cidOf(t, "raw")
	for i := range 12 {
		c := memoryCID(t, fmt.Sprint("m", i))
		var links []assoc.Link
		if i > 0 {
			links = append(links, assoc.Link{Target: ms[i-1], Type: assoc.Sequential, Strength: 1},
				assoc.Link{Target: ms[0], Type: assoc.Causal, Strength: 0.1 * float64(i%5)},
				assoc.Link{Target: raw, Type: assoc.Related, Strength: 0.5})
		}
		put(c, int64(100+i), links...)
		ms = append(ms, c)
	}
	return append(ms, raw)
}

func TestHeldLinksBackAreReadBackThenWrittenOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var log []cid.Cid
	h := openHolding(t, openStore(t), &log, 30*time.Second, clk)
	direct := openStore(t) // every link back written with its memory
	dg := assoc.NewGraph(direct, 64)
	ms := chainOfPuts(t, h.put)
	chainOfPuts(t, func(from cid.Cid, now int64, links ...assoc.Link) {
		if err := direct.Update(context.Background(), func(tx store.Tx) error { return dg.Put(tx, from, links, now) }); err != nil {
			t.Fatal(err)
		}
	})
	// Each put wrote its own list and the raw CID's, nothing more.
	if n := h.writes.Load(); n != 12+11 {
		t.Fatalf("%d a/ lists written before the hold ended, want 23: each memory's own and the raw CID's", n)
	}
	if lists, _, _ := h.g.LinksBackHeld(); lists != 11 {
		t.Fatalf("%d lists hold links back, want 11 (all but the last memory's)", lists)
	}
	for _, c := range ms {
		if err := sameLinks(typed(t, h.g, c), typed(t, dg, c)); err != nil {
			t.Errorf("%s's links while held: %v", c, err)
		}
	}
	var walked [][]byte
	if err := h.s.View(func(r store.Reader) error {
		return h.g.Walk(r, assoc.Key(ms[0]), func(e assoc.Entry) bool {
			walked = append(walked, bytes.Clone(e.Target))
			return true
		})
	}); err != nil {
		t.Fatal(err)
	}
	if want := typed(t, dg, ms[0]); len(walked) != len(want) || !bytes.Equal(walked[0], want[0].Target.Bytes()) {
		t.Fatalf("the walk of the first memory's list: %d links, want %d, strongest first", len(walked), len(want))
	}

	before := h.writes.Load()
	clk.Advance(30 * time.Second)
	waitFor(t, h.s, func() bool { _, flushes, _ := h.g.LinksBackHeld(); return flushes > 0 })
	if n := h.writes.Load() - before; n != 11 {
		t.Fatalf("%d a/ lists written by the flush, want 11: each once, for all its links back", n)
	}
	for _, c := range ms {
		if got, want := storedRaw(t, h.s, c), storedRaw(t, direct, c); !bytes.Equal(got, want) {
			t.Errorf("%s's stored list after the flush differs from the one written link by link", c)
		}
		if err := sameLinks(typed(t, h.g, c), typed(t, dg, c)); err != nil {
			t.Errorf("%s's links after the flush: %v (not applied twice)", c, err)
		}
	}
	var mark uint64
	if err := h.s.View(func(r store.Reader) (err error) { mark, err = store.ReadU64(r, assoc.KeyLinksBack); return err }); err != nil || mark != 12 {
		t.Fatalf("the mark after the flush: %d, %v; want 12, the log's end", mark, err)
	}
}

// waitFor has the store's committer run until done holds (the flush a
// timer submitted commits), failing after a deadline.
func waitFor(t *testing.T, s *store.Store, done func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !done(); {
		if time.Now().After(deadline) {
			t.Fatal("not done within 10 s")
		}
		if err := s.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A crash loses the links back held, and the next open reads them again
// from their memories' own lists, from the mark the last flush wrote.
func TestLinksBackLostToACrashAreReadAgain(t *testing.T) {
	dir := t.TempDir()
	so := store.OptionsOf(config.Default().Store)
	s, err := store.Open(dir, so)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	var log []cid.Cid
	h := openHolding(t, s, &log, 30*time.Second, clk)
	if n, err := h.g.Recover(context.Background(), s); err != nil || n != 0 {
		t.Fatalf("Recover of a new store: %d, %v", n, err)
	}
	first := memoryCID(t, "first")
	h.put(first, 99)
	second := memoryCID(t, "second")
	h.put(second, 100, assoc.Link{Target: first, Type: assoc.Sequential, Strength: 1})
	if err := h.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := chainOfPuts(t, h.put) // held, never written: the crash comes
	if lists, _, _ := h.g.LinksBackHeld(); lists == 0 {
		t.Fatal("nothing held before the crash")
	}
	if err := s.Close(); err != nil { // the graph is not closed: what it holds is lost
		t.Fatal(err)
	}

	s, err = store.Open(dir, so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h = openHolding(t, s, &log, 30*time.Second, clk)
	n, err := h.g.Recover(context.Background(), s)
	if err != nil || n != len(ms)-1 {
		t.Fatalf("Recover: %d memories read again, %v; want %d, those after the mark", n, err, len(ms)-1)
	}
	direct := openStore(t)
	dg := assoc.NewGraph(direct, 64)
	if err := direct.Update(context.Background(), func(tx store.Tx) error {
		return dg.Put(tx, second, []assoc.Link{{Target: first, Type: assoc.Sequential, Strength: 1}}, 100)
	}); err != nil {
		t.Fatal(err)
	}
	chainOfPuts(t, func(from cid.Cid, now int64, links ...assoc.Link) {
		if err := direct.Update(context.Background(), func(tx store.Tx) error { return dg.Put(tx, from, links, now) }); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range append(ms, first, second) {
		if err := sameLinks(typed(t, h.g, c), typed(t, dg, c)); err != nil {
			t.Errorf("%s's links read again: %v", c, err)
		}
	}
	if err := h.g.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range ms {
		if err := sameLinks(typedStored(t, h.s, c), typedStored(t, direct, c)); err != nil {
			t.Errorf("%s's stored links after the close: %v", c, err)
		}
	}
}

// typedStored reads c's typed list as s holds it.
func typedStored(t *testing.T, s *store.Store, c cid.Cid) []assoc.Link {
	t.Helper()
	var out []assoc.Link
	if err := s.View(func(r store.Reader) (err error) { out, err = assoc.Read(r, assoc.Key(c)); return err }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Forgetting a memory takes it out of the lists of the memories whose
// links to it are held for its own list, and drops what is held of it
// and toward it.
func TestForgettingDropsTheLinksBackHeld(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	h := openHolding(t, openStore(t), nil, time.Hour, clk)
	x, gone, y := memoryCID(t, "x"), memoryCID(t, "gone"), memoryCID(t, "y")
	h.put(x, 100)
	h.put(gone, 101, assoc.Link{Target: x, Type: assoc.Sequential, Strength: 1}) // held for x
	h.put(y, 102, assoc.Link{Target: gone, Type: assoc.Causal, Strength: 1})     // held for gone
	if got := typed(t, h.g, gone); len(got) != 2 {
		t.Fatalf("gone's links before the forgetting: %v, want x and y", got)
	}
	err := h.s.Update(context.Background(), func(tx store.Tx) error {
		tx.Set(store.TombstoneKey(gone), []byte{1})
		return h.g.Forget(tx, []cid.Cid{gone}, nil, func(c cid.Cid) bool { return c == gone })
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []cid.Cid{x, y} {
		for _, l := range typed(t, h.g, c) {
			if l.Target == gone {
				t.Errorf("%s still links to the memory forgotten: %v", c, typed(t, h.g, c))
			}
		}
	}
	if err := h.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if raw := storedRaw(t, h.s, gone); raw != nil {
		t.Errorf("the forgotten memory's list was written again: %x", raw)
	}
	for _, c := range []cid.Cid{x, y} {
		for _, l := range typedStored(t, h.s, c) {
			if l.Target == gone {
				t.Errorf("%s's stored list links to the memory forgotten", c)
			}
		}
	}
}

// A link back held reaches a flush in the batch after a forgetting's op,
// before the forgetting's commit hook drops it: the flush leaves out the
// memory forgotten (its tombstone).
func TestAFlushInTheForgettingsBatchLeavesItOut(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	h := openHolding(t, openStore(t), nil, time.Hour, clk)
	x, gone := memoryCID(t, "x"), memoryCID(t, "gone")
	h.put(x, 100)
	h.put(gone, 101, assoc.Link{Target: x, Type: assoc.Sequential, Strength: 1})
	assoc.Due(h.g)
	if err := h.s.Update(context.Background(), func(tx store.Tx) error {
		tx.Set(store.TombstoneKey(gone), []byte{1})
		return assoc.FlushOp(h.g)(tx) // as if the flush came next in the batch
	}); err != nil {
		t.Fatal(err)
	}
	if got := typedStored(t, h.s, x); len(got) != 0 {
		t.Fatalf("x's stored list after a flush that came with gone's tombstone: %v, want none", got)
	}
}

// A view begun before a flush's commit reads the lists as they were, and
// is given the links back that flush wrote.
func TestViewOlderThanAFlushKeepsItsLinksBack(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	h := openHolding(t, openStore(t), nil, time.Hour, clk)
	x, y := memoryCID(t, "x"), memoryCID(t, "y")
	h.put(x, 100)
	h.put(y, 101, assoc.Link{Target: x, Type: assoc.Sequential, Strength: 1})
	old := readInViewBeforeFlush(t, h.s, h.g, assoc.Key(x))
	if got := typedStored(t, h.s, x); len(got) != 1 {
		t.Fatalf("x's stored links after the flush: %v", got)
	}
	if len(old) != 1 || old[0].Target != y {
		t.Fatalf("x's links in a view older than the flush: %v, want y", old)
	}
}

// A flush that fails keeps what it was writing, read back meanwhile, and
// writes it once the store takes writes again.
func TestLinksBackAreWrittenAgainAfterAFailure(t *testing.T) {
	full, so := storetest.FillableDisk()
	s, err := store.OpenMemory(so)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	h := openHolding(t, s, nil, time.Hour, clk)
	x, y := memoryCID(t, "x"), memoryCID(t, "y")
	h.put(x, 100)
	h.put(y, 101, assoc.Link{Target: x, Type: assoc.Sequential, Strength: 1})
	full.Store(true)
	if err := h.g.Flush(context.Background()); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("a flush on a full disk: %v, want ErrDiskFull", err)
	}
	if got := typed(t, h.g, x); len(got) != 1 || got[0].Target != y {
		t.Fatalf("x's links after the failed flush: %v, want y", got)
	}
	full.Store(false)
	if err := h.g.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := typedStored(t, h.s, x); len(got) != 1 || got[0].Target != y {
		t.Fatalf("x's stored links: %v, want y", got)
	}
}

// Past MaxLists lists held, the longest waiting are written without
// waiting for the hold, down to half of MaxLists.
func TestLinksBackPastMaxListsAreWrittenAtOnce(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	s := openStore(t)
	g := assoc.NewGraph(s, 64)
	g.HoldLinksBack(s, assoc.HoldOptions{Hold: time.Hour, MaxLists: 2, Clock: clk})
	h := holding{t: t, s: s, g: g, log: new([]cid.Cid), writes: new(atomic.Int64)}
	a, b, c := memoryCID(t, "a"), memoryCID(t, "b"), memoryCID(t, "c")
	h.put(a, 100)
	h.put(b, 100)
	h.put(c, 101, assoc.Link{Target: a, Type: assoc.Related, Strength: 1}, assoc.Link{Target: b, Type: assoc.Related, Strength: 1})
	waitFor(t, s, func() bool { return len(typedStored(t, s, a)) == 1 })
	if got := typedStored(t, s, b); len(got) != 0 {
		t.Fatalf("b's stored links: %v, want none yet (one list held is half of MaxLists)", got)
	}
	if got := typed(t, g, b); len(got) != 1 || got[0].Target != c {
		t.Fatalf("b's links: %v, want c, held", got)
	}
}
