package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/cluster"
	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// TestDreamTendedOnce: a dream's insights (like the heartbeat's merges)
// are written for each sona by the one member that tends it — its owner,
// or, when it has none, the first live member by rendezvous of those its
// head names — and replicated like any append; a replica's dream writes
// nothing to it and takes no sona over. Six sonas, three members, R = 2,
// their actors passivated (no owner). Dream mode is forced on every
// member in turn, first on one that holds a sona it does not tend: each
// sona's insights come from its tending member alone, once, and are
// replicated (the head names two members).
func TestDreamTendedOnce(t *testing.T) {
	c, _ := startCluster(t, 3, 2, "MEMORIA_ACTORS_SONA_IDLE=2s", "MEMORIA_HEARTBEAT_INTERVAL=1h", "MEMORIA_HEARTBEAT_DREAM_IDLE=24h")
	var sonas []string
	for i := range 6 {
		n := c.Nodes[i%3]
		s := createSona(t, n.URL, fmt.Sprintf("dreamer-%d", i))
		sonas = append(sonas, s)
		for j := range 4 {
			if _, status, body, err := insert(n.URL, s, fmt.Sprintf("the keeper %d checks the lighthouse lamp at night, round %d", i, j)); err != nil || status != http.StatusCreated {
				t.Fatalf("insert into %s: %d %s %v", s, status, body, err)
			}
		}
	}
	eventually(t, 30*time.Second, "every sona's owner key is released (passivated)", func() (bool, string) {
		owners := etcdOwners(t, c.Etcd.URL)
		return len(owners) == 0, fmt.Sprint(owners)
	})
	heads := etcdHeads(t, c.Etcd.URL)
	tender := map[string]string{} // sona → member id
	holders := map[string][]string{}
	for _, s := range sonas {
		tender[s] = cluster.Rank(s, heads[s].Replicas)[0]
		holders[s] = heads[s].Replicas
	}
	// First the member that holds the most sonas it does not tend.
	order := slices.Clone(c.Nodes)
	untended := func(id string) int {
		n := 0
		for _, s := range sonas {
			if slices.Contains(holders[s], id) && tender[s] != id {
				n++
			}
		}
		return n
	}
	ids := map[string]string{} // node name → member id
	for _, n := range c.Nodes {
		id, err := selfID(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		ids[n.Name] = id
	}
	slices.SortFunc(order, func(a, b *clusterproc.Proc) int { return untended(ids[b.Name]) - untended(ids[a.Name]) })
	if untended(ids[order[0].Name]) == 0 {
		t.Fatal("no member holds a sona it does not tend: the test proves nothing")
	}

	wrote := map[string][]string{} // sona → members that wrote insights to it
	insights := map[string]int{}
	for _, n := range order {
		status, b, err := call("POST", n.URL+"/admin/heartbeat?dream=1", nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("dream on %s: %d %s %v", n.Name, status, b, err)
		}
		var rep struct {
			Dreamed  bool `json:"dreamed"`
			Insights []struct {
				Sona string `json:"sona"`
			} `json:"insights"`
		}
		if err := json.Unmarshal(b, &rep); err != nil || !rep.Dreamed {
			t.Fatalf("dream on %s: %s %v", n.Name, b, err)
		}
		seen := map[string]bool{}
		for _, in := range rep.Insights {
			insights[in.Sona]++
			if !seen[in.Sona] {
				seen[in.Sona] = true
				wrote[in.Sona] = append(wrote[in.Sona], ids[n.Name])
			}
		}
		t.Logf("dream on %s (%s): insights %v", n.Name, ids[n.Name], seen)
	}
	for _, s := range sonas {
		if len(wrote[s]) != 1 || wrote[s][0] != tender[s] {
			t.Errorf("sona %s (held by %v): insights written by %v, want by its tending member %s alone", s, holders[s], wrote[s], tender[s])
		}
		rec, status, err := getSona(c.Nodes[0].URL, s)
		if err != nil || status != http.StatusOK {
			t.Fatalf("sona %s: %d %v", s, status, err)
		}
		if want := int64(4 + insights[s]); rec.Length != want {
			t.Errorf("sona %s: chain of %d, want its 4 memories and %d insights", s, rec.Length, insights[s])
		}
		if h := etcdHeads(t, c.Etcd.URL)[s]; len(h.Replicas) != 2 {
			t.Errorf("sona %s: its head names %v, want 2 members", s, h.Replicas)
		}
	}
}
