package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestLyingMemberCaught: a member's relayed answers are checked against
// the CIDs they name. Two members, R = 1; a sona created through the
// first holds a memory only there. A fake member — an HTTP server in this
// test, registered in etcd beside them — serves that memory's JSON and
// answers for the sona as its owner. Once the first member has left, the
// second relays the fake's honest answers (GET /memory/{cid}, GET
// /file/{cid}, a recall forwarded to the sona's owner) as they are, and
// refuses its altered ones: a read by CID is answered 404 (no member has
// it), a forwarded recall 500 `corrupt`, and both are logged.
func TestLyingMemberCaught(t *testing.T) {
	c, logs := startCluster(t, 2, 1)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	sona := createSona(t, n1.URL, "lied-about")
	const text = "the lighthouse door is green"
	a, status, body, err := insert(n1.URL, sona, text)
	if err != nil || status != http.StatusCreated {
		t.Fatalf("insert: %d %s %v", status, body, err)
	}
	status, honest, err := local("GET", n1.URL+"/memory/"+a.cid, "")
	if err != nil || status != http.StatusOK || !bytes.Contains(honest, []byte(text)) {
		t.Fatalf("GET /memory/%s on %s: %d %s %v", a.cid, n1.Name, status, honest, err)
	}

	const file = "the blueprint of the green lighthouse door"
	resp, err := hc.Post(n1.URL+"/files?sona="+sona, "application/octet-stream", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		CID string `json:"cid"`
	}
	err = json.NewDecoder(resp.Body).Decode(&stored)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /files: %d %v", resp.StatusCode, err)
	}
	var fileBytes atomic.Pointer[string]
	fileBytes.Store(new(file))

	var memJSON atomic.Pointer[[]byte]
	memJSON.Store(&honest)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := *memJSON.Load()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/memory/"+a.cid:
			w.Write(m)
		case r.Method == http.MethodGet && r.URL.Path == "/file/"+stored.CID:
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte(*fileBytes.Load()))
		case r.Method == http.MethodPost && r.URL.Path == "/sona/"+sona+"/recall":
			w.Write([]byte(`{"memories":[{"cid":"` + a.cid + `","score":1,"via":"hit","rank":1,"memory":` + string(m) + `}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no"}}`))
		}
	}))
	defer fake.Close()

	if err := n1.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Etcd.URL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, _ := json.Marshal(map[string]any{"id": "fake", "url": fake.URL, "peer": fake.URL, "started": time.Now().UnixMilli(), "version": "fake"})
	if _, err := cl.Put(ctx, "/memoria/members/fake", string(rec)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, "/memoria/sona/"+sona+"/owner", "fake"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, n2.Name+" sees the fake member alone", func() (bool, string) {
		ids, _ := memberIDs(n2.URL)
		return len(ids) == 2 && strings.Contains(strings.Join(ids, ","), "fake"), strings.Join(ids, ",")
	})

	recallThrough := func() (int, []byte) {
		status, b, _, err := authCall("POST", n2.URL+"/sona/"+sona+"/recall", "", map[string]any{"query": "lighthouse door", "scope": "sona"})
		if err != nil {
			t.Fatal(err)
		}
		return status, b
	}
	// Honest: relayed.
	if status, b, err := call("GET", n2.URL+"/memory/"+a.cid, nil); err != nil || status != http.StatusOK || !bytes.Contains(b, []byte(text)) {
		t.Fatalf("GET /memory/%s through %s, the fake honest: %d %s %v", a.cid, n2.Name, status, b, err)
	}
	if status, b := recallThrough(); status != http.StatusOK || !bytes.Contains(b, []byte(text)) {
		t.Fatalf("a recall forwarded to the fake owner, honest: %d %s", status, b)
	}
	if status, b, err := call("GET", n2.URL+"/file/"+stored.CID, nil); err != nil || status != http.StatusOK || string(b) != file {
		t.Fatalf("GET /file/%s through %s, the fake honest: %d %q %v", stored.CID, n2.Name, status, b, err)
	}

	// Lying: refused.
	lie := bytes.Replace(honest, []byte("green"), []byte("red"), 1)
	memJSON.Store(&lie)
	if status, b, err := call("GET", n2.URL+"/memory/"+a.cid, nil); err != nil || status != http.StatusNotFound || bytes.Contains(b, []byte("red")) {
		t.Fatalf("GET /memory/%s through %s, the fake lying: %d %s %v, want 404", a.cid, n2.Name, status, b, err)
	}
	fileBytes.Store(new(strings.Replace(file, "green", "red", 1)))
	if status, b, err := call("GET", n2.URL+"/file/"+stored.CID, nil); err != nil || status != http.StatusNotFound || bytes.Contains(b, []byte("red")) {
		t.Fatalf("GET /file/%s through %s, the fake lying: %d %q %v, want 404", stored.CID, n2.Name, status, b, err)
	}
	if status, b := recallThrough(); status != http.StatusInternalServerError || !jsonCode(b, "corrupt") || bytes.Contains(b, []byte("door is red")) {
		t.Fatalf("a recall forwarded to the fake owner, lying: %d %s, want 500 corrupt", status, b)
	}
	for _, s := range []string{"a member answered content that does not verify", "a member's answer does not verify"} {
		// The member's log reaches the test through a pipe, a little later.
		eventually(t, 10*time.Second, n2.Name+" logs "+s, func() (bool, string) { return logs.contains(n2.Name, s), "" })
	}
}
