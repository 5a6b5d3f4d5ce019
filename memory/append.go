package memory

import (
	"context"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// What the subsystems add to an append (chain.Contribution), in the
// append's transaction, and what follows it once committed.

// contributions are the other subsystems' parts of an append, in order:
// the anchor (a new memory the rules judge significant), the dream
// insight's g/ entry, the associations, the merge's archived sources and
// the dialogue page handed to the STM.
func (s *Self) contributions() []chain.Contribution {
	return []chain.Contribution{
		func(tx store.Tx, w *chain.Written) error {
			if !w.New {
				return nil
			}
			category, ok := s.Anchors.Judge(w.Item, w.Meta)
			if !ok {
				return nil
			}
			return anchor.Put(tx, w.LogSeq, &messages.Anchor{Cid: w.Item.CID.String(), Category: category, Time: w.Now, Sona: w.Sona})
		},
		func(tx store.Tx, w *chain.Written) error {
			if w.New && w.Meta.Insight != nil {
				living.PutInsight(tx, w.LogSeq, w.Item.CID)
			}
			return nil
		},
		func(tx store.Tx, w *chain.Written) error {
			var logSeq uint64
			if w.New {
				logSeq = w.LogSeq
			}
			return s.Assoc.Append(tx, s.cfg.Threshold, s.cfg.Recall.SimilarNeighbors, w.Append, w.Prev, logSeq)
		},
		func(tx store.Tx, w *chain.Written) error { return s.Living.Archive(tx, w.Sona, w.Item.Archive) },
		func(tx store.Tx, w *chain.Written) error {
			if w.Item.PageOf == nil {
				return nil
			}
			return s.Tiers.EnqueuePage(tx, w.Sona, *w.Item.PageOf, w.Item.CID, w.Now)
		},
	}
}

// appended follows a committed append: the activity dream mode's idle
// time counts from, the count of memories, and what recall keeps of a new
// memory's body. (The full-text index
// follows the store's commit events itself.)
func (s *Self) appended(w *chain.Written) {
	if !w.Heartbeat() {
		s.lastActivity.Store(w.Now) // the heartbeat's own writes are not activity
	}
	if w.New {
		s.memories.Add(1)
		s.covered.Store(w.LogSeq) // after the index took it (chain.Options.OnAppended)
		if w.Item.Memory != nil {
			s.Recaller.Appended(w.ID, w.Item.Memory, w.Meta)
		}
	}
}

// consensusEnv is what the consensus ledger needs of the self
// (consensus.Env).
type consensusEnv struct{ s *Self }

func (e consensusEnv) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

func (e consensusEnv) AppendBackbone(ctx context.Context, agent, content string, labels map[string]string, also store.Op) (cid.Cid, error) {
	c, _, err := e.s.Backbone.AppendContent(ctx, agent, content, labels, also)
	return c, err
}

func (e consensusEnv) ValidateAgentID(id string) error { return base.ValidateAgentID(id) }

func (e consensusEnv) Memories() int64 {
	_, n := e.s.Counts()
	return n
}
