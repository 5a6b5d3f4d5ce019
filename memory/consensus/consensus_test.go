package consensus

import (
	"testing"

	"github.com/memoria-ai/memoria/messages"
)

func TestDecideConsensus(t *testing.T) {
	upper, lower := 0.76, 0.44
	for _, tc := range []struct {
		signal float64
		agents int
		high   bool
		want   string
	}{
		{0.80, 2, false, StatusCommitted},
		{0.76, 3, false, StatusCommitted}, // crossing is reaching
		{0.80, 2, true, StatusPending},    // high stakes: 0.76 × 1.25 = 0.95
		{0.96, 2, true, StatusCommitted},
		{0.60, 2, false, StatusPending},
		{0.30, 2, false, StatusConflict},
		{0.30, 1, false, StatusPending}, // one agent cannot diverge
		{1.00, 1, false, StatusPending}, // nor agree
	} {
		u := upper
		if tc.high {
			u *= 1.25
		}
		if got := Decide(tc.signal, tc.agents, u, lower); got != tc.want {
			t.Errorf("signal %v agents %d high %v: %s, want %s", tc.signal, tc.agents, tc.high, got, tc.want)
		}
	}
}

func TestSignalIsMeanPairwiseCosine(t *testing.T) {
	v := func(x, y float32) *messages.Version { return &messages.Version{Embedding: []float32{x, y}} }
	got := Signal([]*messages.Version{v(1, 0), v(1, 0), v(0, 1)}) // pairs: 1, 0, 0
	if got < 0.333 || got > 0.334 {
		t.Fatalf("signal %v, want 1/3", got)
	}
	if Signal([]*messages.Version{v(1, 0)}) != 0 {
		t.Fatal("one version has no signal")
	}
}
