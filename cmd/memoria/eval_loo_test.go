package main

import (
	"testing"

	"github.com/memoria-ai/memoria/config"
)

func TestLOOGrid(t *testing.T) {
	rc := config.Default().Recall
	all := evalConfigs(rc)
	// The configured setting comes first: on ties it is kept.
	// With the context, time, speaker, session or feedback evidence:
	// recency and importance as configured or 0, affinity ×3, dense ×2,
	// b ×2, the evidence as configured, without each of those on, without
	// all (×5 with three, the default's context, time and speaker; ×4 with
	// two; ×2 with one).
	for name, want := range map[string]int{"dense": 9, "bm25": 18, "base": 108, "context": 96, "session": 96, "feedback": 96,
		"timespeaker": 192, "fused": 240, "withcontext": 240} {
		grid := looGrid(rc, all[name])
		if len(grid) != want {
			t.Errorf("%s: %d settings, want %d", name, len(grid), want)
		}
		first := grid[0]
		if *first.paths.Score != rc.Weights || first.paths.Weights != all[name].paths.Weights || first.bm25B != rc.BM25B {
			t.Errorf("%s: first setting %+v %+v b %v is not the configured one", name, first.paths, *first.paths.Score, first.bm25B)
		}
		labels := map[string]bool{}
		for _, s := range grid {
			if labels[s.label] {
				t.Errorf("%s: setting %q twice", name, s.label)
			}
			labels[s.label] = true
		}
	}
	// Each setting has its own score weights.
	grid := looGrid(rc, all["base"])
	if grid[0].paths.Score == grid[1].paths.Score {
		t.Fatal("settings share their score weights")
	}
	last := grid[len(grid)-1]
	if want := "recency 0.2, importance 0.4, affinity 1, dense 0.5, b 0.75"; last.label != want {
		t.Errorf("last setting %q, want %q", last.label, want)
	}
	if last.paths.Score.Recency != 0.2 || last.paths.Score.Importance != 0.4 || last.paths.Weights.Affinity != 1 ||
		last.paths.Weights.Dense != 0.5 || last.bm25B != 0.75 || last.paths.Weights.BM25 != rc.Paths.BM25 {
		t.Errorf("last setting %+v %+v b %v does not match its label", last.paths, *last.paths.Score, last.bm25B)
	}
	grid = looGrid(rc, all["withcontext"])
	last = grid[len(grid)-1]
	if want := "recency 0, importance 0, context 0, time 0, speaker 0, session 0, feedback 0, affinity 1, dense 0.5, b 0.75"; last.label != want {
		t.Errorf("last setting %q, want %q", last.label, want)
	}
	if w := last.paths.Weights; w.Context != 0 || w.Time != 0 || w.Speaker != 0 || w.Session != 0 || w.Feedback != 0 || w.Affinity != 1 || w.Dense != 0.5 {
		t.Errorf("last setting %+v does not match its label", w)
	}
	// The evidence axis is the third: its second value (the context
	// evidence off) comes after the 12 settings of affinity, dense and b.
	if w := grid[12].paths.Weights; grid[12].label != "recency 0.1, importance 0.2, context 0, time 0.5, speaker 0.2, session 0, feedback 0, affinity 0.5, dense 0.25, b 0.3" ||
		w.Context != 0 || w.Time != rc.Paths.Time || w.Speaker != rc.Paths.Speaker {
		t.Errorf("setting 12 %q %+v: want the context evidence off", grid[12].label, w)
	}
}
