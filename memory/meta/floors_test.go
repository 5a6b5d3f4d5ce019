package meta

import (
	"context"
	"math"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// A slot is filled only by a view that saw the commit that last set or
// emptied it; a commit's write sets a slot that holds its memory, and an
// emptying leaves none.
func TestFloorsFilledOnlyByViewsThatSawTheirLastChange(t *testing.T) {
	f := newFloors()
	x, y := f.hash("x"), f.hash("y")
	f.fill(x, 0.9, 0) // a reader whose commits are unknown
	if f.atLeast(x, 0.1) {
		t.Fatal("filled by a reader that does not know what it saw")
	}
	f.fill(x, 0.9, 3)
	if !f.atLeast(x, 0.9) || f.atLeast(x, 0.91) || f.atLeast(y, 0) {
		t.Fatal("a filled slot does not answer for its memory alone, at its floor")
	}
	f.empty(x, 5)
	if f.atLeast(x, 0) {
		t.Fatal("emptied, still a floor")
	}
	f.fill(x, 0.9, 4) // read before the commit that emptied it
	if f.atLeast(x, 0) {
		t.Fatal("filled by a view older than the commit that emptied the slot")
	}
	f.fill(x, 0.9, 5)
	f.wrote(x, 0.3, 6)
	if f.atLeast(x, 0.31) || !f.atLeast(x, 0.3) {
		t.Fatal("a commit's write of a lower importance did not set the floor")
	}
	f.fill(x, 0.9, 5) // what a view before that write read
	if f.atLeast(x, 0.31) {
		t.Fatal("filled by a view older than the commit that set the slot")
	}
	f.wrote(y, 0.5, 7) // not held: nothing to set
	if f.atLeast(y, 0) {
		t.Fatal("a write filled a slot")
	}
}

// Reinforce reads no hot state of a memory it knows holds at least its
// signal: a second reinforcement of what the first left as it was reads
// none at all.
func TestReinforceReadsNoHotStateKnownAtItsSignal(t *testing.T) {
	st, m := open(t)
	full := &messages.MemoryMeta{Kind: "note", Importance: 1}
	leaf := put(t, st, "leaf", full)
	mid := put(t, st, "mid", full, leaf)
	top := put(t, st, "top", full, mid, leaf)
	ctx := context.Background()
	reads := func() uint64 { s := m.metas.Stats(); return s.Hits + s.Misses }
	used := []Used{{top, 1}, {mid, 0.5}}
	for i, want := range []bool{true, false} {
		before := reads()
		if err := m.Reinforce(used).Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if read := reads() > before; read != want {
			t.Fatalf("reinforcement %d: read a hot state %v, want %v", i+1, read, want)
		}
	}
	for _, c := range []cid.Cid{top, mid, leaf} {
		if got := metaOf(t, m, c).Importance; got != 1 {
			t.Fatalf("importance %v, want 1", got)
		}
	}
}

// A memory whose importance a commit lowered — its hot state written, its
// record written again (an import restores it as exported), or forgotten
// and stored again — rises from where the commit left it, not where
// Reinforce last read it.
func TestReinforceAfterCommitsThatLowerImportance(t *testing.T) {
	rc := config.Default().Recall
	ctx := context.Background()
	for _, lower := range []struct {
		name string
		op   func(c cid.Cid) store.Op
	}{
		{"hot state", func(c cid.Cid) store.Op {
			return UpdateHot([]cid.Cid{c}, func(h *Hot, _ cid.Cid) { h.Importance = 0 })
		}},
		{"record", func(c cid.Cid) store.Op {
			return func(tx store.Tx) error {
				return Write(tx, c, &messages.MemoryMeta{Kind: "note"})
			}
		}},
		{"forgotten", func(c cid.Cid) store.Op {
			return func(tx store.Tx) error {
				tx.Delete(HotKey(c))
				tx.Delete(Key(c))
				return nil
			}
		}},
	} {
		t.Run(lower.name, func(t *testing.T) {
			st, m := open(t)
			x := put(t, st, "x", &messages.MemoryMeta{Kind: "note", Importance: 0.9})
			seed := put(t, st, "seed", &messages.MemoryMeta{Kind: "note"}, x)
			used := []Used{{seed, 1}} // x's signal: the hop decay's
			if err := m.Reinforce(used).Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if got := metaOf(t, m, x).Importance; got != 0.9 {
				t.Fatalf("importance %v, want 0.9 as it was", got)
			}
			if err := st.Update(ctx, lower.op(x)); err != nil {
				t.Fatal(err)
			}
			if lower.name == "forgotten" {
				put(t, st, "x", &messages.MemoryMeta{Kind: "note"})
			}
			if err := m.Reinforce(used).Wait(ctx); err != nil {
				t.Fatal(err)
			}
			want := rc.ImportanceAlpha * rc.ImportanceHopDecay
			if got := metaOf(t, m, x).Importance; math.Abs(got-want) > 1e-12 {
				t.Fatalf("importance %v, want %v", got, want)
			}
		})
	}
}
