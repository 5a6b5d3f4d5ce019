package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// ledgerOf reads self's whole consensus ledger.
func ledgerOf(t *testing.T, self *memory.Self) *messages.Ledger {
	t.Helper()
	var l *messages.Ledger
	if err := self.Store().View(func(r store.Reader) (err error) {
		l, err = readLedger(r, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return l
}

func ledgerKeys(l *messages.Ledger) []string {
	var out []string
	for _, r := range l.Records {
		out = append(out, string(r.Key))
	}
	return out
}

// TestBackboneLedgerTravels: the backbone's consensus ledger goes to a
// replica whole — with a write that appends nothing, at once; with an
// append, in the append's transaction once the head covers it — and
// replaces the replica's own; a ledger for another sona, or with a key
// outside the ledger's key spaces, is refused and writes nothing; an op
// that writes outside them yields no ledger.
func TestBackboneLedgerTravels(t *testing.T) {
	ctx := context.Background()
	o := newOwner(t, 10)
	r := replica(t)
	r.backbone = o.rec // the owner's sona plays the backbone

	// Two concepts pending on the owner (its own ledger, as one node).
	for _, k := range []string{"door", "lamp"} {
		if _, err := o.self.Consensus.Contribute(ctx, &messages.Contribute{AgentId: "ann", ConceptKey: k, Content: "the " + k + " is green"}); err != nil {
			t.Fatal(err)
		}
	}
	both := ledgerOf(t, o.self)
	if got := ledgerKeys(both); len(got) != 2 {
		t.Fatalf("the owner's ledger: %q", got)
	}
	req := o.request(-1)
	req.Ledger = both
	stageOK(t, r, req)
	if got := ledgerKeys(ledgerOf(t, r.self)); len(got) != 2 || got[0] != "p/door" || got[1] != "p/lamp" {
		t.Fatalf("the replica's ledger after a write that appends nothing: %q", got)
	}
	if got := r.self.Backbone.Sona(); got != o.rec.Uuid {
		t.Fatalf("the replica's backbone is %q, want %s", got, o.rec.Uuid)
	}

	// An append that drops "door" (a commit): staged with the ledger as
	// it leaves it, taken with the append once committed.
	b := &backbone{c: &Cluster{self: o.self}}
	lampOnly, err := b.ledgerAfter(func(tx store.Tx) error {
		tx.Delete(consensus.PendingKey("door"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sa := o.append(o.rec.Uuid, "the door is green, say ann and bob")
	sa.Ledger = lampOnly
	stageOK(t, r, o.request(-1, sa))
	if got := ledgerKeys(ledgerOf(t, r.self)); len(got) != 2 {
		t.Fatalf("the replica's ledger with the append staged: %q, want it unchanged", got)
	}
	stageOK(t, r, o.request(0))
	if got := ledgerKeys(ledgerOf(t, r.self)); len(got) != 1 || got[0] != "p/lamp" {
		t.Fatalf("the replica's ledger once the append is committed: %q", got)
	}

	bad := &messages.Ledger{Records: []*messages.LedgerRecord{{Key: []byte("s/elsewhere"), Value: []byte("x")}}}
	req = o.request(0)
	req.Ledger = bad
	if _, err := r.stageHere(ctx, req); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("a ledger with a key outside its spaces: %v, want invalid", err)
	}
	r.backbone = &messages.Sona{Uuid: "00000000-0000-4000-8000-000000000000"}
	req.Ledger = both
	if _, err := r.stageHere(ctx, req); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("a ledger for a sona that is not the backbone: %v, want invalid", err)
	}
	if got := ledgerKeys(ledgerOf(t, r.self)); len(got) != 1 || got[0] != "p/lamp" {
		t.Fatalf("the replica's ledger after refused ledgers: %q", got)
	}
	if _, err := b.ledgerAfter(func(tx store.Tx) error {
		tx.Set([]byte("s/elsewhere"), []byte("x"))
		return nil
	}); err == nil {
		t.Fatal("an op writing outside the ledger's key spaces gave a ledger")
	}
}
