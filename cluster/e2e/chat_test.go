package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// TestChatRecallGathered: the recall inside a chat step and a query in
// self scope is gathered from every member like POST /recall. Six sonas,
// two created (so owned) through each of three members (R = 2), each with
// a memory about a lighthouse; the owner of the first holds only some of
// them. A self-scope chat in that sona, through another member, draws on
// all six (and its response, which links them, is appended); so does a
// query. With a member paused, a query answers after the peer timeout
// with the others' memories and X-Memoria-Unanswered naming it.
func TestChatRecallGathered(t *testing.T) {
	c, _ := startCluster(t, 3, 2, "MEMORIA_CLUSTER_PEER_TIMEOUT=2s", "MEMORIA_CLUSTER_LEASE_TTL=5s")
	var sonas, lighthouse []string
	for i := range 6 {
		n := c.Nodes[i%3]
		s := createSona(t, n.URL, fmt.Sprintf("keeper-%d", i))
		sonas = append(sonas, s)
		a, status, body, err := insert(n.URL, s, fmt.Sprintf("the lighthouse keeper number %d painted the lighthouse door in colour %d", i, i))
		if err != nil || status != http.StatusCreated {
			t.Fatalf("insert into %s: %d %s %v", s, status, body, err)
		}
		lighthouse = append(lighthouse, a.cid)
	}
	slices.Sort(lighthouse)
	owner := c.Nodes[0]
	missing := 0
	for _, l := range lighthouse {
		if status, _, err := local("GET", owner.URL+"/memory/"+l, ""); err == nil && status == http.StatusNotFound {
			missing++
		}
	}
	if missing == 0 {
		t.Fatal("the owner holds every sona's memory: the test proves nothing (R = 2 of 3 should leave it without some)")
	}
	t.Logf("the owner of %s lacks %d of the %d lighthouse memories", sonas[0], missing, len(lighthouse))

	const query = "lighthouse keeper painted the lighthouse door"
	recalled := func(b []byte) []string {
		var r struct {
			Recalled []struct {
				CID string `json:"cid"`
			} `json:"recalled"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		var out []string
		for _, m := range r.Recalled {
			if slices.Contains(lighthouse, m.CID) {
				out = append(out, m.CID)
			}
		}
		slices.Sort(out)
		return out
	}
	before, _, err := getSona(owner.URL, sonas[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"chat", "query"} {
		status, b, unanswered, err := authCall("POST", c.Nodes[1].URL+"/sona/"+sonas[0]+"/"+op, "", map[string]any{"content": query, "scope": "self", "k": 30})
		if err != nil || status != http.StatusOK || unanswered != "" {
			t.Fatalf("self-scope %s through %s: %d %s %v (unanswered %q)", op, c.Nodes[1].Name, status, b, err, unanswered)
		}
		if got := recalled(b); !slices.Equal(got, lighthouse) {
			t.Fatalf("self-scope %s: it drew on the lighthouse memories %v, want all six %v", op, got, lighthouse)
		}
	}
	after, _, err := getSona(owner.URL, sonas[0])
	if err != nil || after.Length != before.Length+2 {
		t.Fatalf("the chat step appended %d memories (%v), want its input and response", after.Length-before.Length, err)
	}

	pausedID, err := selfID(c.Nodes[2].URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[2].Pause(); err != nil {
		t.Fatal(err)
	}
	status, b, unanswered, err := authCall("POST", owner.URL+"/sona/"+sonas[0]+"/query", "", map[string]any{"content": query, "scope": "self", "k": 30})
	if err := c.Nodes[2].Resume(); err != nil {
		t.Fatal(err)
	}
	if err != nil || status != http.StatusOK || unanswered != pausedID {
		t.Fatalf("self-scope query with %s paused: %d %s %v, X-Memoria-Unanswered %q, want 200 naming %s", c.Nodes[2].Name, status, b, err, unanswered, pausedID)
	}
	if len(recalled(b)) == 0 {
		t.Fatalf("self-scope query with a member paused drew on no lighthouse memory: %s", b)
	}
}
