package main

import (
	"testing"

	"github.com/memoria-ai/memoria/config"
)

func TestLOOGrid(t *testing.T) {
	rc := config.Default().Recall
	all := evalConfigs(rc)
	// The configured setting comes first: on ties it is kept.
	for name, want := range map[string]int{"dense": 9, "bm25": 18, "fused": 108} {
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
	grid := looGrid(rc, all["fused"])
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
}
