package recall

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
)

// The affinity path follows an association as far as its type's weight
// lets it: a similar link with weight 0 is not followed (the default,
// chosen on LoCoMo), with weight w its strength counts w times.
func TestAffinityLinkWeights(t *testing.T) {
	st, err := store.OpenMemory(store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mem := func(s string) cid.Cid {
		c, _, err := (&model.Memory{Data: model.Data{Text: &model.TextData{Content: s}}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	apples, train, pears := mem("apples grow in the orchard"), mem("the train to lisbon was late"), mem("pears ripen in the orchard")
	// apples, then the train, then pears (sequential); pears is similar to apples.
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := assoc.Put(tx, apples, []assoc.Link{{Target: train, Type: assoc.Sequential, Strength: 1}, {Target: pears, Type: assoc.Similar, Strength: 0.9}}, 1); err != nil {
			return err
		}
		return assoc.Put(tx, train, []assoc.Link{{Target: pears, Type: assoc.Sequential, Strength: 1}}, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	reach := func(w config.LinkWeights) *reached {
		cfg := config.Default()
		cfg.Recall.AffinityLinks = w
		s := &Recaller{store: st, cfg: cfg, links: uncachedLinks{}}
		var got *reached
		err := st.View(func(txn store.Reader) error {
			sc := &scorer{self: s, q: &Query{}, txn: txn}
			var err error
			got, err = sc.affinity([]*Recalled{{CID: apples, Explain: Explain{Fused: Fused{Relevance: 1}}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Two sequential hops through the train (× expand_decay 0.5), not the
	// similar link's 0.9.
	if got := reach(config.LinkWeights{Sequential: 1}); math.Abs(got.of(pears.KeyString())-0.5) > 1e-9 {
		t.Fatalf("similar link followed with weight 0: %v, want 0.5", got.of(pears.KeyString()))
	}
	if got := reach(config.LinkWeights{Similar: 0.5}); math.Abs(got.of(pears.KeyString())-0.45) > 1e-9 {
		t.Fatalf("similar link of strength 0.9 at weight 0.5: %v, want 0.45", got.of(pears.KeyString()))
	}
}

// The walk scores what a plain breadth-first walk over decoded lists
// into a map scores — every memory reached and its best score, on a
// graph of full lists with every link type and strength — and the hits
// come out best first as a sort of them all orders them. Every walk but
// the first reuses the room the one before kept (a recall's scratch),
// which keeps none of their keys.
func TestAffinityAsAPlainWalk(t *testing.T) {
	scratch := evidenceScratches.Get().(*evidenceScratch)
	rng := rand.New(rand.NewPCG(7, 7))
	st, g, mems := linkedGraph(t, rng, 300, []string{assoc.Causal, assoc.Similar, assoc.Sequential, assoc.Related, assoc.CoAccess})
	cfg := config.Default()
	for _, w := range []config.LinkWeights{cfg.Recall.AffinityLinks, {Causal: 1, Similar: 0.5, Sequential: 1, Related: 0.25}} {
		for _, depth := range []int{1, 2, 3} {
			cfg.Recall.AffinityLinks, cfg.Recall.AffinityDepth = w, depth
			cfg.Recall.AffinityLinks.CoAccess = 0
			s := &Recaller{store: st, cfg: cfg, links: g}
			var seeds []*Recalled
			for i := range 5 {
				seeds = append(seeds, &Recalled{CID: mems[rng.IntN(len(mems))], Explain: Explain{Fused: Fused{Relevance: 1 - float64(i)/8}}})
			}
			err := st.View(func(txn store.Reader) error {
				sc := &scorer{self: s, q: &Query{}, txn: txn, scratch: scratch}
				got, err := sc.affinity(seeds)
				if err != nil {
					return err
				}
				want, err := plainAffinity(txn, cfg.Recall, seeds)
				if err != nil {
					return err
				}
				if len(got.hits) != len(want) {
					t.Fatalf("weights %+v, depth %d: %d memories reached, want %d", w, depth, len(got.hits), len(want))
				}
				for k, v := range want {
					if got.of(k) != v {
						t.Fatalf("weights %+v, depth %d: a memory scored %v, want %v", w, depth, got.of(k), v)
					}
				}
				sorted := slices.Clone(got.hits)
				slices.SortFunc(sorted, func(a, b pathHit) int {
					if c := cmp.Compare(b.score, a.score); c != 0 {
						return c
					}
					return cmp.Compare(a.key, b.key)
				})
				h := bestFirst(got.hits)
				for i := range sorted {
					if p := h.pop(); p != sorted[i] {
						t.Fatalf("hit %d taken: %v, want %v", i, p, sorted[i])
					}
				}
				if len(*h) != 0 {
					t.Fatalf("%d hits left", len(*h))
				}
				scratch.keepHits(got.hits) // as a recall does, then its release
				clear(scratch.reached)
				kept, left := scratch.hits[:cap(scratch.hits)], 0
				for _, h := range kept {
					if h != (pathHit{}) {
						left++
					}
				}
				if len(kept) < len(want) || left > 0 {
					t.Fatalf("kept room for %d hits (want at least %d), %d of them not cleared", len(kept), len(want), left)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// plainAffinity is the affinity walk without its economies: the lists
// decoded, the scores in a map (the association paths only).
func plainAffinity(r store.Reader, rc config.Recall, seeds []*Recalled) (map[string]float64, error) {
	top := seeds[0].Explain.Fused.Relevance
	affinity := map[string]float64{}
	type step struct {
		target cid.Cid
		score  float64
		depth  int
	}
	for _, seed := range seeds {
		queue := []step{{seed.CID, seed.Explain.Fused.Relevance / top, 0}}
		for i := 0; i < len(queue); i++ {
			cur := queue[i]
			if cur.depth == rc.AffinityDepth {
				continue
			}
			links, err := assoc.Read(r, assoc.Key(cur.target))
			if err != nil {
				return nil, err
			}
			for _, l := range links {
				w := linkWeight(rc.AffinityLinks, l.Type)
				if w == 0 || l.Target == seed.CID {
					continue
				}
				v := cur.score * l.Strength * w
				if cur.depth > 0 {
					v *= rc.ExpandDecay
				}
				if v <= affinity[l.Target.KeyString()] {
					continue
				}
				affinity[l.Target.KeyString()] = v
				queue = append(queue, step{l.Target, v, cur.depth + 1})
			}
		}
	}
	return affinity, nil
}

// linkedGraph stores n memories' link lists, each up to assoc.MaxLinks
// links of the given types to the others, with strengths of a few values
// (equal scores, ordered by key), and returns a Graph caching them.
func linkedGraph(t testing.TB, rng *rand.Rand, n int, types []string) (*store.Store, *assoc.Graph, []cid.Cid) {
	t.Helper()
	st, err := store.OpenMemory(store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := assoc.NewGraph(st, 4*n) // before the first write, to follow them
	mems := make([]cid.Cid, n)
	for i := range mems {
		c, _, err := (&model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprint("memory ", i)}}}).Encode()
		if err != nil {
			t.Fatal(err)
		}
		mems[i] = c
	}
	err = st.Update(context.Background(), func(tx store.Tx) error {
		for _, c := range mems {
			var links []assoc.Link
			for range rng.IntN(assoc.MaxLinks + 1) {
				links = append(links, assoc.Link{Target: mems[rng.IntN(len(mems))], Type: types[rng.IntN(len(types))], Strength: float64(1+rng.IntN(4)) / 4})
			}
			if err := assoc.Put(tx, c, links, 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, g, mems
}

// BenchmarkAffinity: a long-lived sona's affinity path — five seeds in a
// graph of 3,000 memories whose lists are full of causal links (what the
// responses that drew on a memory leave), the best sc.n taken.
func BenchmarkAffinity(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	st, g, mems := linkedGraph(b, rng, 3000, []string{assoc.Causal, assoc.Causal, assoc.Causal, assoc.Causal, assoc.Sequential, assoc.Similar})
	cfg := config.Default()
	s := &Recaller{store: st, cfg: cfg, links: g}
	var seeds []*Recalled
	for i := range 5 {
		seeds = append(seeds, &Recalled{CID: mems[i*7], Explain: Explain{Fused: Fused{Relevance: 1 - float64(i)/8}}})
	}
	err := st.View(func(txn store.Reader) error {
		sc := &scorer{self: s, q: &Query{}, txn: txn, n: 50, scratch: evidenceScratches.Get().(*evidenceScratch)}
		for b.Loop() {
			got, err := sc.affinity(seeds)
			if err != nil {
				return err
			}
			h := bestFirst(got.hits)
			for range min(sc.n, len(*h)) {
				h.pop()
			}
			sc.scratch.keepHits(got.hits) // as the recall does
			clear(sc.scratch.reached)     // as its release does
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
