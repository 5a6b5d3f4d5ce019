package eumas

import (
	"cmp"
	"slices"
	"sync"

	"github.com/memoria-ai/memoria/memory/base"
)

// profileTable holds the metric profiles (unit vectors over the metric
// names) of the evaluated memories by their vector-index id, so the
// metric path scans a sona's own memories as the exact dense path does.
// It is derived: rebuilt from the metadata after open (Store.BeginLoad).
type profileTable struct {
	mu   sync.RWMutex
	rows [][]float32 // by vector-index id; nil: no profile
	n    int         // rows set
}

func (t *profileTable) set(id uint64, p []float32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id >= uint64(len(t.rows)) {
		t.rows = slices.Grow(t.rows, int(id)+1-len(t.rows))[:id+1]
	}
	if t.rows[id] == nil {
		t.n++
	}
	t.rows[id] = p
}

func (t *profileTable) get(id uint64) []float32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if id < uint64(len(t.rows)) {
		return t.rows[id]
	}
	return nil
}

// len is the number of memories with a profile.
func (t *profileTable) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.n
}

// ProfileHit is a vector id and its profile's cosine to a query's.
type ProfileHit struct {
	ID  uint64
	Sim float64
}

// nearest returns the k of ids whose profiles are nearest q (cosine above
// 0), best first.
func (t *profileTable) nearest(q []float32, ids []uint64, k int) []ProfileHit {
	var out []ProfileHit
	t.mu.RLock()
	for _, id := range ids {
		if id >= uint64(len(t.rows)) || t.rows[id] == nil {
			continue
		}
		if sim := base.Dot(q, t.rows[id]); sim > 0 {
			out = append(out, ProfileHit{id, sim})
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b ProfileHit) int {
		if c := cmp.Compare(b.Sim, a.Sim); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out[:min(k, len(out))]
}
