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
	tend := tending(t, c, sonas)
	tender, holders, ids, order := tend.tender, tend.holders, tend.ids, tend.order

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

// tendings are the members that tend sonas (whose actors passivated:
// no owner): by sona, the first live member by rendezvous of those its
// head names.
type tendings struct {
	tender  map[string]string   // sona → member id
	holders map[string][]string // sona → the members its head names
	ids     map[string]string   // node name → member id
	// order is the members, first the one that holds the most sonas it
	// does not tend (the test fails unless one holds some).
	order []*clusterproc.Proc
}

func tending(t *testing.T, c *clusterproc.Cluster, sonas []string) tendings {
	t.Helper()
	heads := etcdHeads(t, c.Etcd.URL)
	td := tendings{tender: map[string]string{}, holders: map[string][]string{}, ids: map[string]string{}, order: slices.Clone(c.Nodes)}
	for _, s := range sonas {
		td.tender[s] = cluster.Rank(s, heads[s].Replicas)[0]
		td.holders[s] = heads[s].Replicas
	}
	untended := func(id string) int {
		n := 0
		for _, s := range sonas {
			if slices.Contains(td.holders[s], id) && td.tender[s] != id {
				n++
			}
		}
		return n
	}
	for _, n := range c.Nodes {
		id, err := selfID(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		td.ids[n.Name] = id
	}
	slices.SortFunc(td.order, func(a, b *clusterproc.Proc) int { return untended(td.ids[b.Name]) - untended(td.ids[a.Name]) })
	if untended(td.ids[td.order[0].Name]) == 0 {
		t.Fatal("no member holds a sona it does not tend: the test proves nothing")
	}
	return td
}

// TestMergesTendedOnce: the heartbeat's merges (Living Memory's
// compression of oversized branches) are written for each sona by the
// one member that tends it, like a dream's insights. Six sonas over three
// members, R = 2, their actors passivated; half of them large, with the
// compression trigger lowered by configuration (living.phi 1.01,
// living.min_compress_nodes 2) so that each member's first tick finds
// oversized branches among the sonas it holds. A tick is run on every
// member in turn, first on one that holds sonas it does not tend: each
// sona's merges come from its tending member alone, and are on its chain,
// replicated.
func TestMergesTendedOnce(t *testing.T) {
	c, _ := startCluster(t, 3, 2, "MEMORIA_ACTORS_SONA_IDLE=2s", "MEMORIA_HEARTBEAT_INTERVAL=1h", "MEMORIA_HEARTBEAT_DREAM_IDLE=24h",
		"MEMORIA_LIVING_PHI=1.01", "MEMORIA_LIVING_MIN_COMPRESS_NODES=2", "MEMORIA_HEARTBEAT_MAX_COMPRESSIONS=20")
	var sonas []string
	size := map[string]int{}
	for i := range 6 {
		n := c.Nodes[i%3]
		s := createSona(t, n.URL, fmt.Sprintf("branch-%d", i))
		sonas = append(sonas, s)
		size[s] = []int{8, 2}[i%2]
		for j := range size[s] {
			if _, status, body, err := insert(n.URL, s, fmt.Sprintf("keeper %d logs the tide at the pier, entry %d", i, j)); err != nil || status != http.StatusCreated {
				t.Fatalf("insert into %s: %d %s %v", s, status, body, err)
			}
		}
	}
	eventually(t, 30*time.Second, "every sona's owner key is released (passivated)", func() (bool, string) {
		owners := etcdOwners(t, c.Etcd.URL)
		return len(owners) == 0, fmt.Sprint(owners)
	})
	td := tending(t, c, sonas)
	wrote := map[string][]string{} // sona → members that merged it
	merges := map[string]int{}
	for _, n := range td.order {
		status, b, err := call("POST", n.URL+"/admin/heartbeat", nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("tick on %s: %d %s %v", n.Name, status, b, err)
		}
		var rep struct {
			PassComplete bool `json:"pass_complete"`
			Compressions []struct {
				Sona string `json:"sona"`
			} `json:"compressions"`
		}
		if err := json.Unmarshal(b, &rep); err != nil || !rep.PassComplete {
			t.Fatalf("tick on %s: %s %v", n.Name, b, err)
		}
		seen := map[string]bool{}
		for _, m := range rep.Compressions {
			merges[m.Sona]++
			if !seen[m.Sona] {
				seen[m.Sona] = true
				wrote[m.Sona] = append(wrote[m.Sona], td.ids[n.Name])
			}
		}
		t.Logf("tick on %s (%s): merged %v", n.Name, td.ids[n.Name], seen)
	}
	merged := 0
	for _, s := range sonas {
		if len(wrote[s]) > 1 || len(wrote[s]) == 1 && wrote[s][0] != td.tender[s] {
			t.Errorf("sona %s (held by %v): merged by %v, want by its tending member %s alone", s, td.holders[s], wrote[s], td.tender[s])
		}
		if merges[s] > 0 {
			merged++
		}
		mems, err := chain(c.Nodes[0].URL, s)
		if err != nil {
			t.Fatal(err)
		}
		if want := size[s] + merges[s]; len(mems) != want {
			t.Errorf("sona %s: chain of %d, want its %d memories and %d merges", s, len(mems), size[s], merges[s])
		}
		if h := etcdHeads(t, c.Etcd.URL)[s]; len(h.Replicas) != 2 {
			t.Errorf("sona %s: its head names %v, want 2 members", s, h.Replicas)
		}
	}
	if merged == 0 {
		t.Fatal("no sona was merged: the test proves nothing")
	}
}
