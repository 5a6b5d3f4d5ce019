package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// TestChatRecallGathered: the recall inside a chat step and a query in
// self scope is gathered from every member like POST /recall. Six sonas,
// two created (so owned) through each of three members (R = 2), each with
// a memory about a lighthouse; the owner of the first holds only some of
// them. A self-scope chat in that sona, through another member, draws on
// all six (and its response, which links them, is appended); so does a
// query. With a member paused, a query answers after the peer timeout
// with the others' memories and X-Memoria-Unanswered naming it; so does a
// streamed chat step, and an MCP query names it in its output.
func TestChatRecallGathered(t *testing.T) {
	// A peer timeout much shorter than the lease: the paused member is
	// asked three times, and does not answer in time, before it leaves.
	c, _ := startCluster(t, 3, 2, "MEMORIA_CLUSTER_PEER_TIMEOUT=2s", "MEMORIA_CLUSTER_LEASE_TTL=15s")
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

	// The member paused holds nothing of the sona: the chat step's
	// appends do not wait for it, only the gathering does.
	var paused *clusterproc.Proc
	var pausedID string
	for _, n := range c.Nodes {
		id, err := selfID(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(etcdHeads(t, c.Etcd.URL)[sonas[0]].Replicas, id) {
			paused, pausedID = n, id
		}
	}
	if paused == nil || paused == owner {
		t.Fatalf("no member apart from the owner lacks sona %s", sonas[0])
	}
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	status, b, unanswered, err := authCall("POST", owner.URL+"/sona/"+sonas[0]+"/query", "", map[string]any{"content": query, "scope": "self", "k": 30})
	// A streamed chat step names it in its header, an MCP query in its
	// output.
	streamStatus, streamBody, streamUnanswered, streamErr := authCall("POST", owner.URL+"/sona/"+sonas[0]+"/chat", "",
		map[string]any{"content": query, "scope": "self", "k": 30, "stream": true})
	rpc := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query","arguments":{"sona":"` + sonas[0] + `","content":"` + query + `","scope":"self","k":30}}}`
	req, _ := http.NewRequest("POST", owner.URL+"/mcp", strings.NewReader(rpc))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, mcpErr := hc.Do(req)
	var mcpBody []byte
	if mcpErr == nil {
		mcpBody, mcpErr = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	// A live member starved of CPU may be named too: the paused one must be.
	named := func(header string) bool { return slices.Contains(strings.Split(header, ","), pausedID) }
	if err != nil || status != http.StatusOK || !named(unanswered) {
		t.Fatalf("self-scope query with %s paused: %d %s %v, X-Memoria-Unanswered %q, want 200 naming %s", paused.Name, status, b, err, unanswered, pausedID)
	}
	if len(recalled(b)) == 0 {
		t.Fatalf("self-scope query with a member paused drew on no lighthouse memory: %s", b)
	}
	if streamErr != nil || streamStatus != http.StatusOK || !named(streamUnanswered) || !strings.Contains(string(streamBody), "event: done") {
		t.Fatalf("streamed self-scope chat with %s paused: %d %s %v, X-Memoria-Unanswered %q, want 200 naming %s", paused.Name, streamStatus, streamBody, streamErr, streamUnanswered, pausedID)
	}
	var out struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Unanswered []string `json:"unanswered"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if mcpErr != nil || json.Unmarshal(mcpBody, &out) != nil || out.Result.IsError || !slices.Contains(out.Result.StructuredContent.Unanswered, pausedID) {
		t.Fatalf("MCP self-scope query with %s paused: %s %v, want unanswered [%s]", paused.Name, mcpBody, mcpErr, pausedID)
	}
}
