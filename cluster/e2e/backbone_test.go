package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// TestBackboneOneChain: the backbone is one chain for the cluster (three
// members, R = 2). Its uuid is in etcd, the same for every member; writes
// through any member land on it, served by its one owner. The owner is
// paused past its lease while writes go on (another member takes the
// backbone over), then resumes: it steps down, and no member's copy of
// the chain is anything but a prefix of the acknowledged one (two members
// never both appended). Then the owner is killed with SIGKILL mid-write:
// writes go on through the survivors, and every acknowledged write — and
// a pending consensus contribution — is on the backbone they serve.
func TestBackboneOneChain(t *testing.T) {
	// At debug, a failure's logs say where a write waited (a flake once:
	// every writer's write hung 30 s while the owner was paused).
	c, logs := startCluster(t, 3, 2, "MEMORIA_LOG_LEVEL=debug")
	bb := etcdBackbone(t, c.Etcd.URL)
	if bb == "" {
		t.Fatal("no backbone in etcd")
	}
	// A concept two agents agree on commits; one only one agent offered
	// stays pending (and must survive the owner's death).
	for i, agent := range []string{"ann", "bob"} {
		status, b, _ := backboneCall("POST", c.Nodes[i].URL+"/backbone/contribute", map[string]string{
			"agent_id": agent, "concept_key": "lamp", "content": "the lighthouse lamp is lit at dusk"}, false)
		if status != http.StatusOK {
			t.Fatalf("contribute %s: %d %s", agent, status, b)
		}
		if want := []string{"pending", "committed"}[i]; !bytes.Contains(b, []byte(`"status":"`+want+`"`)) {
			t.Fatalf("contribution %d of lamp: %s, want %s", i+1, b, want)
		}
	}
	if status, b, _ := backboneCall("POST", c.Nodes[2].URL+"/backbone/contribute", map[string]string{
		"agent_id": "ann", "concept_key": "door", "content": "the lighthouse door is painted green"}, false); status != http.StatusOK || !bytes.Contains(b, []byte(`"pending"`)) {
		t.Fatalf("contribute door: %d %s", status, b)
	}

	w := startBackboneWriters(c, 3)
	defer w.halt()
	w.waitEach(t, 3, 30*time.Second, "every writer acknowledged 3 times")
	if served := w.servedBy(); len(served) != 1 {
		t.Fatalf("backbone writes were served by %v, want its one owner", served)
	}
	if bbs := etcdBackbone(t, c.Etcd.URL); bbs != bb {
		t.Fatalf("the backbone in etcd changed from %s to %s", bb, bbs)
	}

	// Fencing: the owner paused past its lease, then on again.
	ownerID := etcdOwners(t, c.Etcd.URL)[bb]
	owner := procOf(t, c, ownerID)
	w.skip(owner) // the writes sent to it when it stops wait for it
	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	inFlight := make(chan int, 1)
	go func() { // a write the paused owner takes when it continues
		status, _, _ := backboneCall("POST", owner.URL+"/backbone", map[string]string{"agent_id": "late", "content": "written to the paused owner"}, false)
		inFlight <- status
	}()
	w.waitAny(t, 2, 30*time.Second, "writes acknowledged while the owner is paused")
	for time.Since(paused) < 4*time.Second {
		w.waitAny(t, 1, 30*time.Second, "writes go on") // past its 2 s lease by a margin
	}
	if o := etcdOwners(t, c.Etcd.URL)[bb]; o == "" || o == ownerID {
		t.Fatalf("the backbone is owned by %q while its owner is paused", o)
	}
	if err := owner.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "the resumed owner says it was fenced", func() (bool, string) {
		return logs.contains(owner.Name, "fenced"), ""
	})
	t.Logf("the write the paused owner took answered %d", <-inFlight)
	w.pass(owner)
	w.waitEach(t, 2, 30*time.Second, "every writer acknowledged after the owner resumed")
	acked := w.ackedNow()
	ownerNow := procOf(t, c, etcdOwners(t, c.Etcd.URL)[bb])
	for _, n := range c.Nodes {
		assertPrefix(t, n, bb, acked, ownerNow.URL)
	}

	// The owner killed mid-write.
	victim := procOf(t, c, etcdOwners(t, c.Etcd.URL)[bb])
	victim.Kill()
	killed := time.Now()
	w.skip(victim)
	took := w.waitEach(t, 2, 30*time.Second, "every writer acknowledged twice after the owner was killed")
	t.Logf("killed the backbone's owner %s: every writer acknowledged twice within %s", victim.Name, took.Round(10*time.Millisecond))
	first := w.firstAfter(killed)
	t.Logf("failover of the backbone (kill → first acknowledged write): %s", first.Sub(killed).Round(10*time.Millisecond))
	w.halt()

	survivors := others(c, victim)
	acked = w.ackedNow()
	var mems []string
	for _, n := range survivors {
		got, err := chain(n.URL, bb)
		if err != nil {
			t.Fatalf("the backbone through %s: %v", n.Name, err)
		}
		if mems != nil && !slices.Equal(got, mems) {
			t.Fatalf("%s serves a backbone of %d, another member one of %d", n.Name, len(got), len(mems))
		}
		mems = got
		assertPrefix(t, n, bb, acked, n.URL)
	}
	for cid := range acked {
		if n := countOf(mems, cid); n != 1 {
			t.Fatalf("acknowledged backbone memory %s is %d times on the chain of %d", cid, n, len(mems))
		}
	}
	status, b, _ := backboneCall("GET", survivors[0].URL+"/backbone/pending", nil, false)
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"door"`)) || bytes.Contains(b, []byte(`"lamp"`)) {
		t.Fatalf("pending concepts after the owner died: %d %s, want door and not lamp", status, b)
	}
	status, b, _ = backboneCall("POST", survivors[1].URL+"/backbone/contribute", map[string]string{
		"agent_id": "bob", "concept_key": "door", "content": "the lighthouse door is painted green"}, false)
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"committed"`)) {
		t.Fatalf("the second agent's door after the owner died: %d %s, want committed", status, b)
	}
	t.Logf("%d acknowledged backbone writes on one chain of %d; refused attempts %v", len(acked), len(mems), w.refusedNow())
}

