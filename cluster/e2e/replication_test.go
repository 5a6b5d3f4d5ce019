package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestWritesRoutedAndReplicated: with three members and R = 2, sonas
// created and written through every member end up with one linear chain
// each, which every member serves (routing to the owner), whose head in
// etcd names two members, each holding the acknowledged appends.
func TestWritesRoutedAndReplicated(t *testing.T) {
	c, _ := startCluster(t, 3, 2)
	const sonas, writes = 6, 5
	ids := make([]string, sonas)
	for i := range ids {
		ids[i] = createSona(t, c.Nodes[i%3].URL, fmt.Sprintf("s%d", i))
	}
	var mu sync.Mutex
	var all []acked
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range writes {
				url := c.Nodes[(i+j)%3].URL
				a, status, body, err := insert(url, id, fmt.Sprintf("memory %d of sona %d, written through %s", j, i, url))
				if err != nil || status != http.StatusCreated {
					t.Errorf("insert %d into %s through %s: %d %s %v", j, id, url, status, body, err)
					return
				}
				if a.seq != int64(j) {
					t.Errorf("insert %d into %s landed at seq %d", j, id, a.seq)
				}
				mu.Lock()
				all = append(all, a)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	heads := etcdHeads(t, c.Etcd.URL)
	for _, id := range ids {
		var first []string
		for _, n := range c.Nodes {
			mems, err := chain(n.URL, id)
			if err != nil {
				t.Fatalf("%s through %s: %v", id, n.Name, err)
			}
			if first == nil {
				first = mems
			} else if !slices.Equal(mems, first) {
				t.Fatalf("%s: %s serves another chain", id, n.Name)
			}
		}
		h := heads[id]
		if h.Seq != writes-1 || len(h.Replicas) != 2 || h.Replicas[0] == h.Replicas[1] {
			t.Fatalf("%s: head in etcd %+v, want seq %d held by 2 members", id, h, writes-1)
		}
	}
	// GET /cluster's census agrees.
	status, b, err := call("GET", c.Nodes[1].URL+"/cluster", nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /cluster: %d %v", status, err)
	}
	var st struct {
		Sonas           *int `json:"sonas"`
		UnderReplicated *int `json:"under_replicated"`
		Members         []struct{ Owned, Held int }
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	owned, held := 0, 0
	for _, m := range st.Members {
		owned, held = owned+m.Owned, held+m.Held
	}
	if st.Sonas == nil || *st.Sonas != sonas || *st.UnderReplicated != 0 || owned != sonas || held != 2*sonas {
		t.Fatalf("GET /cluster: %s", b)
	}
	for _, a := range all {
		mems, _ := chain(c.Nodes[0].URL, a.sona)
		if mems[a.seq] != a.cid {
			t.Fatalf("acknowledged %+v, the chain has %s at that seq", a, mems[a.seq])
		}
		if a.seq == writes-1 {
			continue // the last append is staged on its replica, appended at the next
		}
		holders := 0
		for _, n := range c.Nodes {
			if status, _, _ := call("GET", n.URL+"/memory/"+a.cid, nil); status == http.StatusOK {
				holders++
			}
		}
		if holders < 2 {
			t.Fatalf("%+v is held by %d members", a, holders)
		}
	}
}

// TestPassivationReleases: a sona whose actor is passivated (idle) gives
// its owner key up; the next write, through another member, claims it
// again and continues the same chain.
func TestPassivationReleases(t *testing.T) {
	c, _ := startCluster(t, 3, 2, "MEMORIA_ACTORS_SONA_IDLE=1s")
	id := createSona(t, c.Nodes[0].URL, "idle")
	var want []string
	for i := range 3 {
		a, status, body, err := insert(c.Nodes[i].URL, id, fmt.Sprintf("before %d", i))
		if err != nil || status != http.StatusCreated {
			t.Fatalf("insert: %d %s %v", status, body, err)
		}
		want = append(want, a.cid)
	}
	eventually(t, 20*time.Second, "the idle sona's owner key is released", func() (bool, string) {
		o := etcdOwners(t, c.Etcd.URL)[id]
		return o == "", o
	})
	a, status, body, err := insert(c.Nodes[2].URL, id, "after")
	if err != nil || status != http.StatusCreated || a.seq != 3 {
		t.Fatalf("insert after passivation: %d %s %v %+v", status, body, err, a)
	}
	want = append(want, a.cid)
	for _, n := range c.Nodes {
		mems, err := chain(n.URL, id)
		if err != nil || !slices.Equal(mems, want) {
			t.Fatalf("through %s: %v %v, want %v", n.Name, mems, err, want)
		}
	}
}
