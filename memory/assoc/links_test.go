package assoc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.OpenMemory(store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func cidOf(t testing.TB, name string) cid.Cid {
	t.Helper()
	return cidOfCodec(t, cid.Raw, name)
}

// cidOfCodec is the CID of name's bytes as a block of codec.
func cidOfCodec(t testing.TB, codec uint64, name string) cid.Cid {
	t.Helper()
	c, err := model.SumCID(codec, []byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPutBothWaysKeepsTheStronger(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s, 64)
	a, b, c := cidOf(t, "a"), cidOf(t, "b"), cidOf(t, "c")
	put := func(from cid.Cid, links ...assoc.Link) {
		t.Helper()
		if err := s.Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, from, links, 100) }); err != nil {
			t.Fatal(err)
		}
	}
	put(a, assoc.Link{Target: b, Type: assoc.Similar, Strength: 0.4}, assoc.Link{Target: c, Type: assoc.Related, Strength: 7},
		assoc.Link{Target: a, Type: assoc.Related, Strength: 1})
	put(a, assoc.Link{Target: b, Type: assoc.Causal, Strength: 0.2}) // weaker: kept as it was
	put(b, assoc.Link{Target: a, Type: assoc.Sequential, Strength: 0.9})

	got, err := g.Associations(a)
	if err != nil {
		t.Fatal(err)
	}
	want := []assoc.Link{{Target: c, Type: assoc.Related, Strength: 1}, {Target: b, Type: assoc.Sequential, Strength: 0.9}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a's links %v, want %v (strongest first, clamped, no self link)", got, want)
	}
	if got, _ := g.Associations(c); len(got) != 1 || got[0].Target != a || got[0].Strength != 1 {
		t.Fatalf("c's links %v, want the back link to a", got)
	}
	if got, _ := g.Associations(cidOf(t, "none")); got != nil {
		t.Fatalf("links of an unknown memory: %v", got)
	}
}

func TestPutKeepsTheStrongestMaxLinks(t *testing.T) {
	s := openStore(t)
	from := cidOf(t, "from")
	var links []assoc.Link
	for i := range assoc.MaxLinks + 5 {
		links = append(links, assoc.Link{Target: cidOf(t, fmt.Sprint(i)), Type: assoc.Similar, Strength: float64(i+1) / 100})
	}
	if err := s.Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, from, links, 1) }); err != nil {
		t.Fatal(err)
	}
	got, err := assoc.NewGraph(s, 64).Associations(from)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != assoc.MaxLinks || got[0].Strength != float64(assoc.MaxLinks+5)/100 || got[len(got)-1].Strength != 0.06 {
		t.Fatalf("%d links from %v to %v, want the %d strongest", len(got), got[0].Strength, got[len(got)-1].Strength, assoc.MaxLinks)
	}
}

// TestPutWritesOnlyChangedLists: a list a Put leaves as it was — the
// link it holds is stronger, or a full list's weakest is stronger than
// the new link — is not written again; a list it changes is.
func TestPutWritesOnlyChangedLists(t *testing.T) {
	s, err := store.OpenMemory(store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var mu sync.Mutex
	var written []string
	s.Subscribe(func(e store.Event) {
		mu.Lock()
		defer mu.Unlock()
		written = append(written, e.Keys...)
	})
	// wrote runs a Put of from's links and returns the link lists it wrote.
	wrote := func(from cid.Cid, links ...assoc.Link) map[string]bool {
		t.Helper()
		mu.Lock()
		written = nil
		mu.Unlock()
		if err := s.Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, from, links, 1) }); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		got := map[string]bool{}
		for _, k := range written {
			got[k] = true
		}
		return got
	}
	full, strong, weak := cidOf(t, "full"), cidOf(t, "strong"), cidOf(t, "weak")
	var links []assoc.Link
	for i := range assoc.MaxLinks {
		links = append(links, assoc.Link{Target: cidOf(t, fmt.Sprint(i)), Type: assoc.Similar, Strength: 0.5 + float64(i)/100})
	}
	wrote(full, links...)
	// weak's own list is new; full's list holds MaxLinks links all
	// stronger than 0.2: it stays as it was.
	if got := wrote(weak, assoc.Link{Target: full, Type: assoc.Similar, Strength: 0.2}); !got[string(assoc.Key(weak))] || got[string(assoc.Key(full))] || len(got) != 1 {
		t.Fatalf("a link weaker than a full list's weakest wrote %v, want only weak's own list", got)
	}
	if got := wrote(strong, assoc.Link{Target: full, Type: assoc.Similar, Strength: 0.9}); !got[string(assoc.Key(strong))] || !got[string(assoc.Key(full))] {
		t.Fatalf("a link stronger than a full list's weakest wrote %v, want both lists", got)
	}
	// Again, weaker than what both lists hold: nothing changes, nothing is written.
	if got := wrote(strong, assoc.Link{Target: full, Type: assoc.Causal, Strength: 0.3}); len(got) != 0 {
		t.Fatalf("a link weaker than the one held wrote %v", got)
	}
	g := assoc.NewGraph(s, 64)
	if got, err := g.Associations(full); err != nil || len(got) != assoc.MaxLinks || got[0].Target != strong || got[0].Strength != 0.9 {
		t.Fatalf("full's links %v, %v: want %d, strong's first at 0.9", got, err, assoc.MaxLinks)
	}
	if got, err := g.Associations(weak); err != nil || len(got) != 1 || got[0].Target != full {
		t.Fatalf("weak's links %v, %v", got, err)
	}
}

