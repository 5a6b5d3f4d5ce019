package api_test

import (
	"net/http"
	"testing"

	"github.com/memoria-ai/memoria/internal/testutil"

	"github.com/ipfs/go-cid"
)

func TestEvaluation(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("ella")
	c := h.insertText(id, "I felt so happy and loved when we adopted the puppy; a new chapter.")

	var ev map[string]any
	testutil.Eventually(t, "the memory's evaluation", func() bool {
		r := h.get("/memory/" + c + "/evaluation")
		if r.status == http.StatusOK {
			ev = r.obj(t, http.StatusOK)
			return true
		}
		wantError(t, r, http.StatusNotFound, "not_found")
		return false
	})
	wantKeys(t, ev, "archetypes", "failures", "evaluated_at", "evaluator")
	if ev["evaluator"] != "heuristic" || len(array(t, ev["failures"])) != 0 {
		t.Fatalf("evaluation %v", ev)
	}
	archetypes := array(t, ev["archetypes"])
	if len(archetypes) != 2 {
		t.Fatalf("%d archetypes evaluated, want the 2 configured", len(archetypes))
	}
	for _, a := range archetypes {
		a := object(t, a)
		wantKeys(t, a, "archetype", "metrics", "justifications", "annotations", "priority", "priority_justification")
		wantKeys(t, object(t, a["annotations"]), "spoken", "context", "relationship_impact", "identity", "learning", "future_directions")
		p := object(t, a["priority"])
		wantKeys(t, p, "score", "factors", "decay_rate")
		if s := fnum(t, p["score"]); s <= 0 || s > 1 {
			t.Errorf("priority score %v", s)
		}
		if len(object(t, a["metrics"])) != len(object(t, a["justifications"])) {
			t.Errorf("metrics and justifications differ: %v", a)
		}
	}

	meta := object(t, h.memory(c)["meta"])
	sum := object(t, meta["evaluation"])
	wantKeys(t, sum, "metrics", "priority", "failed")
	if fnum(t, object(t, sum["metrics"])["emotional_depth"]) <= 0 || sum["failed"] != false {
		t.Errorf("meta.evaluation %v", sum)
	}
	if fnum(t, meta["importance"]) <= 0 {
		t.Errorf("importance %v was not seeded by the priority", meta["importance"])
	}

	unknown, _ := cid.Prefix{Version: 1, Codec: 0x71, MhType: 0x12, MhLength: -1}.Sum([]byte("nothing"))
	wantError(t, h.get("/memory/not-a-cid/evaluation"), http.StatusBadRequest, "invalid_cid")
	wantError(t, h.get("/memory/"+unknown.String()+"/evaluation"), http.StatusNotFound, "not_found")
	wantError(t, h.post("/memory/"+c+"/evaluation", map[string]any{}), http.StatusMethodNotAllowed, "method_not_allowed")
}
