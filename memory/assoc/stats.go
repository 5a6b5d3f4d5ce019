package assoc

import (
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// KeySimStats is the key space of the sonas' similarity distributions:
// d/ sona uuid → EncodeStats.
var KeySimStats = []byte("d/")

// SimStatsKey is the key of sona's similarity distribution.
func SimStatsKey(sona string) []byte { return base.Join(KeySimStats, []byte(sona)) }

// LiveStats merges every sona's nearest-neighbour similarity
// distribution (Chan et al.'s parallel update).
func LiveStats(r store.Reader) (SimStats, error) {
	var all SimStats
	err := store.Scan(r, KeySimStats, func(_, v []byte) error {
		st, err := DecodeStats(v)
		if err != nil {
			return err
		}
		all = Merge(all, st)
		return nil
	})
	return all, err
}

// Merge is the distribution of two samples together (Chan et al.).
func Merge(a, b SimStats) SimStats {
	if a.N == 0 {
		return b
	}
	if b.N == 0 {
		return a
	}
	n := a.N + b.N
	d := b.Mean - a.Mean
	return SimStats{
		N:    n,
		Mean: a.Mean + d*float64(b.N)/float64(n),
		M2:   a.M2 + b.M2 + d*d*float64(a.N)*float64(b.N)/float64(n),
	}
}
