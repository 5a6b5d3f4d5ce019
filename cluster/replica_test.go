package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/prompt"
	"github.com/memoria-ai/memoria/messages"
)

// The replica's side of the protocol, on two real stores in one process
// (no etcd: stageHere, apply and entries need none).

func openSelf(t *testing.T) *memory.Self {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Evaluation.Mode = "off"
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { self.Close() })
	return self
}

// replica is a member's replica side, without membership.
func replica(t *testing.T) *Cluster {
	c := &Cluster{self: openSelf(t), log: slog.New(slog.DiscardHandler)}
	c.chains = newChains(c)
	return c
}

// owner appends memories to a sona of its own store as an owner does
// (locally, after the head moved) and keeps their staged records.
type owner struct {
	t     *testing.T
	self  *memory.Self
	rec   *messages.Sona
	claim int64
	recs  []*messages.StagedAppend
}

func newOwner(t *testing.T, claim int64) *owner {
	self := openSelf(t)
	rec, err := self.Sonas.Create(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	return &owner{t: t, self: self, rec: rec, claim: claim}
}

// append writes text (with edges) and returns its staged record.
func (o *owner) append(sona, text string, edges ...model.Edge) *messages.StagedAppend {
	o.t.Helper()
	ctx := context.Background()
	vec, err := o.self.Embed(ctx, text)
	if err != nil {
		o.t.Fatal(err)
	}
	p, err := o.self.Chains.Prepare(prompt.TextMemory(text, "", 1700000000, edges), vec[0], nil)
	if err != nil {
		o.t.Fatal(err)
	}
	rec, err := o.self.Sonas.Get(sona)
	if err != nil {
		o.t.Fatal(err)
	}
	var head *cid.Cid
	if rec.Head != nil {
		c, _ := cid.Decode(*rec.Head)
		head = &c
	}
	plan, err := model.PlanAppend(sona, head, rec.Length, p, 1700000000)
	if err != nil {
		o.t.Fatal(err)
	}
	sa, err := staged(o.self, plan, o.claim)
	if err != nil {
		o.t.Fatal(err)
	}
	if err := o.self.Store().Update(ctx, o.self.Chains.Op(plan)); err != nil {
		o.t.Fatal(err)
	}
	if sona == o.rec.Uuid {
		o.recs = append(o.recs, sa)
	}
	return sa
}

func (o *owner) head(seq int64) *messages.ChainHead {
	if seq < 0 {
		return &messages.ChainHead{Seq: -1}
	}
	return &messages.ChainHead{Seq: seq, Act: o.recs[seq].Act}
}

func (o *owner) request(committed int64, appends ...*messages.StagedAppend) *messages.StageRequest {
	return &messages.StageRequest{Sona: o.rec, Owner: "o", Claim: o.claim, Committed: o.head(committed), Appends: appends}
}

func stageOK(t *testing.T, r *Cluster, req *messages.StageRequest) {
	t.Helper()
	resp, err := r.stageHere(context.Background(), req)
	if err != nil || !resp.Ok {
		t.Fatalf("stage: %v %v", resp, err)
	}
}

func length(t *testing.T, self *memory.Self, sona string) int64 {
	t.Helper()
	l, _, err := localLength(self, sona)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReplicaStagesThenAppendsWhatIsCommitted: a replica holds an append
// staged until the owner's head covers it, then appends it with exactly
// the owner's ACT — an edge to a memory only the owner holds included.
func TestReplicaStagesThenAppendsWhatIsCommitted(t *testing.T) {
	o := newOwner(t, 10)
	r := replica(t)
	other, err := o.self.Sonas.Create(context.Background(), "bob")
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := o.append(other.Uuid, "a memory of another sona, which the replica does not hold")

	stageOK(t, r, o.request(-1)) // a new sona: adopted, empty
	if l := length(t, r.self, o.rec.Uuid); l != 0 {
		t.Fatalf("adopted sona has length %d", l)
	}
	s0 := o.append(o.rec.Uuid, "first")
	stageOK(t, r, o.request(-1, s0))
	if l := length(t, r.self, o.rec.Uuid); l != 0 {
		t.Fatalf("a staged append entered the chain before the head covered it (length %d)", l)
	}
	target, err := model.SumCID(model.CodecDagCBOR, elsewhere.Append.Block)
	if err != nil {
		t.Fatal(err)
	}
	s1 := o.append(o.rec.Uuid, "second, resting on another sona's memory", model.Edge{Target: target, Weight: 1})
	stageOK(t, r, o.request(0, s1))
	s2 := o.append(o.rec.Uuid, "third")
	stageOK(t, r, o.request(1, s2))
	if l := length(t, r.self, o.rec.Uuid); l != 2 {
		t.Fatalf("replica length %d, want 2 (seq 2 staged)", l)
	}
	for seq := range int64(2) {
		act, err := localAct(r.self, o.rec.Uuid, seq)
		if err != nil || !act.Equals(cidOf(o.recs[seq].Act)) {
			t.Fatalf("replica seq %d is %s, owner's %s (%v)", seq, act, cidOf(o.recs[seq].Act), err)
		}
	}
	// What a new owner would fetch from it: the chain, then what is staged.
	list, err := entries(r.self, o.rec.Uuid, 0, 10)
	if err != nil || len(list) != 3 || !cidOf(list[2].Act).Equals(cidOf(s2.Act)) {
		t.Fatalf("entries: %d %v", len(list), err)
	}
}

// TestReplicaAsksForWhatItLacks: a replica that missed appends says from
// where, and takes the chain from there.
func TestReplicaAsksForWhatItLacks(t *testing.T) {
	o := newOwner(t, 10)
	r := replica(t)
	for i := range 4 {
		o.append(o.rec.Uuid, fmt.Sprintf("memory %d", i))
	}
	// The replica first hears of the sona at seq 3.
	resp, err := r.stageHere(context.Background(), o.request(2, o.recs[3]))
	if err != nil || resp.Ok || resp.NeedFrom != 0 {
		t.Fatalf("want need_from 0, got %v %v", resp, err)
	}
	stageOK(t, r, o.request(-1, o.recs[0], o.recs[1]))
	// seq 2 missing between what is staged and the batch.
	resp, err = r.stageHere(context.Background(), o.request(1, o.recs[3]))
	if err != nil || resp.Ok || resp.NeedFrom != 2 {
		t.Fatalf("want need_from 2, got %v %v", resp, err)
	}
	stageOK(t, r, o.request(1, o.recs[2], o.recs[3]))
	stageOK(t, r, o.request(3))
	if l := length(t, r.self, o.rec.Uuid); l != 4 {
		t.Fatalf("replica length %d, want 4", l)
	}
}

// TestReplicaRefusesAStaleOwner: appends staged by an owner whose claim
// is older than one seen are refused; what such an owner staged and the
// head never reached is dropped, never appended.
func TestReplicaRefusesAStaleOwner(t *testing.T) {
	old := newOwner(t, 10)
	r := replica(t)
	s0 := old.append(old.rec.Uuid, "first")
	stageOK(t, r, old.request(-1, s0))
	stageOK(t, r, old.request(0))
	// The old owner stages seq 1, then is fenced; the new owner (a copy of
	// the chain up to seq 0, claim 20) appends something else at seq 1.
	stageOK(t, r, old.request(0, old.append(old.rec.Uuid, "never acknowledged")))
	fresh := &owner{t: t, self: openSelf(t), rec: old.rec, claim: 20}
	if _, err := fresh.self.Sonas.Adopt(context.Background(), old.rec); err != nil {
		t.Fatal(err)
	}
	if err := apply(context.Background(), fresh.self, old.rec.Uuid, []*messages.StagedAppend{s0}); err != nil {
		t.Fatal(err)
	}
	fresh.recs = []*messages.StagedAppend{s0}
	f1 := fresh.append(old.rec.Uuid, "acknowledged instead")
	stageOK(t, r, fresh.request(0, f1))
	// The fenced owner's later push is refused.
	if _, err := r.stageHere(context.Background(), old.request(1)); !errors.Is(err, ErrFenced) {
		t.Fatalf("a stale owner's push: %v, want ErrFenced", err)
	}
	stageOK(t, r, fresh.request(1))
	act, err := localAct(r.self, old.rec.Uuid, 1)
	if err != nil || !act.Equals(cidOf(f1.Act)) {
		t.Fatalf("seq 1 on the replica is %s, want the new owner's %s (%v)", act, cidOf(f1.Act), err)
	}
	// A staged append that does not continue the chain is dropped when
	// the head reaches its seq, and asked for again.
	stale := old.append(old.rec.Uuid, "staged by nobody current")
	stale.Seq, stale.Claim = 2, 20
	op, _ := stageOp(old.rec.Uuid, []*messages.StagedAppend{stale})
	if err := r.self.Store().Update(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	f2 := fresh.append(old.rec.Uuid, "the real seq 2")
	resp, err := r.stageHere(context.Background(), fresh.request(2))
	if err != nil || resp.Ok || resp.NeedFrom != 2 {
		t.Fatalf("want need_from 2 after dropping the stale append, got %v %v", resp, err)
	}
	stageOK(t, r, fresh.request(1, f2))
	stageOK(t, r, fresh.request(2))
	if l := length(t, r.self, old.rec.Uuid); l != 3 {
		t.Fatalf("replica length %d, want 3", l)
	}
}

// TestReplicaDropsAFencedOwnersStagedAppend: a replica holds, staged, an
// append of an owner that was fenced before its head moved — it continues
// the replica's chain perfectly. The new owner's head covers that seq with
// its own append: the replica must not append the staged one (a fork of
// the chain), but drop it and take the chain from the new owner.
func TestReplicaDropsAFencedOwnersStagedAppend(t *testing.T) {
	ctx := context.Background()
	o1 := newOwner(t, 10)
	r := replica(t)
	a0 := o1.append(o1.rec.Uuid, "the keeper lit the lamp")
	stageOK(t, r, o1.request(-1, a0))
	stageOK(t, r, o1.request(0))
	x := o1.append(o1.rec.Uuid, "written by an owner about to be fenced")
	stageOK(t, r, o1.request(0, x))

	o2 := &owner{t: t, self: openSelf(t), rec: o1.rec, claim: 20}
	if _, err := o2.self.Sonas.Adopt(ctx, o1.rec); err != nil {
		t.Fatal(err)
	}
	if err := apply(ctx, o2.self, o1.rec.Uuid, []*messages.StagedAppend{a0}); err != nil {
		t.Fatal(err)
	}
	o2.recs = []*messages.StagedAppend{a0}
	y := o2.append(o1.rec.Uuid, "written by the new owner")
	z := o2.append(o1.rec.Uuid, "and again")
	resp, err := r.stageHere(ctx, o2.request(2))
	if err != nil || resp.Ok || resp.NeedFrom != 1 {
		t.Fatalf("the new owner's head at seq 2 over a staged seq 1 of the old: %v %v, want need_from 1", resp, err)
	}
	if l := length(t, r.self, o1.rec.Uuid); l != 1 {
		t.Fatalf("the replica's chain has %d ACTs, want 1 (the fenced owner's append not in it)", l)
	}
	stageOK(t, r, o2.request(0, y, z))
	stageOK(t, r, o2.request(2))
	act, err := localAct(r.self, o1.rec.Uuid, 2)
	if err != nil || !act.Equals(cidOf(z.Act)) {
		t.Fatalf("the replica's seq 2 is %s (%v), want the new owner's %s", act, err, cidOf(z.Act))
	}
}
