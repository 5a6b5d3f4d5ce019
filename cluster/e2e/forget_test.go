package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
	"github.com/memoria-ai/memoria/memory/model"
)

// local calls url on the member itself: the forwarded header makes it
// serve the request from its own store instead of routing it.
func local(method, url, accept string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Memoria-Forwarded-By", "e2e")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// TestForgetEverywhere: a forget taken by a member that holds nothing of
// the sona excises its memories on the owner; the replica is down during
// the forget, and when it comes back it forgets them too before it
// serves (its applied copy of one marker and its staged copy of the
// other); after the owner dies, the replica owns the sona, and the third
// member, catching up from it, gets the forgotten entries as tombstones.
// No member ever answers a marker again, and the chain stays whole.
func TestForgetEverywhere(t *testing.T) {
	c, logs := startCluster(t, 3, 2)
	n1 := c.Nodes[0]
	id := createSona(t, n1.URL, "forgetful")
	tag := fmt.Sprintf("zq%dxv", time.Now().UnixNano())
	texts := []string{"kept before", "secret one " + tag, "kept between", "secret two " + tag}
	var cids []string
	for _, text := range texts {
		a, status, body, err := insert(n1.URL, id, text)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("insert %q: %d %s %v", text, status, body, err)
		}
		cids = append(cids, a.cid)
	}
	markers := []string{cids[1], cids[3]} // the replica holds the first in its chain, the second staged
	h := etcdHeads(t, c.Etcd.URL)[id]
	ownerID := etcdOwners(t, c.Etcd.URL)[id]
	owner := procOf(t, c, ownerID)
	var replica, third *clusterproc.Proc
	for _, n := range c.Nodes {
		nid, _ := selfID(n.URL)
		switch {
		case nid == ownerID:
		case slices.Contains(h.Replicas, nid):
			replica = n
		default:
			third = n
		}
	}
	if replica == nil || third == nil {
		t.Fatalf("head %v, owner %s: want one replica and one member holding nothing", h, ownerID)
	}

	replica.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.WaitMembers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// A dry run through the member that holds nothing of the sona plans on
	// the owner and forgets nothing; a CID no member holds is refused.
	status, b, err := call("POST", third.URL+"/forget", map[string]any{"cids": markers, "dry_run": true})
	if err != nil || status != http.StatusOK || !bytes.Contains(b, []byte(`"memories":2`)) || !bytes.Contains(b, []byte(`"batches":0`)) {
		t.Fatalf("a dry run through %s: %d %s %v", third.Name, status, b, err)
	}
	if st, body, err := local("GET", owner.URL+"/memory/"+markers[0], ""); err != nil || st != http.StatusOK {
		t.Fatalf("after a dry run the owner answers %d %s %v", st, body, err)
	}
	h0, _ := cid.Decode(h.CID) // an ACT: kept, not forgettable, stored on the owner
	nowhere, _ := model.SumCID(model.CodecDagCBOR, []byte("stored nowhere"))
	for _, c := range []cid.Cid{h0, nowhere} {
		if st, body, err := call("POST", third.URL+"/forget", map[string]any{"cids": []string{c.String()}}); err != nil || st != http.StatusNotFound {
			t.Fatalf("forgetting %s: %d %s %v, want 404", c, st, body, err)
		}
	}
	// The forget, through the member that holds nothing of the sona.
	status, b, err = call("POST", third.URL+"/forget", map[string]any{"cids": markers, "reason": "e2e"})
	if err != nil || status != http.StatusOK {
		t.Fatalf("POST /forget through %s: %d %s %v", third.Name, status, b, err)
	}
	if !bytes.Contains(b, []byte(`"memories":2`)) && !bytes.Contains(b, []byte(`"memories":"2"`)) {
		t.Fatalf("the forget's answer: %s", b)
	}
	gone := func(p *clusterproc.Proc) {
		t.Helper()
		for _, m := range markers {
			for _, path := range []string{"/memory/" + m, "/ipfs/" + m + "?format=raw"} {
				st, body, err := local("GET", p.URL+path, "")
				if err != nil || st != http.StatusGone || !jsonCode(body, "forgotten") {
					t.Fatalf("GET %s on %s itself: %d %s %v, want 410 forgotten", path, p.Name, st, body, err)
				}
				if st, body, err := call("GET", p.URL+path, nil); err != nil || st != http.StatusGone {
					t.Fatalf("GET %s through %s: %d %s %v, want 410", path, p.Name, st, body, err)
				}
			}
		}
		st, body, err := local("GET", p.URL+"/forgotten", "")
		if err != nil || st != http.StatusOK || !strings.Contains(string(body), markers[0]) || !strings.Contains(string(body), markers[1]) {
			t.Fatalf("GET /forgotten on %s: %d %s %v", p.Name, st, body, err)
		}
	}
	gone(owner)
	gone(third)

	// The replica comes back: it copies the tombstones before it serves.
	if err := replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	gone(replica)
	if !logs.contains(replica.Name, "forgot what other members forgot") {
		t.Fatalf("%s did not log that it copied the tombstones", replica.Name)
	}
	for _, m := range []string{cids[0], cids[2]} { // kept, and still there
		if st, body, err := local("GET", replica.URL+"/memory/"+m, ""); err != nil || st != http.StatusOK {
			t.Fatalf("a kept memory on %s: %d %s %v", replica.Name, st, body, err)
		}
	}

	// The owner dies: the replica takes the sona over (its staged copy of
	// the second marker enters its chain as a forgotten entry), and the
	// next write has the third member catch up from it.
	owner.Kill()
	var last acked
	eventually(t, 30*time.Second, "a write after the owner died", func() (bool, string) {
		a, st, body, err := insert(third.URL, id, "written after the forget")
		last = a
		return err == nil && st == http.StatusCreated, fmt.Sprint(st, body, err)
	})
	if last.seq != int64(len(texts)) {
		t.Fatalf("the write after the forget is at seq %d, want %d", last.seq, len(texts))
	}
	for _, p := range []*clusterproc.Proc{replica, third} {
		gone(p)
		// The chain: whole, linear, every remaining block verified; the
		// markers keep their places.
		mems, err := chainSkipping(p.URL, id, markers)
		if err != nil {
			t.Fatalf("the chain through %s: %v", p.Name, err)
		}
		if want := append(slices.Clone(cids), last.cid); !slices.Equal(mems, want) {
			t.Fatalf("the chain through %s: %v, want %v", p.Name, mems, want)
		}
	}
	rec, status, err := getSona(third.URL, id)
	if err != nil || status != http.StatusOK || rec.Length != int64(len(texts))+1 {
		t.Fatalf("the sona through %s: %+v %d %v", third.Name, rec, status, err)
	}
	// Recall through every member finds the kept memories, never a marker.
	for _, p := range []*clusterproc.Proc{replica, third} {
		st, body, err := call("POST", p.URL+"/sona/"+id+"/recall", map[string]any{"query": "secret " + tag, "k": 10})
		if err != nil || st != http.StatusOK {
			t.Fatalf("recall through %s: %d %s %v", p.Name, st, body, err)
		}
		if bytes.Contains(body, []byte(tag)) {
			t.Fatalf("recall through %s returns a forgotten marker: %s", p.Name, body)
		}
		st, body, err = call("GET", p.URL+"/export?sona="+id, nil)
		if err != nil || st != http.StatusOK || bytes.Contains(body, []byte(tag)) || !bytes.Contains(body, []byte(markers[1])) {
			t.Fatalf("export through %s: %d %v (marker in it: %v)", p.Name, st, err, bytes.Contains(body, []byte(tag)))
		}
	}
}
