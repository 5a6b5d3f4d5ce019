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
	sonas := passivatedSonas(t, c, []int{4, 4, 4, 4, 4, 4}, func(i, j int) string {
		return fmt.Sprintf("the keeper %d checks the lighthouse lamp at night, round %d", i, j)
	})
	td := tending(t, c, sonas)
	wrote, insights := tickAll(t, td, "/admin/heartbeat?dream=1", "dreamed", "insights")
	for _, s := range sonas {
		if len(wrote[s]) != 1 || wrote[s][0] != td.tender[s] {
			t.Errorf("sona %s (held by %v): insights written by %v, want by its tending member %s alone", s, td.holders[s], wrote[s], td.tender[s])
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

// passivatedSonas creates a sona for each of sizes through the members in
// turn, writes sizes[i] memories to sona i (text(i, j)), and waits until
// their actors passivated (no owner key left).
func passivatedSonas(t *testing.T, c *clusterproc.Cluster, sizes []int, text func(i, j int) string) []string {
	t.Helper()
	var sonas []string
	for i, size := range sizes {
		n := c.Nodes[i%len(c.Nodes)]
		s := createSona(t, n.URL, fmt.Sprintf("upkept-%d", i))
		sonas = append(sonas, s)
		for j := range size {
			if _, status, body, err := insert(n.URL, s, text(i, j)); err != nil || status != http.StatusCreated {
				t.Fatalf("insert into %s: %d %s %v", s, status, body, err)
			}
		}
	}
	eventually(t, 30*time.Second, "every sona's owner key is released (passivated)", func() (bool, string) {
		owners := etcdOwners(t, c.Etcd.URL)
		return len(owners) == 0, fmt.Sprint(owners)
	})
	return sonas
}

// tickAll runs a heartbeat (path) on every member in td's order; each
// report must say flag (dreamed, pass_complete). It returns, by sona, the
// members whose report lists it under field (insights, compressions),
// and how many times it is listed in all.
func tickAll(t *testing.T, td tendings, path, flag, field string) (wrote map[string][]string, count map[string]int) {
	t.Helper()
	wrote, count = map[string][]string{}, map[string]int{}
	for _, n := range td.order {
		status, b, err := call("POST", n.URL+path, nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s on %s: %d %s %v", path, n.Name, status, b, err)
		}
		var rep map[string]json.RawMessage
		var done bool
		var items []struct {
			Sona string `json:"sona"`
		}
		if err := json.Unmarshal(b, &rep); err != nil || json.Unmarshal(rep[flag], &done) != nil || !done {
			t.Fatalf("%s on %s: %s, want %s (%v)", path, n.Name, b, flag, err)
		}
		if rep[field] != nil {
			if err := json.Unmarshal(rep[field], &items); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		for _, it := range items {
			count[it.Sona]++
			if !seen[it.Sona] {
				seen[it.Sona] = true
				wrote[it.Sona] = append(wrote[it.Sona], td.ids[n.Name])
			}
		}
		t.Logf("%s on %s (%s): %s of %v", path, n.Name, td.ids[n.Name], field, seen)
	}
	return wrote, count
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
	sizes := []int{8, 2, 8, 2, 8, 2}
	sonas := passivatedSonas(t, c, sizes, func(i, j int) string {
		return fmt.Sprintf("keeper %d logs the tide at the pier, entry %d", i, j)
	})
	td := tending(t, c, sonas)
	wrote, merges := tickAll(t, td, "/admin/heartbeat", "pass_complete", "compressions")
	merged := 0
	for i, s := range sonas {
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
		if want := sizes[i] + merges[s]; len(mems) != want {
			t.Errorf("sona %s: chain of %d, want its %d memories and %d merges", s, len(mems), sizes[i], merges[s])
		}
		if h := etcdHeads(t, c.Etcd.URL)[s]; len(h.Replicas) != 2 {
			t.Errorf("sona %s: its head names %v, want 2 members", s, h.Replicas)
		}
	}
	if merged == 0 {
		t.Fatal("no sona was merged: the test proves nothing")
	}
}
