package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// Duplicate describes a near-duplicate found at insert.
type Duplicate struct {
	Existing   cid.Cid
	Similarity float64
	Threshold  Threshold
}

// PrepareInsert prepares m to be inserted into a sona: it embeds it, finds
// its nearest memories in the sona, and — with dedup — checks whether the
// nearest is a near-duplicate: closer than the dedup threshold drawn from
// the sona's live distribution of nearest-neighbour similarities (β 3.0;
// bootstrap below the configured size). Only a neighbour with the same
// timestamp (or none, like the new one) can be a duplicate. A memory
// already in the sona is not a duplicate of itself: appending it is a
// no-op (existed). file, when set, is the raw block a file memory's
// content names, stored with the memory (Prepared.File).
func (s *Self) PrepareInsert(ctx context.Context, sona string, m *Memory, meta *messages.MemoryMeta, dedup bool, file []byte) (*Prepared, *Duplicate, error) {
	text := m.Text()
	vecs, err := s.Embed(ctx, text)
	if err != nil {
		return nil, nil, err
	}
	p, err := s.Prepare(m, vecs[0], meta)
	if err != nil {
		return nil, nil, err
	}
	if file != nil {
		if f := m.Data.File; f == nil || store.VerifyBlock(f.Content, file) != nil {
			return nil, nil, fmt.Errorf("%w: the file given with the memory is not its content", ErrInvalid)
		}
		p.File = file
	}
	p.Neighbors, err = s.neighbors(p.Vector, sona, max(1, s.cfg.Recall.SimilarNeighbors), p.CID)
	if err != nil || !dedup || len(p.Neighbors) == 0 {
		return p, nil, err
	}
	if in, err := s.InSona(p.CID, sona); err != nil || in {
		return p, nil, err
	}
	nearest, ok, err := s.sameTimeNeighbor(p)
	if err != nil || !ok {
		return p, nil, err
	}
	sim := nearest.Sim
	if s.normalize != nil {
		// Compare the normalised text with the nearest memory instead.
		norm, err := s.normalize(ctx, text)
		if err != nil {
			return nil, nil, fmt.Errorf("memory: normalize: %w", err)
		}
		nv, err := s.Embed(ctx, norm)
		if err != nil {
			return nil, nil, err
		}
		other, err := s.Vector(nearest.CID)
		if err != nil {
			return nil, nil, err
		}
		sim = base.Dot(nv[0], other)
	}
	stats, length, err := s.sonaSimStats(sona)
	if err != nil {
		return nil, nil, err
	}
	th := EmergentThreshold(s.cfg.Threshold, s.cfg.Threshold.DedupBeta, stats, length)
	// Never below the bootstrap's: in a sona whose memories are all far
	// apart (a low, narrow distribution of nearest-neighbour similarities,
	// as the hashed embedder gives unrelated texts) the live threshold
	// would call a new memory's nearest a duplicate however unlike it is.
	if boot := EmergentThreshold(s.cfg.Threshold, s.cfg.Threshold.DedupBeta, SimStats{}, 0); th.Value < boot.Value {
		th = boot
	}
	if sim < th.Value {
		return p, nil, nil
	}
	// Only a valid memory is a duplicate: one that links to what is not
	// stored is refused, as its append would be.
	if err := s.CheckLinks(m, func(c cid.Cid) bool { return file != nil && c == m.Data.File.Content }); err != nil {
		return nil, nil, err
	}
	return p, &Duplicate{Existing: nearest.CID, Similarity: sim, Threshold: th}, nil
}

// sameTimeNeighbor is the nearest neighbour that could be a duplicate:
// memories with different timestamps record distinct events and are never
// duplicates of each other, however alike their words.
func (s *Self) sameTimeNeighbor(p *Prepared) (Neighbor, bool, error) {
	for _, n := range p.Neighbors {
		m, _, err := s.Get(n.CID)
		if err != nil {
			return Neighbor{}, false, err
		}
		a, b := m.Timestamp, p.Memory.Timestamp
		if (a == nil) == (b == nil) && (a == nil || *a == *b) {
			return n, true, nil
		}
	}
	return Neighbor{}, false, nil
}

// ReinforceDuplicate reinforces a deduplicated memory: an importance step toward 1 and one
// more access, as if it had been stored again.
func (s *Self) ReinforceDuplicate(ctx context.Context, c cid.Cid) error {
	alpha := s.cfg.Recall.ImportanceAlpha
	return s.store.Update(ctx, s.metaOp([]cid.Cid{c}, func(m *messages.MemoryMeta, _ cid.Cid) {
		m.Importance += alpha * (1 - m.Importance)
		m.AccessCount++
	}))
}

// neighbors returns up to k memories of sona nearest to vec, best first,
// leaving out self. A sona of up to recall.exact_scan_max memories is
// searched exactly among its own (cheaper than the graph, and exact);
// a larger one through the graph, its other sonas' hits filtered out.
func (s *Self) neighbors(vec []float32, sona string, k int, self cid.Cid) ([]Neighbor, error) {
	var hits []vector.Hit
	if members := s.ownMembers(sona, "", false); len(members) <= s.cfg.Recall.ExactScanMax {
		hits = s.index.SearchAmong(vec, members, max(4*k, 16))
	} else {
		hits = s.index.Search(vec, max(4*k, 16))
	}
	var out []Neighbor
	err := s.store.View(func(txn Reader) error {
		for _, h := range hits {
			c, err := cid.Cast([]byte(h.Key))
			if err != nil {
				return fmt.Errorf("%w: index key: %v", ErrCorrupt, err)
			}
			if c == self {
				continue
			}
			meta, err := s.meta(txn, c)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if meta.Archived || !slices.Contains(meta.Sonas, sona) {
				continue
			}
			out = append(out, Neighbor{CID: c, Sim: float64(h.Similarity)})
			if len(out) == k {
				break
			}
		}
		return nil
	})
	return out, err
}

// sonaSimStats returns a sona's nearest-neighbour similarity distribution
// and its length.
func (s *Self) sonaSimStats(sona string) (SimStats, int64, error) {
	rec, err := s.Sona(sona)
	if err != nil {
		return SimStats{}, 0, err
	}
	var stats SimStats
	err = s.store.View(func(txn Reader) error {
		item, err := txn.Item(assoc.SimStatsKey(sona))
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			stats, err = assoc.DecodeStats(v)
			return err
		})
	})
	return stats, rec.Length, err
}
