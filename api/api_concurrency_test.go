package api_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
)

// Concurrent writes to one sona keep its chain linear and complete. These
// tests assert outcomes only, never timing.

func TestConcurrentIdenticalInserts(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	body := map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": "said many times"}}
	const n = 20
	statuses := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = h.post("/memories", body)
		}()
	}
	wg.Wait()
	created, existed := 0, 0
	var c string
	for _, r := range statuses {
		switch r.status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
			existed++
		default:
			t.Fatalf("concurrent identical insert: %s", r)
		}
		m := decodeJSON(t, r.body).(map[string]any)
		if c == "" {
			c = str(t, m["cid"])
		} else if m["cid"] != c {
			t.Fatalf("same body, different CIDs %s and %v", c, m["cid"])
		}
		if (r.status == http.StatusOK) != (m["existed"] == true) {
			t.Fatalf("status and existed disagree: %s", r)
		}
	}
	if created != 1 || existed != n-1 {
		t.Fatalf("%d created, %d existed; want 1 and %d", created, existed, n-1)
	}
	if got := h.sonaLength(id); got != 1 {
		t.Fatalf("chain length %d, want 1", got)
	}
	if got := h.memoryCount(); got != 1 {
		t.Fatalf("%d memories, want 1", got)
	}
}

func TestConcurrentDistinctInserts(t *testing.T) {
	h := newHarness(t)
	a, b := h.newSona("alice"), h.newSona("bob")
	const n = 30
	res := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sona := a
			if i%3 == 0 {
				sona = b
			}
			// dedup off: "memory 7" and "memory 17" are near-duplicates
			// under a threshold that learns from what came before, so
			// the order of the concurrent inserts decided whether two
			// merged. This test is about seqs, not dedup.
			res[i] = h.post("/memories", map[string]any{"sona": sona, "dedup": false, "data": map[string]any{"kind": "text", "content": fmt.Sprintf("memory %d", i)}})
		}()
	}
	wg.Wait()
	seqs := map[string]map[int64]bool{a: {}, b: {}}
	for i, r := range res {
		m := r.obj(t, http.StatusCreated)
		sona := a
		if i%3 == 0 {
			sona = b
		}
		s := num(t, m["seq"])
		if seqs[sona][s] {
			t.Fatalf("seq %d given twice in one sona", s)
		}
		seqs[sona][s] = true
	}
	if la, lb := h.sonaLength(a), h.sonaLength(b); la != 20 || lb != 10 {
		t.Fatalf("lengths %d and %d, want 20 and 10", la, lb)
	}
	// The chain lists every memory once, in seq order 0..n-1.
	page := h.get("/memories/list?limit=100&sona="+a).obj(t, http.StatusOK)
	if items := array(t, page["items"]); len(items) != 20 {
		t.Fatalf("alice lists %d memories", len(items))
	}
	if got := h.memoryCount(); got != n {
		t.Fatalf("%d memories, want %d", got, n)
	}
}

func TestConcurrentChats(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	const n = 10
	res := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = h.post("/sona/"+id+"/chat", map[string]any{"content": fmt.Sprintf("message %d about sailing", i)})
		}()
	}
	wg.Wait()
	for _, r := range res {
		r.obj(t, http.StatusOK)
	}
	if got := h.sonaLength(id); got != 2*n {
		t.Fatalf("length %d after %d chats, want %d", got, n, 2*n)
	}
	if got := h.memoryCount(); got != 2*n {
		t.Fatalf("%d memories, want %d", got, 2*n)
	}
}

// A failing insert must not fail other writes to the same sona that are
// valid, whatever their interleaving.
func TestFailedInsertDoesNotFailOthers(t *testing.T) {
	h := newHarness(t)
	id := h.newSona("alice")
	missing, err := cid.Prefix{Version: 1, Codec: 0x71, MhType: 0x12, MhLength: -1}.Sum([]byte("never stored"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	good := make([]response, n)
	bad := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			bad[i] = h.post("/memories", map[string]any{"sona": id,
				"data":  map[string]any{"kind": "text", "content": fmt.Sprintf("bad %d", i)},
				"edges": []any{map[string]any{"target": map[string]any{"/": missing.String()}, "weight": 1}}})
		}()
		go func() {
			defer wg.Done()
			// dedup off: "good 1" and "good 2" are near-duplicates by design.
			good[i] = h.post("/memories", map[string]any{"sona": id, "dedup": false,
				"data": map[string]any{"kind": "text", "content": fmt.Sprintf("good %d", i)}})
		}()
	}
	wg.Wait()
	wrongBad, failedGood := 0, 0
	for _, r := range bad {
		if r.status != http.StatusBadRequest {
			wrongBad++
			t.Errorf("invalid insert (edge to a missing memory) did not get 400: %s", r)
		}
	}
	for _, r := range good {
		if r.status != http.StatusCreated {
			failedGood++
			t.Errorf("valid insert failed next to invalid ones: %s", r)
		}
	}
	if wrongBad+failedGood > 0 {
		t.Fatalf("%d of %d valid inserts failed; %d of %d invalid ones got another status than 400", failedGood, n, wrongBad, n)
	}
	if got := h.sonaLength(id); got != n {
		t.Fatalf("length %d, want %d", got, n)
	}
	// The sona still takes writes afterwards.
	h.insertText(id, "after the storm")
	h.post("/sona/"+id+"/chat", map[string]any{"content": "still there?"}).obj(t, http.StatusOK)
	if got := h.sonaLength(id); got != n+3 {
		t.Fatalf("length %d, want %d", got, n+3)
	}
}
