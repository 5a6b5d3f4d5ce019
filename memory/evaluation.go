package memory

import (
	"errors"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// EUMAS evaluation (seed 004) lives in memory/eumas (Self.Evals); this
// file is what it needs of Self. (Recall's metric path over its profiles
// is in memory/recall.)

// evalEnv is what the evaluations need of Self.
type evalEnv struct{ s *Self }

func (e evalEnv) Logged(txn store.Reader, after uint64, n int) ([]eumas.Logged, uint64, error) {
	end, err := chain.LogEnd(txn)
	if err != nil {
		return nil, 0, err
	}
	var out []eumas.Logged
	it := txn.NewIterator(store.IterOptions{Prefix: chain.LogPrefix, PrefetchValues: true, PrefetchSize: n})
	defer it.Close()
	for it.Seek(chain.LogKey(after + 1)); it.Valid() && len(out) < n; it.Next() {
		seq, c, err := chain.LogEntry(it.Item())
		if err != nil {
			return nil, 0, err
		}
		m, err := e.s.Memories.MemoryIn(txn, c)
		if errors.Is(err, base.ErrForgotten) {
			continue // nothing left to evaluate
		}
		if err != nil {
			return nil, 0, err
		}
		meta, err := meta.Read(txn, c)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, eumas.Logged{Seq: seq, CID: c, Input: eumas.Input{Text: m.Text(), Kind: meta.Kind}})
	}
	return out, end, nil
}

func (e evalEnv) UpdateMeta(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) store.Op {
	return meta.Update(cids, fn)
}

func (e evalEnv) VectorID(c cid.Cid) (uint64, bool) { return e.s.index.ID(c.KeyString()) }
