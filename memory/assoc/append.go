package assoc

import (
	"errors"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
)

// Append is the associations' part of an append (a chain.Contribution):
// the links a new member a of a chain brings — sequential to the sona's
// previous memory prev, its edges (causal or related, strength relative
// to its strongest edge), and similar to its strong neighbours (up to
// similarMax of them), those at least as close as the sona's typical
// nearest neighbour — whose distribution it then joins. The lists are read
// through g's cache (Graph.Update); g may be nil. logSeq is the memory's
// insertion-log position when it is new (0: an existing memory joins a
// sona): a new memory's links back may be held (HoldLinksBack).
func (g *Graph) Append(tx store.Tx, t config.Thresholds, similarMax int, a *model.Append, prev *cid.Cid, logSeq uint64) error {
	item := a.Item
	var links []Link
	if prev != nil {
		links = append(links, Link{Target: *prev, Type: Sequential, Strength: 1})
	}
	edgeType := item.EdgeType
	if edgeType == "" {
		edgeType = Related
	}
	best := 0.0
	for _, e := range item.Memory.Edges {
		best = max(best, e.Weight)
	}
	for _, e := range item.Memory.Edges {
		strength := 1.0
		if best > 0 {
			strength = e.Weight / best
		}
		links = append(links, Link{Target: e.Target, Type: edgeType, Strength: strength})
	}
	if len(item.Neighbors) > 0 {
		stats := SimStats{}
		if raw, err := tx.Get(SimStatsKey(a.Sona)); err == nil {
			if stats, err = DecodeStats(raw); err != nil {
				return err
			}
		} else if !errors.Is(err, base.ErrNotFound) {
			return err
		}
		strong := EmergentThreshold(t, 1, stats, a.Seq)
		for i, n := range item.Neighbors {
			if i == similarMax || n.Sim < strong.Value {
				break
			}
			links = append(links, Link{Target: n.CID, Type: Similar, Strength: n.Sim})
		}
		stats.Add(item.Neighbors[0].Sim)
		tx.Set(SimStatsKey(a.Sona), EncodeStats(stats))
	}
	return g.put(tx, item.CID, links, a.Now, logSeq)
}
