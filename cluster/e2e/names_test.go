package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
)

// TestNamesUniqueAcrossMembers: two members create the same names at the
// same moment; for each name exactly one creation succeeds (201) and the
// other is refused (409 exists), and the winner is the one sona that has
// the name, from both members.
func TestNamesUniqueAcrossMembers(t *testing.T) {
	c, _ := startCluster(t, 2, 2)
	const names = 20
	type result struct {
		status int
		uuid   string
	}
	results := make([][2]result, names)
	var wg sync.WaitGroup
	for i := range names {
		for j, n := range c.Nodes {
			wg.Go(func() {
				status, b, err := call("POST", n.URL+"/sonas", map[string]string{"name": fmt.Sprintf("twin-%d", i)})
				if err != nil {
					t.Errorf("create twin-%d through %s: %v", i, n.Name, err)
					return
				}
				r := result{status: status}
				if status == http.StatusCreated {
					var s struct {
						UUID string `json:"uuid"`
					}
					if err := json.Unmarshal(b, &s); err != nil {
						t.Error(err)
					}
					r.uuid = s.UUID
				} else if status != http.StatusConflict || !jsonCode(b, "exists") {
					t.Errorf("create twin-%d through %s: %d %s", i, n.Name, status, b)
				}
				results[i][j] = r
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, r := range results {
		var winner string
		switch {
		case r[0].status == http.StatusCreated && r[1].status == http.StatusConflict:
			winner = r[0].uuid
		case r[1].status == http.StatusCreated && r[0].status == http.StatusConflict:
			winner = r[1].uuid
		default:
			t.Fatalf("twin-%d: statuses %d and %d, want one 201 and one 409", i, r[0].status, r[1].status)
		}
		for _, n := range c.Nodes {
			s, status, err := getSona(n.URL, fmt.Sprintf("twin-%d", i))
			if err != nil || status != http.StatusOK || s.UUID != winner {
				t.Fatalf("twin-%d by name through %s: %d %+v %v, want %s", i, n.Name, status, s, err, winner)
			}
		}
	}
	// A duplicate name, asked for, is created.
	status, b, err := call("POST", c.Nodes[1].URL+"/sonas", map[string]any{"name": "twin-0", "allow_duplicate": true})
	if err != nil || status != http.StatusCreated {
		t.Fatalf("a duplicate name, asked for: %d %s %v", status, b, err)
	}
}
