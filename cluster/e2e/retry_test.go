package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/model"
)

// TestRetriedWritesAppendOnce: writes carry request ids; the owner of
// every sona is killed mid-write, and each client sends a write that got
// no answer (or a 503) again, with the same id, through the next member,
// until it is acknowledged. Each attempt stamps its own timestamp, so an
// attempt appended again would be another memory. Every request is then
// in its sona's chain exactly once, at the seq its acknowledgement named;
// writes forwarded by the other members to the killed owner were sent
// again to the new owner by the forwarding member; and every request the
// killed owner acknowledged, sent again to the new owners, is answered
// as it was then (replayed), not appended.
func TestRetriedWritesAppendOnce(t *testing.T) {
	c, _ := startCluster(t, 3, 2)
	owner := c.Nodes[0]
	sonas := sonasOn(t, owner, "idem", 9)
	client := &http.Client{Timeout: 20 * time.Second}
	type answer struct {
		seq      int64
		cid      string
		replayed bool
	}
	var (
		mu       sync.Mutex
		acks     = map[string]answer{} // by request id
		texts    = map[string]string{} // request id by text
		attempts = map[string]int{}
		okAt     = map[string][]time.Time{}
		bad      []string
	)
	// write sends request id until acknowledged (or the test's deadline).
	write := func(i, n int, sona string) {
		id := fmt.Sprintf("sona%d-write%d", i, n)
		text := fmt.Sprintf("write %d to sona %d", n, i)
		deadline := time.Now().Add(30 * time.Second)
		for attempt := 0; time.Now().Before(deadline); attempt++ {
			node := c.Nodes[(i+n+attempt)%3]
			if !node.Running() {
				continue
			}
			b, _ := json.Marshal(map[string]any{"sona": sona, "dedup": false, "request_id": id,
				"timestamp": 1_700_000_000 + attempt, "data": map[string]string{"kind": "text", "content": text}})
			resp, err := client.Post(node.URL+"/memories", "application/json", bytes.NewReader(b))
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			mu.Lock()
			attempts[id]++
			mu.Unlock()
			if err != nil || resp.StatusCode == http.StatusServiceUnavailable {
				time.Sleep(50 * time.Millisecond) // a client's retry pause
				continue
			}
			var r struct {
				CID      string `json:"cid"`
				Seq      *int64 `json:"seq"`
				Replayed bool   `json:"replayed"`
			}
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.Seq == nil {
				bad = append(bad, fmt.Sprintf("%s via %s: %d %s", id, node.Name, resp.StatusCode, body))
				return
			}
			acks[id], texts[text] = answer{*r.Seq, r.CID, r.Replayed}, id
			okAt[sona] = append(okAt[sona], time.Now())
			return
		}
		mu.Lock()
		bad = append(bad, id+": not acknowledged within 30 s")
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range sonas {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				write(i, n, s)
			}
		})
	}
	written := func(k int, since time.Time) func() (bool, string) {
		return func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range sonas {
				n := 0
				for _, at := range okAt[s] {
					if at.After(since) {
						n++
					}
				}
				if n < k {
					return false, s
				}
			}
			return true, ""
		}
	}
	eventually(t, 30*time.Second, "every sona written twice", written(2, time.Time{}))
	owner.Kill()
	killed := time.Now()
	mu.Lock()
	before := map[string]answer{}
	for id, a := range acks {
		before[id] = a
	}
	mu.Unlock()
	eventually(t, 30*time.Second, "every sona written 3 times after the kill", written(3, killed))
	close(stop)
	wg.Wait()
	// The requests the killed owner acknowledged, sent again (another
	// moment, so another memory were they appended again) to the new
	// owners: answered from the chain, nothing appended.
	for id, a := range before {
		var i, n int
		fmt.Sscanf(id, "sona%d-write%d", &i, &n)
		status, b, err := call("POST", c.Nodes[1+i%2].URL+"/memories", map[string]any{"sona": sonas[i], "dedup": false, "request_id": id,
			"timestamp": 1_600_000_000, "data": map[string]string{"kind": "text", "content": fmt.Sprintf("write %d to sona %d", n, i)}})
		var r struct {
			CID      string `json:"cid"`
			Seq      *int64 `json:"seq"`
			Replayed bool   `json:"replayed"`
		}
		if err != nil || status != http.StatusCreated || json.Unmarshal(b, &r) != nil || r.Seq == nil || !r.Replayed || *r.Seq != a.seq || r.CID != a.cid {
			t.Fatalf("request %s (seq %d, %s) sent again after the failover: %d %s %v", id, a.seq, a.cid, status, b, err)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d writes failed, e.g. %s", len(bad), bad[0])
	}
	retried, replayed := 0, 0
	for id, n := range attempts {
		if n > 1 {
			retried++
		}
		if acks[id].replayed {
			replayed++
		}
	}
	t.Logf("%d requests acknowledged, %d sent more than once by their client, %d answered from an earlier attempt", len(acks), retried, replayed)
	for _, s := range sonas {
		mems, err := chain(c.Nodes[1].URL, s)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int64{}
		for seq, m := range mems {
			text, err := memoryText(c.Nodes[2].URL, m)
			if err != nil {
				t.Fatal(err)
			}
			if prev, ok := seen[text]; ok {
				t.Fatalf("sona %s: %q is at seq %d and %d (request %s appended twice)", s, text, prev, seq, texts[text])
			}
			seen[text] = int64(seq)
			if id, ok := texts[text]; ok && (acks[id].seq != int64(seq) || acks[id].cid != m) {
				t.Fatalf("sona %s: request %s was acknowledged as seq %d %s, the chain has it at seq %d %s", s, id, acks[id].seq, acks[id].cid, seq, m)
			}
		}
		for text, id := range texts {
			if _, ok := seen[text]; !ok && sonaOfRequest(id, sonas) == s {
				t.Fatalf("acknowledged request %s is not in sona %s", id, s)
			}
		}
	}
}

// sonaOfRequest is the sona a request id of TestRetriedWritesAppendOnce
// wrote to.
func sonaOfRequest(id string, sonas []string) string {
	var i, n int
	fmt.Sscanf(id, "sona%d-write%d", &i, &n)
	return sonas[i]
}

// memoryText fetches a text memory through url's gateway (verified) and
// returns its text.
func memoryText(url, c string) (string, error) {
	id, err := cid.Decode(c)
	if err != nil {
		return "", err
	}
	b, err := block(url, id)
	if err != nil {
		return "", err
	}
	m, err := model.DecodeMemory(b)
	if err != nil {
		return "", err
	}
	return m.Text(), nil
}
