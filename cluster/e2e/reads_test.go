package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// TestAnyMemberServes: with three members and R = 2, the member that
// holds nothing of a sona still serves it: an MCP tool call (insert) is
// carried out by the owner, an export comes from a member holding the
// sona, and its blocks come from the others, verified against their CIDs.
// When its replica dies, `memoria cluster status` names it
// under-replicated until its next write.
func TestAnyMemberServes(t *testing.T) {
	c, _ := startCluster(t, 3, 2)
	id := createSona(t, c.Nodes[0].URL, "far")
	if _, status, body, err := insert(c.Nodes[0].URL, id, "written through its owner"); err != nil || status != http.StatusCreated {
		t.Fatalf("insert: %d %s %v", status, body, err)
	}
	h := etcdHeads(t, c.Etcd.URL)[id]
	ownerID := etcdOwners(t, c.Etcd.URL)[id]
	var outsider string
	for _, n := range c.Nodes {
		if nid, _ := selfID(n.URL); !slices.Contains(h.Replicas, nid) {
			outsider = n.URL
		}
	}
	if outsider == "" {
		t.Fatalf("every member holds sona %s (%v)", id, h.Replicas)
	}

	// MCP is served statelessly: a tool call needs no session.
	rpc := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"insert","arguments":{"sona":"` + id + `","content":"written over MCP through a member that holds nothing"}}}`
	req, _ := http.NewRequest("POST", outsider+"/mcp", strings.NewReader(rpc))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var out struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Seq *int64 `json:"seq"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Result.IsError || out.Result.StructuredContent.Seq == nil || *out.Result.StructuredContent.Seq != 1 {
		t.Fatalf("MCP insert through %s: %d %s", outsider, resp.StatusCode, b)
	}
	if by := resp.Header.Get("X-Memoria-Member"); by != ownerID {
		t.Fatalf("the MCP call was served by %s, the owner is %s", by, ownerID)
	}
	mems, err := chain(outsider, id) // every block fetched from the others, verified
	if err != nil || len(mems) != 2 {
		t.Fatalf("the chain through %s: %v %v", outsider, mems, err)
	}

	status, exp, err := call("GET", outsider+"/export?sona="+id, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("export through %s: %d %v", outsider, status, err)
	}
	for _, m := range mems {
		c, _ := cid.Decode(m)
		if !bytes.Contains(exp, c.Bytes()) && !bytes.Contains(exp, []byte(m)) {
			t.Fatalf("the export through %s lacks memory %s", outsider, m)
		}
	}

	// The replica dies: the status names the sona under-replicated until
	// its next write.
	var replica *clusterproc.Proc
	for _, n := range c.Nodes {
		if nid, _ := selfID(n.URL); nid != ownerID && slices.Contains(h.Replicas, nid) {
			replica = n
		}
	}
	replica.Kill()
	cli := func() string {
		out, err := exec.Command(bin, "cluster", "status", "--server", c.Nodes[0].URL).CombinedOutput()
		if err != nil {
			t.Fatalf("memoria cluster status: %v\n%s", err, out)
		}
		return string(out)
	}
	eventually(t, 15*time.Second, "the status names the sona under-replicated", func() (bool, string) {
		out := cli()
		return strings.Contains(out, "under-replicated") && strings.Contains(out, id), out
	})
	if _, status, body, err := insert(outsider, id, "written after its replica died"); err != nil || status != http.StatusCreated {
		t.Fatalf("insert: %d %s %v", status, body, err)
	}
	if out := cli(); strings.Contains(out, id) || !strings.Contains(out, "1 sonas, 0 held by fewer than 2") {
		t.Fatalf("after a write the sona is still under-replicated:\n%s", out)
	}
}