// assertPrefix checks member n's own copy of the backbone (its GET
// /backbone, served where it arrives) against the chain as ownerURL
// serves it then: a prefix of it, never a fork; and every acknowledged
// write is on that chain.
func assertPrefix(t *testing.T, n *clusterproc.Proc, bb string, acked map[string]bool, ownerURL string) {
	t.Helper()
	own, err := backboneList(n.URL, true) // first: the chain only grows
	if err != nil {
		t.Fatalf("%s's copy of the backbone: %v", n.Name, err)
	}
	// The writers go on: an append staged on n a moment ago is on the
	// owner's chain a moment later. The chain only grows, so a copy that
	// diverged never becomes its prefix, however long this waits.
	var full []string
	eventually(t, 10*time.Second, fmt.Sprintf("the chain through %s as long as %s's copy", ownerURL, n.Name), func() (bool, string) {
		if full, err = chain(ownerURL, bb); err != nil {
			t.Fatalf("the backbone through %s: %v", ownerURL, err)
		}
		return len(full) >= len(own), fmt.Sprintf("%d of %d", len(full), len(own))
	})
	if !slices.Equal(own, full[:len(own)]) {
		t.Fatalf("%s's copy of the backbone (%d) is not a prefix of the chain (%d)", n.Name, len(own), len(full))
	}
	for cid := range acked {
		if !slices.Contains(full, cid) {
			t.Fatalf("acknowledged backbone memory %s is not on the chain (%d)", cid, len(full))
		}
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// bhc bounds the backbone's calls; a write to a paused member waits for
// it.
var bhc = &http.Client{Timeout: 30 * time.Second}

// backboneCall makes one JSON call and returns the status, the body and
// the member that served it; local asks the member to serve it itself
// (as a forwarded request), not route it.
func backboneCall(method, url string, in any, local bool) (int, []byte, string) {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, []byte(err.Error()), ""
	}
	req.Header.Set("Content-Type", "application/json")
	if local {
		req.Header.Set("X-Memoria-Forwarded-By", "e2e")
	}
	resp, err := bhc.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header.Get("X-Memoria-Member")
}

// backboneList lists the backbone's memory CIDs through url, every page.
func backboneList(url string, local bool) ([]string, error) {
	var out []string
	cursor := ""
	for {
		status, b, _ := backboneCall("GET", url+"/backbone?limit=100&cursor="+cursor, nil, local)
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET /backbone: %d %s", status, b)
		}
		var page struct {
			Items []struct {
				CID string `json:"cid"`
			} `json:"items"`
			Next *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Items {
			out = append(out, m.CID)
		}
		if page.Next == nil {
			return out, nil
		}
		cursor = *page.Next
	}
}

// etcdBackbone is the backbone's sona uuid as etcd keeps it.
func etcdBackbone(t *testing.T, etcdURL string) string {
	t.Helper()
	kvs := etcdGet(t, etcdURL, "/memoria/backbone")
	if len(kvs) != 1 {
		return ""
	}
	var info struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(kvs[0].Value, &info); err != nil {
		t.Fatal(err)
	}
	return info.UUID
}

// backboneWriters write to the backbone concurrently, each write through
// the next live member in turn; a write that is refused or not answered
// is sent again, the same content (a backbone memory is its content: a
// second landing answers that it existed), through the next member.
type backboneWriters struct {
	c    *clusterproc.Cluster
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu      sync.Mutex
	dead    map[string]bool
	acked   map[string]bool     // CIDs acknowledged
	okAt    map[int][]time.Time // per writer
	served  map[string]bool     // members named by acknowledgements
	refused map[string]int      // statuses of refused attempts
	bad     []string
}

func startBackboneWriters(c *clusterproc.Cluster, n int) *backboneWriters {
	w := &backboneWriters{c: c, stop: make(chan struct{}), dead: map[string]bool{}, acked: map[string]bool{},
		okAt: map[int][]time.Time{}, served: map[string]bool{}, refused: map[string]int{}}
	for i := range n {
		w.wg.Add(1)
		go w.writer(i)
	}
	return w
}

func (w *backboneWriters) writer(i int) {
	defer w.wg.Done()
	turn := i
	for k := 0; ; {
		select {
		case <-w.stop:
			return
		default:
		}
		node := w.c.Nodes[turn%len(w.c.Nodes)]
		turn++
		w.mu.Lock()
		skip := w.dead[node.Name]
		w.mu.Unlock()
		if skip {
			continue
		}
		status, b, by := backboneCall("POST", node.URL+"/backbone", map[string]string{
			"agent_id": fmt.Sprintf("writer-%d", i), "content": fmt.Sprintf("backbone fact %d of writer %d", k, i)}, false)
		w.mu.Lock()
		switch {
		case status == http.StatusCreated || status == http.StatusOK:
			var r struct {
				CID string `json:"cid"`
			}
			if err := json.Unmarshal(b, &r); err != nil || r.CID == "" {
				w.bad = append(w.bad, fmt.Sprintf("%d %s", status, b))
			}
			w.acked[r.CID] = true
			w.okAt[i] = append(w.okAt[i], time.Now())
			w.served[by] = true
			k++
		case status == 0:
			w.refused["no answer"]++
		case status == http.StatusServiceUnavailable:
			w.refused["503"]++
		default:
			w.refused[fmt.Sprint(status)]++
			w.bad = append(w.bad, fmt.Sprintf("via %s: %d %s", node.Name, status, b))
		}
		w.mu.Unlock()
		if status != http.StatusCreated && status != http.StatusOK {
			t := time.NewTimer(20 * time.Millisecond) // a client's retry pause
			select {
			case <-w.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// skip stops sending writes to p.
func (w *backboneWriters) skip(p *clusterproc.Proc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead[p.Name] = true
}

// pass sends writes to p again.
func (w *backboneWriters) pass(p *clusterproc.Proc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.dead, p.Name)
}

// waitAny waits until k writes were acknowledged from now.
func (w *backboneWriters) waitAny(t *testing.T, k int, within time.Duration, what string) {
	t.Helper()
	t0 := time.Now()
	eventually(t, within, what, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for _, ts := range w.okAt {
			for _, at := range ts {
				if at.After(t0) {
					n++
				}
			}
		}
		return n >= k, fmt.Sprintf("%d; refused %v", n, w.refused)
	})
}

func (w *backboneWriters) halt() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// waitEach waits until every writer was acknowledged k times from now.
func (w *backboneWriters) waitEach(t *testing.T, k int, within time.Duration, what string) time.Duration {
	t.Helper()
	t0 := time.Now()
	return eventually(t, within, what, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.bad) > 0 {
			t.Fatalf("unexplained answers: %v", w.bad)
		}
		for i := range 3 {
			n := 0
			for _, at := range w.okAt[i] {
				if at.After(t0) {
					n++
				}
			}
			if n < k {
				return false, fmt.Sprintf("writer %d: %d; refused %v", i, n, w.refused)
			}
		}
		return true, ""
	})
}

// firstAfter is the first acknowledgement after t0.
func (w *backboneWriters) firstAfter(t0 time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, ts := range w.okAt {
		for _, at := range ts {
			if at.After(t0) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
	}
	return first
}

func (w *backboneWriters) servedBy() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(func(yield func(string) bool) {
		for m := range w.served {
			if !yield(m) {
				return
			}
		}
	})
}

func (w *backboneWriters) ackedNow() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool, len(w.acked))
	for c := range w.acked {
		out[c] = true
	}
	return out
}

func (w *backboneWriters) refusedNow() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.refused {
		out[k] = v
	}
	return out
}
