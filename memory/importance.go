package memory

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// touchOp records that memories were recalled: access count, and the
// activity tick from which their decay counts.
func (s *Self) touchOp(rs []*Recalled) Op {
	cids := make([]cid.Cid, len(rs))
	for i, r := range rs {
		cids[i] = r.CID
	}
	return s.metaOp(cids, func(meta *messages.MemoryMeta, _ cid.Cid) {
		meta.AccessCount++
		if len(meta.Sonas) > 0 {
			if _, activity, ok := s.sonaSnapshot(meta.Sonas[0]); ok {
				meta.LastAccessTick = max(meta.LastAccessTick, activity)
			}
		}
	})
}

// metaOp applies fn to the metadata of each memory that still exists.
func (s *Self) metaOp(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) Op {
	return func(tx Tx) error {
		for _, c := range cids {
			raw, err := tx.Get(metaKey(c))
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			meta := &messages.MemoryMeta{}
			if err := proto.Unmarshal(raw, meta); err != nil {
				return fmt.Errorf("%w: metadata of %s: %v", ErrCorrupt, c, err)
			}
			fn(meta, c)
			out, err := proto.Marshal(meta)
			if err != nil {
				return err
			}
			tx.Set(metaKey(c), out)
		}
		return nil
	}
}

// Reinforce raises the importance of the memories a response used: each
// takes an EWMA step toward its signal, its score relative to the best
// score of the recall (so the strongest support moves most), and the rise
// propagates along its edges with the configured per-hop decay and depth.
// Importance only rises here: a signal below a memory's importance leaves
// it as it is.
func (s *Self) Reinforce(used []*Recalled) *Pending {
	rc := s.cfg.Recall
	best := 0.0
	for _, r := range used {
		best = math.Max(best, r.Score)
	}
	seeds := map[cid.Cid]float64{}
	if best > 0 {
		for _, r := range used {
			seeds[r.CID] = math.Max(seeds[r.CID], r.Score/best)
		}
	}
	return s.store.Submit(func(tx Tx) error {
		signal := map[cid.Cid]float64{}
		type visit struct {
			c        cid.Cid
			strength float64
			depth    int
		}
		var queue []visit
		for c, v := range seeds {
			queue = append(queue, visit{c, v, 0})
		}
		slices.SortFunc(queue, func(a, b visit) int { return bytes.Compare(a.c.Bytes(), b.c.Bytes()) })
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			if v.strength < rc.ImportanceFloor || signal[v.c] >= v.strength {
				continue
			}
			signal[v.c] = v.strength
			if v.depth == rc.ImportanceDepth {
				continue
			}
			m, err := s.memoryIn(tx, v.c)
			if err != nil {
				continue // not a memory (or gone): nothing to propagate
			}
			for _, e := range m.Edges {
				queue = append(queue, visit{e.Target, v.strength * rc.ImportanceHopDecay, v.depth + 1})
			}
		}
		cids := make([]cid.Cid, 0, len(signal))
		for c := range signal {
			cids = append(cids, c)
		}
		slices.SortFunc(cids, func(a, b cid.Cid) int { return bytes.Compare(a.Bytes(), b.Bytes()) })
		return s.metaOp(cids, func(meta *messages.MemoryMeta, c cid.Cid) {
			if target := signal[c]; target > meta.Importance {
				meta.Importance += rc.ImportanceAlpha * (target - meta.Importance)
			}
		})(tx)
	})
}

// memoryIn returns a decoded memory as seen by a store operation.
func (s *Self) memoryIn(tx Tx, c cid.Cid) (*Memory, error) {
	if m, ok := s.cache.get(c); ok {
		return m, nil
	}
	b, err := tx.Get(store.BlockKey(c))
	if err != nil {
		return nil, err
	}
	if err := store.VerifyBlock(c, b); err != nil {
		return nil, err
	}
	m, err := DecodeMemory(b)
	if err != nil {
		return nil, err
	}
	s.cache.put(c, m)
	return m, nil
}
