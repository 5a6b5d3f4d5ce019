package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The wiring of forgetting (memory/forget, issue 18) to the subsystems
// whose rows an excision removes: each contributes its part to a batch's
// transaction, as each contributes to an append (append.go).

// forgetEnv is forget.Env over the self.
type forgetEnv struct{ selfState }

var _ forget.Env = forgetEnv{}

func (e forgetEnv) Meta(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error) {
	return e.s.Memories.MetaIn(r, c)
}

func (e forgetEnv) ScanMeta(r store.Reader, fn func(c cid.Cid, m *messages.MemoryMeta) error) error {
	return e.records.ScanMeta(r, nil, func(_ []byte, c cid.Cid, m *messages.MemoryMeta) (bool, error) {
		return true, fn(c, m)
	})
}

func (e forgetEnv) Chain(r store.Reader, sona string, fn func(c cid.Cid) error) error {
	return store.Scan(r, chain.EntriesPrefix(sona), func(_, v []byte) error {
		_, mem, _, err := chain.DecodeEntry(v)
		if err != nil {
			return err
		}
		return fn(mem)
	})
}

// Purge runs a pass of the store's garbage collection (memtables flushed,
// tables compacted, value-log files with garbage rewritten), compacts
// the full-text index and writes the vector snapshot again (the one
// before held the forgotten vectors).
func (e forgetEnv) Purge(ctx context.Context) (store.GCReport, error) {
	if err := e.s.Text.Compact(ctx); err != nil && !errors.Is(err, base.ErrClosed) {
		return store.GCReport{}, fmt.Errorf("memory: purge: the full-text index: %w", err)
	}
	if err := e.s.SnapshotVectors(); err != nil {
		return store.GCReport{}, fmt.Errorf("memory: purge: %w", err)
	}
	return e.s.store.Purge(ctx)
}

// Parts: the tiers (pages and what they derived), the links, the
// evaluations, the anchor and insight entries, the query log, the files'
// sona records, and — once committed — the vector index, the sonas'
// members and centroids, and the count of memories.
func (e forgetEnv) Parts() []forget.Part {
	s := e.s
	return []forget.Part{
		func(tx store.Tx, b *forget.Batch) error {
			for _, sona := range b.Sonas {
				if err := s.Tiers.Forget(tx, sona, b.IsGoneRef); err != nil {
					return err
				}
			}
			return nil
		},
		func(tx store.Tx, b *forget.Batch) error {
			if len(b.Memories) == 0 {
				return nil
			}
			agents, err := assoc.Agents(tx)
			if err != nil {
				return err
			}
			s.Assoc.Forgotten(b.CIDs())
			return s.Assoc.Forget(tx, b.CIDs(), agents, b.IsGone)
		},
		func(tx store.Tx, b *forget.Batch) error {
			for _, g := range b.Memories {
				tx.Delete(eumas.EvalKey(g.CID))
				if g.Meta.Seq == 0 {
					continue
				}
				a := &messages.Anchor{}
				if ok, err := store.GetProto(tx, anchor.Key(g.Meta.Seq), a); err != nil {
					return err
				} else if ok && a.Cid == g.CID.String() {
					tx.Delete(anchor.Key(g.Meta.Seq))
				}
				if g.Meta.Insight != nil {
					living.DeleteInsight(tx, g.Meta.Seq, g.CID)
				}
			}
			return nil
		},
		func(tx store.Tx, b *forget.Batch) error {
			if len(b.Memories) == 0 {
				return nil
			}
			return recall.ForgetQueries(tx, b.Selected)
		},
		func(tx store.Tx, b *forget.Batch) error {
			for _, c := range b.Files {
				var keys [][]byte
				if err := store.Keys(tx, base.Join(chain.FileSonaPrefix, c.Hash(), []byte{0}), func(k []byte) {
					keys = append(keys, slices.Clone(k))
				}); err != nil {
					return err
				}
				for _, k := range keys {
					tx.Delete(k)
				}
			}
			return nil
		},
		func(tx store.Tx, b *forget.Batch) error {
			if len(b.Memories) == 0 {
				return nil
			}
			gone := map[uint64]bool{}
			var keys []string
			for _, g := range b.Memories {
				key := g.CID.KeyString()
				if id, ok := s.index.ID(key); ok {
					gone[id] = true
				}
				keys = append(keys, key)
			}
			if err := s.Sonas.Forget(tx, b.Sonas, gone, s.index); err != nil {
				return err
			}
			n := int64(len(b.Memories))
			tx.OnCommit(func() {
				for _, k := range keys {
					s.index.Remove(k)
				}
				s.memories.Add(-n)
			})
			return nil
		},
	}
}

// Tombstone returns the tombstone of block c (base.ErrNotFound when c was
// not forgotten).
func (s *Self) Tombstone(c cid.Cid) (*messages.Tombstone, error) {
	var t *messages.Tombstone
	err := s.store.View(func(r store.Reader) error {
		var err error
		t, err = forget.ReadTombstone(r, c)
		return err
	})
	return t, err
}

// Tombstones pages the tombstones in key order (forget.Tombstones).
func (s *Self) Tombstones(cursor string, limit int, fn func(t *messages.Tombstone) error) (next string, err error) {
	err = s.store.View(func(r store.Reader) error {
		next, err = forget.Tombstones(r, cursor, limit, fn)
		return err
	})
	return next, err
}
