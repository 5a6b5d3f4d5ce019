package eumas

import (
	"errors"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// StoreEnv is Env over the store: the insertion log (memory/chain), the
// memories and their metadata (memory/meta), the vector index.
type StoreEnv struct {
	Memories *meta.Store
	Vectors  *vector.Index
}

var _ Env = StoreEnv{}

// Logged reads the memories logged after position after (the forgotten
// ones are skipped: nothing is left to evaluate).
func (e StoreEnv) Logged(txn store.Reader, after uint64, n int) ([]Logged, uint64, error) {
	end, err := chain.LogEnd(txn)
	if err != nil {
		return nil, 0, err
	}
	var out []Logged
	it := txn.NewIterator(store.IterOptions{Prefix: chain.LogPrefix, PrefetchValues: true, PrefetchSize: n})
	defer it.Close()
	for it.Seek(chain.LogKey(after + 1)); it.Valid() && len(out) < n; it.Next() {
		seq, c, err := chain.LogEntry(it.Item())
		if err != nil {
			return nil, 0, err
		}
		m, err := e.Memories.MemoryIn(txn, c)
		if errors.Is(err, base.ErrForgotten) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		meta, err := e.Memories.MetaIn(txn, c) // through the cache; shared, only its kind is read
		if err != nil {
			return nil, 0, err
		}
		out = append(out, Logged{Seq: seq, CID: c, Input: Input{Text: m.Text(), Kind: meta.Kind}})
	}
	return out, end, nil
}

func (e StoreEnv) UpdateMeta(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) store.Op {
	return meta.Update(cids, fn)
}

func (e StoreEnv) VectorID(c cid.Cid) (uint64, bool) { return e.Vectors.ID(c.KeyString()) }
