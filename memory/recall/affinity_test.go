package recall

import (
	"context"
	"math"
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
	reach := func(w config.LinkWeights) map[string]float64 {
		cfg := config.Default()
		cfg.Recall.AffinityLinks = w
		s := &Recaller{store: st, cfg: cfg, links: uncachedLinks{}}
		var got map[string]float64
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
	if got := reach(config.LinkWeights{Sequential: 1}); math.Abs(got[pears.KeyString()]-0.5) > 1e-9 {
		t.Fatalf("similar link followed with weight 0: %v, want 0.5", got[pears.KeyString()])
	}
	if got := reach(config.LinkWeights{Similar: 0.5}); math.Abs(got[pears.KeyString()]-0.45) > 1e-9 {
		t.Fatalf("similar link of strength 0.9 at weight 0.5: %v, want 0.45", got[pears.KeyString()])
	}
}
