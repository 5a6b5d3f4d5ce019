package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/internal/testutil"
)

// TestTiers drives chats past the STM's capacity and reads the tiers back:
// the documented shape, every page once, and the tier metrics.
func TestTiers(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	lines := []string{
		"I planted tomatoes and basil in my garden this spring.",
		"My garden tomatoes need more water in the summer heat.",
		"I took the night train from Lisbon to Madrid last week.",
		"The train to Madrid was late but the views were lovely.",
	}
	const chats = 9
	for i := range chats {
		h.post("/sona/"+id+"/chat", map[string]any{"content": lines[i%len(lines)], "name": "Caroline"}).obj(t, http.StatusOK)
	}
	var v map[string]any
	testutil.EventuallyShow(t, "the tiers to settle", func() (bool, string) {
		v = h.get("/sona/"+id+"/tiers").obj(t, http.StatusOK)
		stm, mtm := object(t, v["stm"]), object(t, v["mtm"])
		return len(array(t, stm["pending"])) == 0 && len(array(t, mtm["pending"])) == 0 && len(array(t, mtm["segments"])) > 0, fmt.Sprint(v)
	})
	wantKeys(t, v, "stm", "mtm", "lpm")
	stm := object(t, v["stm"])
	pages := array(t, stm["pages"])
	if len(pages) != 7 {
		t.Fatalf("STM holds %d pages after %d chats", len(pages), chats)
	}
	p := object(t, pages[0])
	for _, k := range []string{"seq", "q", "r", "t", "meta_chain", "q_text", "r_text"} {
		if _, ok := p[k]; !ok {
			t.Fatalf("page lacks %q: %v", k, p)
		}
	}
	if !strings.HasPrefix(str(t, p["q_text"]), "Caroline: ") {
		t.Fatalf("page text %q", p["q_text"])
	}
	n := 0
	for _, s := range array(t, object(t, v["mtm"])["segments"]) {
		seg := object(t, s)
		for _, k := range []string{"id", "summary", "keywords", "pages", "n_visit", "l_interaction", "last_access", "heat"} {
			if _, ok := seg[k]; !ok {
				t.Fatalf("segment lacks %q: %v", k, seg)
			}
		}
		n += len(array(t, seg["pages"]))
	}
	if n != chats-7 {
		t.Fatalf("MTM holds %d pages, want %d", n, chats-7)
	}
	wantKeys(t, object(t, v["lpm"]), "user", "agent", "updates")
	// The stored-only vectors never reach the response (the message's
	// empty fields are rendered, so they are there, empty).
	var walk func(path string, x any)
	walk = func(path string, x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, e := range x {
				if (k == "embedding" || k == "weights") && len(array(t, e)) > 0 {
					t.Fatalf("the response shows the stored-only %s.%s", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	walk("tiers", v)

	// Errors: a name no sona has, an unknown sona.
	h.get("/sona/nope/tiers").obj(t, http.StatusNotFound)
	h.get("/sona/00000000-0000-4000-8000-000000000000/tiers").obj(t, http.StatusNotFound)

	// The transitions were counted (by the tier actors, just after they
	// committed them).
	for _, want := range []string{`memoria_tier_transitions_total{kind="page_added"} 9`, `memoria_tier_transitions_total{kind="page_moved"} 2`} {
		testutil.Eventually(t, "the metric "+want, func() bool {
			m := h.get("/metrics")
			if m.status != http.StatusOK {
				t.Fatalf("metrics: %v", m)
			}
			return strings.Contains(string(m.body), want)
		})
	}
}
