package main

import (
	"testing"

	"github.com/memoria-ai/memoria/config"
)

func TestLOOGrid(t *testing.T) {
	rc := config.Default().Recall
	all := evalConfigs(rc)
	// The configured setting comes first: on ties it is kept.
	// With the context, time, speaker, session, feedback or reply
	// evidence: recency and importance as configured or 0, affinity ×3,
	// dense ×2, b ×2, the evidence as configured, without each of those
	// on, without all, and with the context, speaker and reply weights
	// halved and doubled (×8 with four, the default's context, time,
	// speaker and reply; ×6 with the time and speaker; ×4 with the context
	// alone; ×2 with one that is not scaled).
	for name, want := range map[string]int{"dense": 9, "bm25": 18, "base": 108, "context": 192, "session": 96, "feedback": 96,
		"timespeaker": 288, "fused": 384, "withcontext": 384} {
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
	grid = looGrid(rc, all["fused"])
	last = grid[len(grid)-1]
	if want := "recency 0, importance 0, context 1, time 0.5, speaker 0.8, session 0, feedback 0, reply 1, affinity 1, dense 0.5, b 0.75"; last.label != want {
		t.Errorf("last setting %q, want %q", last.label, want)
	}
	if w := last.paths.Weights; w.Context != 1 || w.Time != 0.5 || w.Speaker != 0.8 || w.Reply != 1 || w.Affinity != 1 || w.Dense != 0.5 {
		t.Errorf("last setting %+v does not match its label", w)
	}
	// The evidence axis is the third: its second value (the context
	// evidence off) comes after the 12 settings of affinity, dense and b;
	// all of it off is its sixth, and halved its seventh.
	if w := grid[12].paths.Weights; grid[12].label != "recency 0.1, importance 0.2, context 0, time 0.5, speaker 0.4, session 0, feedback 0, reply 0.5, affinity 0.5, dense 0.25, b 0.3" ||
		w.Context != 0 || w.Time != rc.Paths.Time || w.Speaker != rc.Paths.Speaker || w.Reply != rc.Paths.Reply {
		t.Errorf("setting 12 %q %+v: want the context evidence off", grid[12].label, w)
	}
	if w := grid[5*12].paths.Weights; grid[5*12].label != "recency 0.1, importance 0.2, context 0, time 0, speaker 0, session 0, feedback 0, reply 0, affinity 0.5, dense 0.25, b 0.3" ||
		w.Context != 0 || w.Time != 0 || w.Speaker != 0 || w.Reply != 0 {
		t.Errorf("setting 60 %q %+v: want all the evidence off", grid[5*12].label, w)
	}
	if w := grid[6*12].paths.Weights; grid[6*12].label != "recency 0.1, importance 0.2, context 0.25, time 0.5, speaker 0.2, session 0, feedback 0, reply 0.25, affinity 0.5, dense 0.25, b 0.3" ||
		w.Context != rc.Paths.Context/2 || w.Time != rc.Paths.Time || w.Speaker != rc.Paths.Speaker/2 || w.Reply != rc.Paths.Reply/2 {
		t.Errorf("setting 72 %q %+v: want the context, speaker and reply weights halved", grid[6*12].label, w)
	}
}
