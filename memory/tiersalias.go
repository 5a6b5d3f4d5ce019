package memory

import (
	"context"
	"fmt"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// The tiers' storage lives in memory/tiers (Self.Tiers); these aliases
// keep package memory's callers compiling during the move (issue 14).
type (
	TierStep     = tiers.Step
	TierEvent    = tiers.Event
	TierRecall   = tiers.Recall
	RecalledPage = tiers.RecalledPage
)

// Tier transitions, as TierEvent.Kind (see memory/tiers).
const (
	TierPageAdded       = tiers.PageAdded
	TierPageMoved       = tiers.PageMoved
	TierSegmentCreated  = tiers.SegmentCreated
	TierSegmentMerged   = tiers.SegmentMerged
	TierSegmentEvicted  = tiers.SegmentEvicted
	TierSegmentPromoted = tiers.SegmentPromoted
	TierSegmentVisited  = tiers.SegmentVisited
	TierPersonaUpdated  = tiers.PersonaUpdated
)

// tierEnv is what the tiers' storage needs of the self (tiers.Env).
type tierEnv struct{ s *Self }

func (e tierEnv) Memory(r store.Reader, c cid.Cid) (*model.Memory, error) {
	return e.s.Memories.MemoryIn(r, c)
}

func (e tierEnv) Vector(c cid.Cid) ([]float32, error) {
	if v, ok := e.s.index.Lookup(c.KeyString()); ok {
		return v, nil
	}
	return e.s.Memories.Vector(c)
}

func (e tierEnv) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

func (e tierEnv) Sonas(r store.Reader, c cid.Cid) ([]string, error) {
	meta := &messages.MemoryMeta{}
	found, err := store.GetProto(r, metaKey(c), meta)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: memory %s", ErrNotFound, c)
	}
	return meta.Sonas, nil
}

func (e tierEnv) CheckSona(sona string) error {
	_, err := e.s.Sonas.Get(sona)
	return err
}
