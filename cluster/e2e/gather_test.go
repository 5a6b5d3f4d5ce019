package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/api"
)

// authCall is call with a bearer token ("" for none); it returns the
// X-Memoria-Unanswered header too.
func authCall(method, url, token string, in any) (int, []byte, string, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, "", err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, nil, "", err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get("X-Memoria-Unanswered"), err
}

// recallCIDs recalls query in sona through url and returns the CIDs of
// the hits, sorted.
func recallCIDs(t *testing.T, url, token, sona, scope, query string) []string {
	t.Helper()
	in := map[string]any{"query": query, "k": 30}
	if scope != "" {
		in["scope"] = scope
	}
	status, b, unanswered, err := authCall("POST", url+"/sona/"+sona+"/recall", token, in)
	if err != nil || status != http.StatusOK {
		t.Fatalf("recall in %s through %s: %d %s %v", sona, url, status, b, err)
	}
	if unanswered != "" {
		t.Fatalf("recall in %s through %s: members did not answer: %s", sona, url, unanswered)
	}
	var r struct {
		Memories []struct {
			CID  string `json:"cid"`
			Rank int    `json:"rank"`
		} `json:"memories"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range r.Memories {
		if m.Rank > 0 {
			out = append(out, m.CID)
		}
	}
	slices.Sort(out)
	return out
}

// listUUIDs lists the sonas through url (every page).
func listUUIDs(t *testing.T, url, token string) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		status, b, unanswered, err := authCall("GET", url+"/sonas/list?limit=4&cursor="+cursor, token, nil)
		if err != nil || status != http.StatusOK || unanswered != "" {
			t.Fatalf("GET %s/sonas/list: %d %s %v (unanswered %q)", url, status, b, err, unanswered)
		}
		var page struct {
			Items []struct {
				UUID string `json:"uuid"`
			} `json:"items"`
			Next string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Items {
			out = append(out, s.UUID)
		}
		if page.Next == "" {
			return out
		}
		cursor = page.Next
	}
}

// TestSelfRecallGathered: nine sonas, three created (so owned) through
// each of three members (R = 2, so no member holds them all), each with a
// memory about a lighthouse. A self-scope recall in any sona, through any
// member, finds all nine, and the same ones; GET /sonas/list lists every
// sona through every member. Then, with tokens: a token limited to one
// sona recalls (sona scope) only that sona's memories, is refused self
// scope, and lists only that sona, through every member.
func TestSelfRecallGathered(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "memoria.yaml")
	if err := os.WriteFile(cfg, []byte("server: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A peer timeout shorter than the lease: a paused member is asked, and
	// does not answer in time, before it leaves the cluster.
	c, _ := startCluster(t, 3, 2, "MEMORIA_CONFIG="+cfg, "MEMORIA_CLUSTER_PEER_TIMEOUT=2s", "MEMORIA_CLUSTER_LEASE_TTL=5s")
	var sonas []string
	lighthouse := map[string]string{} // cid → sona
	bySona := map[string][]string{}   // sona → its cids
	for i := range 9 {
		n := c.Nodes[i%3]
		s := createSona(t, n.URL, fmt.Sprintf("keeper-%d", i))
		sonas = append(sonas, s)
		for j, text := range []string{
			fmt.Sprintf("the lighthouse keeper number %d painted the lighthouse door in colour %d", i, i),
			fmt.Sprintf("unrelated note %d about groceries and the weather", i),
		} {
			a, status, body, err := insert(n.URL, s, text)
			if err != nil || status != http.StatusCreated {
				t.Fatalf("insert into %s: %d %s %v", s, status, body, err)
			}
			if j == 0 {
				lighthouse[a.cid] = s
			}
			bySona[s] = append(bySona[s], a.cid)
		}
	}
	want := make([]string, 0, len(lighthouse))
	for k := range lighthouse {
		want = append(want, k)
	}
	slices.Sort(want)

	// No member holds every sona: the recall has to gather.
	lacking := 0
	for _, n := range c.Nodes {
		for _, s := range sonas {
			if status, _, err := local("GET", n.URL+"/sona/"+s, ""); err == nil && status == http.StatusNotFound {
				lacking++
			}
		}
	}
	if lacking == 0 {
		t.Fatal("every member holds every sona: the test proves nothing (R = 2 of 3 should leave each member without some)")
	}
	t.Logf("%d (member, sona) pairs where the member holds nothing of the sona", lacking)

	const query = "lighthouse keeper painted the lighthouse door"
	for _, s := range []string{sonas[0], sonas[4], sonas[8]} {
		var first []string
		for _, n := range c.Nodes {
			got := recallCIDs(t, n.URL, "", s, "self", query)
			var found []string
			for _, g := range got {
				if lighthouse[g] != "" {
					found = append(found, g)
				}
			}
			if !slices.Equal(found, want) {
				t.Fatalf("self-scope recall in %s through %s: lighthouse hits %v, want all nine %v", s, n.Name, found, want)
			}
			if first == nil {
				first = got
			} else if !slices.Equal(got, first) {
				t.Fatalf("self-scope recall in %s: through %s %v, through %s %v", s, c.Nodes[0].Name, first, n.Name, got)
			}
		}
	}

	// A figure, not an assertion: the median of 15 recalls through the
	// owner, gathered (self) and not (sona).
	for _, scope := range []string{"sona", "self"} {
		var ds []time.Duration
		for range 15 {
			start := time.Now()
			recallCIDs(t, c.Nodes[0].URL, "", sonas[0], scope, query)
			ds = append(ds, time.Since(start))
		}
		med, hi := spread(ds)
		t.Logf("recall in %s scope through the owner: median %s, max %s", scope, med.Round(time.Millisecond/10), hi.Round(time.Millisecond/10))
	}

	var lists [][]string
	for _, n := range c.Nodes {
		l := listUUIDs(t, n.URL, "")
		for _, s := range sonas {
			if !slices.Contains(l, s) {
				t.Fatalf("GET /sonas/list through %s lacks %s: %v", n.Name, s, l)
			}
		}
		if !slices.IsSorted(l) || len(slices.Compact(slices.Clone(l))) != len(l) {
			t.Fatalf("GET /sonas/list through %s: not one sorted list of distinct sonas: %v", n.Name, l)
		}
		lists = append(lists, l)
	}
	if !slices.Equal(lists[0], lists[1]) || !slices.Equal(lists[0], lists[2]) {
		t.Fatalf("GET /sonas/list differs between members: %v", lists)
	}

	// A member paused: a self-scope recall through another answers with
	// what the others hold, in time, and names the silent member.
	pausedID, err := selfID(c.Nodes[2].URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Nodes[2].Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	status, b, unanswered, err := authCall("POST", c.Nodes[0].URL+"/sona/"+sonas[0]+"/recall", "", map[string]any{"query": query, "k": 30, "scope": "self"})
	took := time.Since(start)
	if err := c.Nodes[2].Resume(); err != nil {
		t.Fatal(err)
	}
	if err != nil || status != http.StatusOK || unanswered != pausedID {
		t.Fatalf("self-scope recall with %s paused: %d %s %v, X-Memoria-Unanswered %q, want 200 naming %s", c.Nodes[2].Name, status, b, err, unanswered, pausedID)
	}
	t.Logf("self-scope recall with a member paused answered in %s", took.Round(time.Millisecond))

	// Tokens: every member restarts with a root token and one limited to
	// sonas[0].
	const root, limited = "root-secret-token-0123456789", "limited-secret-token-0123456789"
	yaml := fmt.Sprintf("server:\n  auth:\n    tokens:\n      - {name: root, hash: %q, scopes: [admin]}\n      - {name: limited, hash: %q, scopes: [write], sonas: [%q]}\n",
		api.HashToken(root), api.HashToken(limited), sonas[0])
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := n.Stop(10 * time.Second); err != nil {
			t.Fatalf("stopping %s: %v", n.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range c.Nodes {
		if err := n.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		eventually(t, 30*time.Second, n.Name+" sees 3 members", func() (bool, string) {
			status, b, _, err := authCall("GET", n.URL+"/cluster", root, nil)
			return err == nil && status == http.StatusOK && strings.Count(string(b), `"url"`) == 3, fmt.Sprint(status, string(b), err)
		})
	}
	for _, n := range c.Nodes {
		got := recallCIDs(t, n.URL, limited, sonas[0], "", query)
		if len(got) == 0 {
			t.Fatalf("the limited token recalls nothing in its own sona through %s", n.Name)
		}
		for _, g := range got {
			if !slices.Contains(bySona[sonas[0]], g) {
				t.Fatalf("the limited token recalled %s (of sona %s) through %s", g, lighthouse[g], n.Name)
			}
		}
		if status, b, _, err := authCall("POST", n.URL+"/sona/"+sonas[0]+"/recall", limited, map[string]any{"query": query, "scope": "self"}); err != nil || status != http.StatusForbidden {
			t.Fatalf("self scope with the limited token through %s: %d %s %v, want 403", n.Name, status, b, err)
		}
		if l := listUUIDs(t, n.URL, limited); !slices.Equal(l, sonas[:1]) {
			t.Fatalf("GET /sonas/list with the limited token through %s: %v, want only %s", n.Name, l, sonas[0])
		}
		if got := recallCIDs(t, n.URL, root, sonas[4], "self", query); len(got) < len(want) {
			t.Fatalf("self-scope recall with the root token through %s after the restart: %v", n.Name, got)
		}
	}
}