func TestStrengthenIsHebbianPerAgent(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s, 64)
	a, b := cidOf(t, "a"), cidOf(t, "b")
	for range 2 {
		if err := s.Update(context.Background(), assoc.Strengthen("agent-1", []cid.Cid{a, b}, 0.3, 5)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := g.CoAccess("agent-1", a)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Target != b || got[0].Type != assoc.CoAccess || math.Abs(got[0].Strength-(0.3+0.3*0.7)) > 1e-12 {
		t.Fatalf("a's partners %v, want b at 0.51", got)
	}
	if other, _ := g.CoAccess("agent-2", a); len(other) != 0 {
		t.Fatalf("agent-2 sees agent-1's partners: %v", other)
	}
}

func TestReadCorrupt(t *testing.T) {
	s := openStore(t)
	a := cidOf(t, "a")
	if err := s.Update(context.Background(), func(tx store.Tx) error { tx.Set(assoc.Key(a), []byte{0xff, 0xff}); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := assoc.NewGraph(s, 64).Associations(a); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("corrupt list: %v, want ErrCorrupt", err)
	}
	err := s.Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, a, nil, 1) })
	if !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("put over a corrupt list: %v, want ErrCorrupt", err)
	}
}

// The graph's cache follows the commits: a list read, then strengthened,
// reads strengthened; a forgotten partner leaves it; and a view taken
// before a commit reads the list as it was without caching it for the
// views after.
func TestGraphCacheFollowsCommits(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s, 64)
	ctx := context.Background()
	a, b, c := cidOf(t, "a"), cidOf(t, "b"), cidOf(t, "c")
	strengthen := func(together ...cid.Cid) {
		t.Helper()
		if err := s.Update(ctx, assoc.Strengthen("agent", together, 0.5, 100)); err != nil {
			t.Fatal(err)
		}
	}
	partners := func(of cid.Cid) string {
		t.Helper()
		got, err := g.CoAccess("agent", of)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got)
	}
	strengthen(a, b)
	if got, want := partners(a), fmt.Sprint([]assoc.Link{{Target: b, Type: assoc.CoAccess, Strength: 0.5}}); got != want {
		t.Fatalf("a's partners %s, want %s", got, want)
	}
	strengthen(a, b, c) // a's list is cached: the commit replaces it
	if got, want := partners(a), fmt.Sprint([]assoc.Link{{Target: b, Type: assoc.CoAccess, Strength: 0.75}, {Target: c, Type: assoc.CoAccess, Strength: 0.5}}); got != want {
		t.Fatalf("a's partners after a second recall %s, want %s", got, want)
	}
	forget(t, s, nil, c)
	if got, want := partners(a), fmt.Sprint([]assoc.Link{{Target: b, Type: assoc.CoAccess, Strength: 0.75}}); got != want {
		t.Fatalf("a's partners after c was forgotten %s, want %s", got, want)
	}
	if got := partners(c); got != "[]" {
		t.Fatalf("the forgotten c has partners %s", got)
	}

	// b's list is not cached; a view older than the commit that changes it
	// reads the old list, and must not leave it cached.
	key := assoc.CoAccessKey("agent", b)
	err := s.View(func(r store.Reader) error {
		strengthen(a, b)
		old, err := g.In(r, key)
		if err != nil {
			return err
		}
		if fmt.Sprint(old) != fmt.Sprint([]assoc.Link{{Target: a, Type: assoc.CoAccess, Strength: 0.75}}) {
			t.Errorf("the old view read %v", old)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := partners(b), fmt.Sprint([]assoc.Link{{Target: a, Type: assoc.CoAccess, Strength: 0.875}}); got != want {
		t.Fatalf("b's partners after the old view %s, want %s: the old view's read was cached", got, want)
	}
}

// A list read through the cache is the caller's: changing it changes
// neither the cache nor the next read.
func TestGraphReadsAreTheCallers(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s, 64)
	a, b := cidOf(t, "a"), cidOf(t, "b")
	if err := s.Update(context.Background(), assoc.Strengthen("agent", []cid.Cid{a, b}, 0.5, 100)); err != nil {
		t.Fatal(err)
	}
	key := assoc.CoAccessKey("agent", a)
	read := func() []assoc.Link {
		t.Helper()
		var links []assoc.Link
		if err := s.View(func(r store.Reader) (err error) {
			links, err = g.In(r, key)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return links
	}
	want := fmt.Sprint([]assoc.Link{{Target: b, Type: assoc.CoAccess, Strength: 0.5}})
	first := read() // a miss, which fills the cache
	first[0].Strength = 9
	second := read() // a hit
	second[0].Target = a
	if got := fmt.Sprint(read()); got != want {
		t.Fatalf("read after the callers changed theirs: %s, want %s", got, want)
	}
	if st := g.CacheStats(); st.Hits < 2 {
		t.Fatalf("cache %+v: the reads after the first did not hit it", st)
	}
}

// The committer's rewrites read a list through the graph's cache when
// their batch has not written it, their own batch's writes otherwise;
// the package's Put reads the store alone.
func TestUpdateReadsCommittedListsThroughTheCache(t *testing.T) {
	s, err := store.Open(t.TempDir(), store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g := assoc.NewGraph(s, 64)
	a, b, c, d, e := cidOf(t, "a"), cidOf(t, "b"), cidOf(t, "c"), cidOf(t, "d"), cidOf(t, "e")
	update := func(op store.Op) {
		t.Helper()
		if err := s.Update(context.Background(), op); err != nil {
			t.Fatal(err)
		}
	}
	behind := func() { // b's list goes behind the committer (and the cache)
		t.Helper()
		if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Delete(assoc.Key(b)) }); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(want ...cid.Cid) {
		t.Helper()
		var got []cid.Cid
		err := s.DB().View(func(txn *badger.Txn) error {
			item, err := txn.Get(assoc.Key(b))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			return item.Value(func(v []byte) error {
				links, err := assoc.Decode(v)
				for _, l := range links {
					got = append(got, l.Target)
				}
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("b's stored list links to %v, want %v", got, want)
		}
	}
	link := func(strength float64) []assoc.Link {
		return []assoc.Link{{Target: b, Type: assoc.Related, Strength: strength}}
	}
	update(func(tx store.Tx) error { return g.Put(tx, a, link(0.9), 1) })
	behind()
	update(func(tx store.Tx) error { return g.Put(tx, c, link(0.8), 1) })
	stored(a, c) // read from the cache: a's link survived the deletion behind it

	update(func(tx store.Tx) error {
		tx.Delete(assoc.Key(b))
		return g.Put(tx, d, link(0.7), 1)
	})
	stored(d) // the batch's own deletion, not the cached list

	behind()
	update(func(tx store.Tx) error { return assoc.Put(tx, e, link(0.6), 1) })
	stored(e) // the package's Put read the store, where the list was gone
}

// Once the graph knows which co-access lists the store holds
// (LoadKeys), a read of one it does not hold is answered without the
// store, and the lists written after — by the graph's own rewrites too —
// are read as before.
func TestGraphKnowsWhichCoAccessListsExist(t *testing.T) {
	dir := t.TempDir()
	so := store.OptionsOf(config.Default().Store)
	ctx := context.Background()
	a, b, c, d, e := cidOf(t, "a"), cidOf(t, "b"), cidOf(t, "c"), cidOf(t, "d"), cidOf(t, "e")
	s, err := store.Open(dir, so)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, assoc.Strengthen("agent", []cid.Cid{a, b}, 0.5, 100)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = store.Open(dir, so); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g := assoc.NewGraph(s, 64)
	partners := func(of cid.Cid) string {
		t.Helper()
		got, err := g.CoAccess("agent", of)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range got {
			for n, x := range map[string]cid.Cid{"a": a, "b": b, "c": c, "d": d, "e": e} {
				if l.Target == x {
					names = append(names, fmt.Sprintf("%s %.2f", n, l.Strength))
				}
			}
		}
		return fmt.Sprint(names)
	}
	misses := func() uint64 { return g.CacheStats().Misses }

	before := misses()
	partners(c)
	if misses() != before+1 {
		t.Fatalf("before LoadKeys a read of a list the store does not hold did not go to the store (%d → %d misses)", before, misses())
	}
	if n, err := g.LoadKeys(); err != nil || n != 2 {
		t.Fatalf("LoadKeys: %d lists, %v; want a's and b's", n, err)
	}
	before = misses()
	if got := partners(d); got != "[]" {
		t.Fatalf("d's partners %s", got)
	}
	if misses() != before {
		t.Fatalf("a read of a list the store does not hold went to the store (%d → %d misses)", before, misses())
	}
	if got, want := partners(a), "[b 0.50]"; got != want {
		t.Fatalf("a's partners %s, want %s", got, want)
	}
	// Lists written after the load, and rewritten by the graph's own
	// operations, which read them in the committer's batch.
	for _, together := range [][]cid.Cid{{c, d}, {a, e}, {c, e}} {
		if err := s.Update(ctx, g.Strengthen("agent", together, 0.5, 100)); err != nil {
			t.Fatal(err)
		}
	}
	for of, want := range map[cid.Cid]string{a: "[b 0.50 e 0.50]", c: "[d 0.50 e 0.50]", d: "[c 0.50]", e: "[c 0.50 a 0.50]"} {
		if got := partners(of); got != want {
			t.Errorf("partners %s, want %s", got, want)
		}
	}
	// A batch that writes a list and then strengthens it again reads its
	// own write.
	if err := s.Update(ctx, func(tx store.Tx) error {
		for range 2 {
			if err := g.Strengthen("agent", []cid.Cid{b, d}, 0.5, 100)(tx); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, want := partners(d), "[b 0.75 c 0.50]"; got != want {
		t.Errorf("d's partners after a batch strengthened it twice %s, want %s", got, want)
	}
}

// walked is what Walk calls back with for key in r, as Links.
func walked(r store.Reader, g *assoc.Graph, key []byte, stop int) ([]assoc.Link, error) {
	var out []assoc.Link
	var bad error
	err := g.Walk(r, key, func(e assoc.Entry) bool {
		c, err := cid.Cast(e.Target)
		if err != nil {
			bad = err
			return false
		}
		out = append(out, assoc.Link{Target: c, Type: e.Type, Strength: e.Strength})
		return len(out) != stop
	})
	return out, errors.Join(err, bad)
}

// Walk gives the links In reads, strongest first — through the cache, or
// without one, in a view or in an operation (which sees its batch), a
// co-access list with the buffered strengthening —, stops when told, and
// fails on a damaged list as In does.
func TestWalkIsInWithoutDecoding(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s, 64)
	ctx := context.Background()
	a, b, c, d := cidOf(t, "a"), cidOf(t, "b"), cidOf(t, "c"), cidOf(t, "d")
	links := []assoc.Link{{Target: b, Type: assoc.Causal, Strength: 0.9}, {Target: c, Type: assoc.Sequential, Strength: 0.5}, {Target: d, Type: assoc.Similar, Strength: 0.7}}
	if err := s.Update(ctx, func(tx store.Tx) error { return assoc.Put(tx, a, links, 100) }); err != nil {
		t.Fatal(err)
	}
	check := func(r store.Reader, g *assoc.Graph, key []byte, what string) {
		t.Helper()
		read := g.In
		if g == nil {
			read = assoc.Read
		}
		want, err := read(r, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := walked(r, g, key, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameLinks(got, want); err != nil {
			t.Errorf("%s: walked %v", what, err)
		}
		if len(want) > 1 {
			first, err := walked(r, g, key, 1)
			if err != nil || sameLinks(first, want[:1]) != nil {
				t.Errorf("%s, stopped after one: %v, %v", what, first, err)
			}
		}
	}
	view := func(fn func(r store.Reader)) {
		t.Helper()
		if err := s.View(func(r store.Reader) error { fn(r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	view(func(r store.Reader) {
		check(r, g, assoc.Key(a), "a view, a miss")
		check(r, g, assoc.Key(a), "a view, a hit")
		check(r, nil, assoc.Key(a), "no cache")
		check(r, g, assoc.Key(cidOf(t, "none")), "no list")
	})
	if st := g.CacheStats(); st.Hits == 0 {
		t.Fatalf("cache %+v: no walk hit it", st)
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := assoc.Put(tx, a, []assoc.Link{{Target: cidOf(t, "e"), Type: assoc.Related, Strength: 1}}, 101); err != nil {
			return err
		}
		got, err := walked(tx, g, assoc.Key(a), -1)
		if err != nil {
			return err
		}
		if len(got) != 4 || got[0].Target != cidOf(t, "e") {
			t.Errorf("an operation walked %v, want its batch's new link first", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A co-access list with strengthening still buffered.
	b2 := openBuffered(t, assoc.BufferOptions{Every: time.Hour}, store.OptionsOf(config.Default().Store))
	b2.strengthen(t, "agent", []cid.Cid{a, b, c}, 100)
	b2.strengthen(t, "agent", []cid.Cid{a, b}, 101)
	if err := b2.s.View(func(r store.Reader) error {
		key := assoc.CoAccessKey("agent", a)
		if l, _ := b2.g.In(r, key); len(l) != 2 {
			t.Errorf("the buffered list read %v, want a's two partners", l)
		}
		check(r, b2.g, key, "a buffered co-access list")
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// A damaged list.
	if err := s.Update(ctx, func(tx store.Tx) error { tx.Set(assoc.Key(b), []byte{0xff, 0xff}); return nil }); err != nil {
		t.Fatal(err)
	}
	view(func(r store.Reader) {
		for _, g := range []*assoc.Graph{g, nil} {
			if _, err := walked(r, g, assoc.Key(b), -1); !errors.Is(err, base.ErrCorrupt) {
				t.Errorf("a damaged list walked: %v, want ErrCorrupt", err)
			}
		}
	})
}

// TestAMessageListIsRewrittenCompact: a list as every build before the
// compact form wrote it (a messages.Associations) is read as it was, and
// the first Update that changes nothing in it writes it again in the
// compact form, smaller, with the same links; one already compact that
// comes out as it was is not written again.
func TestAMessageListIsRewrittenCompact(t *testing.T) {
	s := openStore(t)
	from := cidOf(t, "from")
	old := &messages.Associations{}
	for i := range 8 {
		old.Links = append(old.Links, &messages.Association{Type: assoc.Causal, Strength: 1 - float64(i)/10, UpdatedAt: 1_764_000_000, Target: cidOf(t, fmt.Sprint(i)).Bytes()})
	}
	raw, err := proto.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	key := assoc.Key(from)
	update := func() []byte {
		t.Helper()
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			return assoc.Update(tx, key, 1_764_000_100, func(*assoc.List) {})
		}); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := s.View(func(r store.Reader) error {
			v, err := r.Get(key)
			got = bytes.Clone(v)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := s.Update(context.Background(), func(tx store.Tx) error { tx.Set(key, raw); return nil }); err != nil {
		t.Fatal(err)
	}
	compact := update()
	if bytes.Equal(compact, raw) || len(compact) >= len(raw) || compact[0] != 0 {
		t.Fatalf("the message list (%d bytes) was left as %d bytes %x", len(raw), len(compact), compact)
	}
	got, err := assoc.Unmarshal(compact)
	if err != nil || !proto.Equal(got, old) {
		t.Fatalf("rewritten, it reads %v (%v), want %v", got, err, old)
	}
	var (
		mu     sync.Mutex
		events int
	)
	s.Subscribe(func(e store.Event) {
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(e.Keys, string(key)) {
			events++
		}
	})
	again := update()
	mu.Lock()
	defer mu.Unlock()
	if !bytes.Equal(again, compact) || events != 0 {
		t.Fatalf("an unchanged compact list was written again (%d commits of it)", events)
	}
}
