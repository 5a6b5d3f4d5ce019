package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// memberIDs is what url's GET /cluster lists, or the error as the state.
func memberIDs(url string) ([]string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ids, err := clusterproc.Members(ctx, url)
	if err != nil {
		return nil, err.Error()
	}
	slices.Sort(ids)
	return ids, fmt.Sprint(ids)
}

// TestMembership: three members see each other; one killed with SIGKILL
// leaves the others' member list once its lease expires; one stopped
// with SIGTERM leaves at once (its lease is revoked); a restarted member
// rejoins under the same id. Every process that was not killed exits 0 on
// SIGTERM (etcd included: startCluster's cleanup checks).
func TestMembership(t *testing.T) {
	c, _ := startCluster(t, 3, 2)
	ids, _ := memberIDs(c.Nodes[0].URL)
	if len(ids) != 3 {
		t.Fatalf("n1 sees %v", ids)
	}
	for _, n := range c.Nodes[1:] {
		if got, _ := memberIDs(n.URL); !slices.Equal(got, ids) {
			t.Fatalf("%s sees %v, n1 sees %v", n.Name, got, ids)
		}
	}
	c.Nodes[2].Kill()
	took := eventually(t, 15*time.Second, "n3 (killed) leaves n1's member list", func() (bool, string) {
		got, state := memberIDs(c.Nodes[0].URL)
		return len(got) == 2, state
	})
	t.Logf("a killed member left after %s (lease TTL 2s)", took.Round(10*time.Millisecond))
	if got, _ := memberIDs(c.Nodes[1].URL); len(got) != 2 {
		t.Fatalf("n2 still sees %v", got)
	}

	if err := c.Nodes[1].Stop(30 * time.Second); err != nil {
		t.Fatalf("n2 did not stop cleanly: %v", err)
	}
	took = eventually(t, 5*time.Second, "n2 (stopped) leaves n1's member list", func() (bool, string) {
		got, state := memberIDs(c.Nodes[0].URL)
		return len(got) == 1, state
	})
	t.Logf("a stopped member left after %s", took.Round(10*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Nodes[2].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "n3 (restarted) rejoins", func() (bool, string) {
		got, state := memberIDs(c.Nodes[0].URL)
		return len(got) == 2, state
	})
	got, _ := memberIDs(c.Nodes[2].URL)
	for _, id := range got {
		if !slices.Contains(ids, id) {
			t.Fatalf("the restarted member lists %s, not one of the first ids %v: its id changed", id, ids)
		}
	}
}
