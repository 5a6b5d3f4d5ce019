package assoc

import (
	"errors"
	"math"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
)

func TestSimStatsMatchesTheSample(t *testing.T) {
	xs := []float64{0.1, 0.4, 0.35, 0.8, 0.55, 0.2}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	st := StatsOf(xs)
	if st.N != int64(len(xs)) || math.Abs(st.Mean-mean) > 1e-12 || math.Abs(st.Std()-math.Sqrt(ss/float64(len(xs)))) > 1e-12 {
		t.Fatalf("StatsOf = %+v (std %v), want n %d mean %v std %v", st, st.Std(), len(xs), mean, math.Sqrt(ss/float64(len(xs))))
	}
	if (SimStats{N: 1, M2: 5}).Std() != 0 {
		t.Fatal("the std of one similarity is not 0")
	}
	back, err := DecodeStats(EncodeStats(st))
	if err != nil || back != st {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := DecodeStats(make([]byte, 23)); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("short record: err = %v, want ErrCorrupt", err)
	}
}

func TestEmergentThreshold(t *testing.T) {
	th := config.Thresholds{BootstrapMin: 5, BootstrapMean: 0.5, BootstrapStd: 0.1}
	live := StatsOf([]float64{0.2, 0.4, 0.6, 0.8, 0.2, 0.4})
	got := EmergentThreshold(th, 3, live, 100)
	if want := live.Mean + math.Log(3)*live.Std(); got.Bootstrap || math.Abs(got.Value-want) > 1e-12 {
		t.Fatalf("live: %+v, want value %v", got, want)
	}
	// Too few nodes, or too few similarities: the bootstrap stands in.
	for _, c := range []struct {
		live  SimStats
		nodes int64
	}{{live, 4}, {StatsOf([]float64{0.9, 0.1}), 100}} {
		got := EmergentThreshold(th, 0.3, c.live, c.nodes)
		if want := 0.5 + math.Log(0.3)*0.1; !got.Bootstrap || math.Abs(got.Value-want) > 1e-12 {
			t.Errorf("n=%d nodes=%d: %+v, want the bootstrap's %v", c.live.N, c.nodes, got, want)
		}
	}
}
