package assoc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
)

// Living Memory's emergent thresholds come from Signal Detection Theory:
//
//	threshold = mean_sim + log(β)·std_sim
//
// over the live similarity distribution, where β is the cost of a false
// alarm over the cost of a miss (retrieval 0.3, dedup 3.0, consensus 5.0).
// Below the configured number of nodes the distribution is too small to
// trust and the bootstrap mean and standard deviation stand in for it.

// SimStats is a running similarity distribution (Welford's algorithm).
type SimStats struct {
	N    int64
	Mean float64
	M2   float64
}

// Add records one similarity.
func (s *SimStats) Add(x float64) {
	s.N++
	d := x - s.Mean
	s.Mean += d / float64(s.N)
	s.M2 += d * (x - s.Mean)
}

// Std is the population standard deviation.
func (s SimStats) Std() float64 {
	if s.N < 2 {
		return 0
	}
	return math.Sqrt(s.M2 / float64(s.N))
}

// StatsOf summarises a sample.
func StatsOf(xs []float64) SimStats {
	var s SimStats
	for _, x := range xs {
		s.Add(x)
	}
	return s
}

// Threshold is one emergent threshold with how it was reached.
type Threshold struct {
	Value     float64
	Mean, Std float64
	Beta      float64
	Bootstrap bool // the bootstrap distribution stood in for the live one
}

// EmergentThreshold computes mean + log(β)·std over live, or over the
// bootstrap distribution when fewer than the configured minimum of nodes
// back it.
func EmergentThreshold(t config.Thresholds, beta float64, live SimStats, nodes int64) Threshold {
	th := Threshold{Mean: live.Mean, Std: live.Std(), Beta: beta}
	if nodes < int64(t.BootstrapMin) || live.N < int64(t.BootstrapMin) {
		th.Mean, th.Std, th.Bootstrap = t.BootstrapMean, t.BootstrapStd, true
	}
	th.Value = th.Mean + math.Log(beta)*th.Std
	return th
}

// EncodeStats is s as stored (d/): n, mean and M2, 8 bytes BE each.
func EncodeStats(s SimStats) []byte {
	out := make([]byte, 24)
	binary.BigEndian.PutUint64(out, uint64(s.N))
	binary.BigEndian.PutUint64(out[8:], math.Float64bits(s.Mean))
	binary.BigEndian.PutUint64(out[16:], math.Float64bits(s.M2))
	return out
}

// DecodeStats reads what EncodeStats wrote.
func DecodeStats(b []byte) (SimStats, error) {
	if len(b) != 24 {
		return SimStats{}, fmt.Errorf("%w: similarity stats of %d bytes", base.ErrCorrupt, len(b))
	}
	return SimStats{
		N:    int64(binary.BigEndian.Uint64(b)),
		Mean: math.Float64frombits(binary.BigEndian.Uint64(b[8:])),
		M2:   math.Float64frombits(binary.BigEndian.Uint64(b[16:])),
	}, nil
}
