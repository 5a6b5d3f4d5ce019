package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
	"github.com/memoria-ai/memoria/cluster/etcdembed"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/prompt"
)

// One member and an etcd in this process (one member: two would share
// gRPC's global state; the multi-member tests are in cluster/e2e).

func startEtcd(t *testing.T) string {
	t.Helper()
	addr, err := clusterproc.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	s, err := etcdembed.Start(etcdembed.Options{Dir: t.TempDir(), Listen: addr, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.ClientURL()
}

func startMember(t *testing.T, etcd string) *Cluster {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Evaluation.Mode = "off"
	cfg.Cluster.Etcd = etcd
	cfg.Cluster.Replicas = 1
	cfg.Cluster.LeaseTTL = config.Duration(time.Second)
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Options{Config: cfg, Self: self, URL: "http://127.0.0.1:1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		self.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		self.Close()
	})
	return c
}

func etcdClient(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// poll waits for cond under a deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval under a deadline
	}
}

// appendText plans an append of text on the member's copy of sona and
// carries it out through the member's ChainWriter.
func appendText(t *testing.T, c *Cluster, sona, text string) error {
	t.Helper()
	self := c.self
	vec, err := self.Embed(context.Background(), text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := self.Chains.Prepare(prompt.TextMemory(text, "", 1700000000, nil), vec[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := self.Sonas.Get(sona)
	if err != nil {
		t.Fatal(err)
	}
	var head *cid.Cid
	if rec.Head != nil {
		h, _ := cid.Decode(*rec.Head)
		head = &h
	}
	plan, err := model.PlanAppend(sona, head, rec.Length, p, 1700000000)
	if err != nil {
		t.Fatal(err)
	}
	w := c.chains.Write(context.Background(), plan)
	<-w.Done()
	return w.Err()
}

func headOf(t *testing.T, cl *clientv3.Client, sona string) Head {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cl.Get(ctx, "/memoria/sona/"+sona+"/head")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("head of %s: %v %d", sona, err, len(r.Kvs))
	}
	var h Head
	if err := json.Unmarshal(r.Kvs[0].Value, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestOwnerIsFencedByItsLease: a member owns a sona, writes move its head;
// when its lease is lost (revoked here, as when it expires) the member is
// fenced — its writes fail, nothing moves — until it claims the sona again
// under its new lease, and the chain goes on where the head was.
func TestOwnerIsFencedByItsLease(t *testing.T) {
	url := startEtcd(t)
	c := startMember(t, url)
	cl := etcdClient(t, url)
	fenced := make(chan struct{}, 1)
	c.node.OnFence(func() { fenced <- struct{}{} })

	rec, err := c.CreateSona(context.Background(), "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if h := headOf(t, cl, rec.Uuid); h.Seq != -1 || len(h.Replicas) != 1 {
		t.Fatalf("a new sona's head: %+v", h)
	}
	for i := range 3 {
		if err := appendText(t, c, rec.Uuid, "before "+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if h := headOf(t, cl, rec.Uuid); h.Seq != 2 {
		t.Fatalf("head after 3 appends: %+v", h)
	}

	lease, epoch := c.node.Lease()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Revoke(ctx, lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fenced:
	case <-time.After(15 * time.Second):
		t.Fatal("the member was not told it lost its lease")
	}
	if err := appendText(t, c, rec.Uuid, "after the lease was lost"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write after the lease was lost: %v, want ErrFenced", err)
	}
	if h := headOf(t, cl, rec.Uuid); h.Seq != 2 {
		t.Fatalf("the head moved while fenced: %+v", h)
	}
	if l := length(t, c.self, rec.Uuid); l != 3 {
		t.Fatalf("the fenced write entered the local chain: length %d", l)
	}
	poll(t, "the member joins again under a new lease", func() bool {
		l, e := c.node.Lease()
		_, member := c.node.Member(c.node.self.ID)
		return l != lease && e > epoch && member && c.node.Healthy()
	})
	fresh, err := c.chains.Acquire(context.Background(), rec.Uuid)
	if err != nil || !fresh {
		t.Fatalf("claim again: %v %v", fresh, err)
	}
	if err := appendText(t, c, rec.Uuid, "after claiming again"); err != nil {
		t.Fatal(err)
	}
	if h := headOf(t, cl, rec.Uuid); h.Seq != 3 {
		t.Fatalf("head after claiming again: %+v", h)
	}
}

// TestAnotherOwnerFencesTheHead: when the owner key changes hands behind a
// member's back (its claim taken over), its next head move fails its
// compare: not acknowledged, not appended locally.
func TestAnotherOwnerFencesTheHead(t *testing.T) {
	url := startEtcd(t)
	c := startMember(t, url)
	cl := etcdClient(t, url)
	rec, err := c.CreateSona(context.Background(), "bob", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := appendText(t, c, rec.Uuid, "mine"); err != nil {
		t.Fatal(err)
	}
	// Another member's claim: the key deleted and taken again.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := "/memoria/sona/" + rec.Uuid + "/owner"
	if _, err := cl.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, key, "someone-else"); err != nil {
		t.Fatal(err)
	}
	if err := appendText(t, c, rec.Uuid, "not mine any more"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a write after the claim changed hands: %v, want ErrFenced", err)
	}
	if h := headOf(t, cl, rec.Uuid); h.Seq != 0 {
		t.Fatalf("the head moved: %+v", h)
	}
	if l := length(t, c.self, rec.Uuid); l != 1 {
		t.Fatalf("the fenced write entered the local chain: length %d", l)
	}
	if _, err := c.chains.Acquire(context.Background(), rec.Uuid); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("claiming a sona another member owns: %v, want ErrNotOwner", err)
	}
}

// TestMoverBatches: head moves queued together go to etcd in one
// transaction (one revision); when one compare fails, only that move
// fails.
func TestMoverBatches(t *testing.T) {
	url := startEtcd(t)
	c := startMember(t, url)
	cl := etcdClient(t, url)
	ctx := context.Background()
	var sonas []string
	for i := range 20 {
		rec, err := c.CreateSona(ctx, "m"+string(rune('a'+i)), true)
		if err != nil {
			t.Fatal(err)
		}
		sonas = append(sonas, rec.Uuid)
	}
	request := func(stale string) []*moveReq {
		var reqs []*moveReq
		for _, s := range sonas {
			ch := c.chains.get(s)
			ch.mu.Lock()
			claim, rev, head := ch.claim, ch.headRev, ch.head
			ch.mu.Unlock()
			if s == stale {
				rev-- // not the head this member moved last
			}
			head.Seq++
			v, _ := json.Marshal(head)
			reqs = append(reqs, &moveReq{sona: s, claim: claim, headRev: rev, value: string(v), result: make(chan moveResult, 1)})
		}
		return reqs
	}
	revision := func() int64 {
		r, err := cl.Get(ctx, "any")
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	run := func(reqs []*moveReq) (revs map[string]int64, errs map[string]error, txns int64) {
		m := &mover{n: c.node, reqs: make(chan *moveReq, 1024), done: make(chan struct{})}
		for _, r := range reqs {
			m.reqs <- r // queued before the mover runs: one batch
		}
		before := revision()
		go m.loop()
		revs, errs = map[string]int64{}, map[string]error{}
		for _, r := range reqs {
			res := <-r.result
			revs[r.sona], errs[r.sona] = res.rev, res.err
		}
		m.close()
		return revs, errs, revision() - before
	}
	revs, errs, txns := run(request(""))
	for _, s := range sonas {
		if errs[s] != nil {
			t.Fatalf("move of %s: %v", s, errs[s])
		}
		ch := c.chains.get(s)
		ch.mu.Lock()
		ch.headRev, ch.head.Seq = revs[s], ch.head.Seq+1
		ch.mu.Unlock()
	}
	if txns != 1 {
		t.Fatalf("20 head moves took %d etcd revisions, want 1 transaction", txns)
	}
	_, errs, _ = run(request(sonas[7]))
	for i, s := range sonas {
		if got := errs[s]; (i == 7) != errors.Is(got, ErrFenced) || i != 7 && got != nil {
			t.Fatalf("move %d of the batch with a stale seventh: %v", i, got)
		}
	}
}

// TestIsLeaseNotFound checks the classification against a real etcd: a
// revoked lease is not found, a live one's revoke succeeds, and an etcd
// that cannot be reached is something else.
func TestIsLeaseNotFound(t *testing.T) {
	cl := etcdClient(t, startEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := cl.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Revoke(ctx, g.ID); err != nil || isLeaseNotFound(err) {
		t.Fatalf("revoking a live lease: %v", err)
	}
	_, err = cl.Revoke(ctx, g.ID)
	if !isLeaseNotFound(err) {
		t.Fatalf("revoking it again: %v, want lease not found", err)
	}
	if isLeaseNotFound(fmt.Errorf("cluster: %w", context.DeadlineExceeded)) || isLeaseNotFound(nil) {
		t.Fatal("other errors taken for lease not found")
	}
}
