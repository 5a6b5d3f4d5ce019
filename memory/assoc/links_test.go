package assoc_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
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

func cidOf(t *testing.T, name string) cid.Cid {
	t.Helper()
	c, err := model.SumCID(cid.Raw, []byte(name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPutBothWaysKeepsTheStronger(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s)
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
	got, err := assoc.NewGraph(s).Associations(from)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != assoc.MaxLinks || got[0].Strength != float64(assoc.MaxLinks+5)/100 || got[len(got)-1].Strength != 0.06 {
		t.Fatalf("%d links from %v to %v, want the %d strongest", len(got), got[0].Strength, got[len(got)-1].Strength, assoc.MaxLinks)
	}
}

func TestStrengthenIsHebbianPerAgent(t *testing.T) {
	s := openStore(t)
	g := assoc.NewGraph(s)
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
	if _, err := assoc.NewGraph(s).Associations(a); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("corrupt list: %v, want ErrCorrupt", err)
	}
	err := s.Update(context.Background(), func(tx store.Tx) error { return assoc.Put(tx, a, nil, 1) })
	if !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("put over a corrupt list: %v, want ErrCorrupt", err)
	}
}
