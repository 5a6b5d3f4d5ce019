package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	memchain "github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The staged appends are this package's key space in the store (package
// memory's doc lists the others):
//
//	w/  uuid 0x00 seq (8 bytes BE)   StagedAppend (protobuf): an append of the
//	                                 chain staged here, not yet in the chain
//
// An append is staged on its owner and R-1 replicas before the chain's
// head moves in etcd, and enters a member's chain (chain.Writer.Op, which
// deletes the staged record in the same transaction) only once the head
// covers it. So a member's chain is always a prefix of the acknowledged
// chain, never a fork of it: a staged append the head never reached is
// dropped, never appended.
var prefixStaged = []byte("w/")

func stagedPrefix(sona string) []byte {
	return append(append(append([]byte{}, prefixStaged...), sona...), 0)
}

func stagedKey(sona string, seq int64) []byte {
	return binary.BigEndian.AppendUint64(stagedPrefix(sona), uint64(seq))
}

// stageOp writes staged appends.
func stageOp(sona string, as []*messages.StagedAppend) (store.Op, error) {
	raws := make([][]byte, len(as))
	for i, a := range as {
		raw, err := proto.Marshal(a)
		if err != nil {
			return nil, err
		}
		raws[i] = raw
	}
	return func(tx store.Tx) error {
		for i, a := range as {
			tx.Set(stagedKey(sona, a.Seq), raws[i])
		}
		return nil
	}, nil
}

// readStaged returns the staged appends of sona from seq from on, in seq
// order.
func readStaged(st *store.Store, sona string, from int64) ([]*messages.StagedAppend, error) {
	var out []*messages.StagedAppend
	err := st.View(func(r store.Reader) error {
		it := r.NewIterator(store.IterOptions{Prefix: stagedPrefix(sona)})
		defer it.Close()
		for it.Seek(stagedKey(sona, max(from, 0))); it.Valid(); it.Next() {
			a := &messages.StagedAppend{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, a) }); err != nil {
				return fmt.Errorf("%w: staged append of %s: %v", base.ErrCorrupt, sona, err)
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// contiguous is the run of staged appends that continues a chain of
// length: seqs length, length+1, … up to seq to at most.
func contiguous(st []*messages.StagedAppend, length, to int64) []*messages.StagedAppend {
	var run []*messages.StagedAppend
	for _, a := range st {
		if a.Seq != length+int64(len(run)) || a.Seq > to {
			break
		}
		run = append(run, a)
	}
	return run
}

// acknowledged is the run of staged appends that continues a chain of
// length up to the acknowledged head: the whole run, proven by its last
// ACT being the head's (each ACT names the one before it). ok is false
// when the run stops short of the head or ends on another ACT: appends
// staged under a claim the head never reached — an owner fenced mid-write
// keeps its own, a replica an old owner's — may continue the local chain
// perfectly and still not be the chain's, so they are not appended.
func acknowledged(st []*messages.StagedAppend, length int64, head *messages.ChainHead) (run []*messages.StagedAppend, ok bool) {
	run = contiguous(st, length, head.GetSeq())
	if len(run) == 0 || run[len(run)-1].Seq != head.GetSeq() || !bytes.Equal(run[len(run)-1].Act, head.GetAct()) {
		return nil, false
	}
	return run, true
}

// dropStaged deletes sona's staged appends from seq from on: the head
// never reached them.
func dropStaged(ctx context.Context, st *store.Store, sona string, from int64) error {
	stale, err := readStaged(st, sona, from)
	if err != nil || len(stale) == 0 {
		return err
	}
	return st.Update(ctx, func(tx store.Tx) error {
		for _, a := range stale {
			tx.Delete(stagedKey(sona, a.Seq))
		}
		return nil
	})
}

// staged turns a planned append into its staged record. A file memory's
// content travels with it (the replica may lack the block).
func staged(self *memory.Self, a *model.Append, claim int64) (*messages.StagedAppend, error) {
	p := a.Item
	if p.Forgotten != nil {
		return &messages.StagedAppend{Seq: a.Seq, Act: a.Act.Bytes(), ActBlock: a.ActBlock, Now: a.Now, Claim: claim, Forgotten: p.Forgotten}, nil
	}
	msg := &messages.AppendMemory{Sona: a.Sona, Block: p.Block, Embedding: p.Vector, Meta: p.Meta,
		Imported: p.Imported, File: p.File}
	if p.Request != nil {
		msg.RequestId, msg.RequestResult = p.Request.ID, p.Request.Result
	}
	for _, c := range p.Archive {
		msg.Archive = append(msg.Archive, c.Bytes())
	}
	for _, n := range p.Neighbors {
		msg.Neighbors = append(msg.Neighbors, &messages.Neighbor{Cid: n.CID.Bytes(), Sim: n.Sim})
	}
	if f := p.Memory.Data.File; f != nil && msg.File == nil {
		b, err := self.Block(f.Content)
		if err != nil {
			return nil, fmt.Errorf("cluster: the file of %s: %w", p.CID, err)
		}
		msg.File = b
	}
	sa := &messages.StagedAppend{Seq: a.Seq, Act: a.Act.Bytes(), ActBlock: a.ActBlock, Append: msg,
		EdgeType: p.EdgeType, Now: a.Now, Claim: claim}
	if p.PageOf != nil {
		sa.PageOf = p.PageOf.Bytes()
	}
	return sa, nil
}

// fromChain rebuilds the staged record of an append already in this
// member's chain (to catch another member up). What only the append's
// moment knew — its neighbours, its edges' association type, its dialogue
// page — is not kept, so the copy derives a little less from it.
func fromChain(self *memory.Self, sona string, e memchain.Entry) (*messages.StagedAppend, error) {
	actBlock, err := self.Block(e.Act)
	if err != nil {
		return nil, err
	}
	block, err := self.Block(e.Memory)
	if errors.Is(err, base.ErrForgotten) {
		// A forgotten memory: its place in the chain, and its tombstone.
		var t *messages.Tombstone
		if err := self.Store().View(func(r store.Reader) error {
			t, err = forget.ReadTombstone(r, e.Memory)
			return err
		}); err != nil {
			return nil, err
		}
		return &messages.StagedAppend{Seq: e.Seq, Act: e.Act.Bytes(), ActBlock: actBlock, Forgotten: t}, nil
	}
	if err != nil {
		return nil, err
	}
	vec, err := self.Memories.Vector(e.Memory)
	if err != nil {
		return nil, err
	}
	meta, err := self.Memories.Meta(e.Memory)
	if err != nil {
		return nil, err
	}
	m, err := model.DecodeMemory(block)
	if err != nil {
		return nil, err
	}
	msg := &messages.AppendMemory{Block: block, Embedding: vec, Meta: meta}
	if r, err := self.Chains.RequestAt(sona, e.Seq); err != nil {
		return nil, err
	} else if r != nil {
		msg.RequestId, msg.RequestResult = r.ID, r.Result
	}
	if f := m.Data.File; f != nil {
		if msg.File, err = self.Block(f.Content); err != nil {
			return nil, err
		}
	}
	return &messages.StagedAppend{Seq: e.Seq, Act: e.Act.Bytes(), ActBlock: actBlock, Append: msg, Now: meta.CreatedAt}, nil
}

// apply appends staged records to this member's copy of sona, in order,
// each verified: it must be the next seq, and planning it on the local
// head must give exactly its ACT (same memory, same previous ACT). The
// staged record is deleted in the append's transaction.
func apply(ctx context.Context, self *memory.Self, sona string, as []*messages.StagedAppend) error {
	if len(as) == 0 {
		return nil
	}
	rec, err := self.Sonas.Get(sona)
	if err != nil {
		return err
	}
	var head *cid.Cid
	if rec.Head != nil {
		c, err := cid.Decode(*rec.Head)
		if err != nil {
			return fmt.Errorf("%w: head of %s: %v", base.ErrCorrupt, sona, err)
		}
		head = &c
	}
	length := rec.Length
	var last *store.Pending
	for _, a := range as {
		if a.Seq != length {
			return fmt.Errorf("%w: %s: staged seq %d, the chain is at %d", ErrDiverged, sona, a.Seq, length)
		}
		gone, err := forgottenHere(self, a)
		if err != nil {
			return err
		}
		var item *model.Prepared
		if gone != nil {
			item = &model.Prepared{CID: gone.mem}
		} else if item, err = prepared(self, a); err != nil {
			return err
		}
		plan, err := model.PlanAppend(sona, head, length, item, a.Now)
		if err != nil {
			return err
		}
		if !plan.Act.Equals(cidOf(a.Act)) {
			return fmt.Errorf("%w: %s seq %d: the append gives ACT %s here, %s on its owner", ErrDiverged, sona, a.Seq, plan.Act, cidOf(a.Act))
		}
		appendOp, key, ledger := self.Chains.Op(plan), stagedKey(sona, a.Seq), ledgerOp(a.Ledger)
		if gone != nil {
			appendOp = self.Chains.OpForgotten(plan, gone.tomb)
		}
		last = self.Store().Submit(func(tx store.Tx) error {
			if err := appendOp(tx); err != nil {
				return err
			}
			tx.Delete(key)
			return ledger(tx) // the backbone's consensus ledger as the append leaves it
		})
		head, length = plan.Next()
	}
	// The committer runs them in order: the last settles after the others.
	if err := last.Wait(ctx); err != nil {
		return fmt.Errorf("cluster: append the staged appends of %s: %w", sona, err)
	}
	return nil
}

// forgotten is a staged append's memory that was forgotten: its CID and
// the tombstone the record carries (nil when only this member's store
// keeps one).
type forgotten struct {
	mem  cid.Cid
	tomb *messages.Tombstone
}

// forgottenHere reports whether a's memory was forgotten — the record
// says so, or this member keeps its tombstone — and if so which it is.
func forgottenHere(self *memory.Self, a *messages.StagedAppend) (*forgotten, error) {
	act, err := model.DecodeAct(a.ActBlock)
	if err != nil {
		return nil, err
	}
	if a.Forgotten != nil {
		if a.Forgotten.Cid != act.Memory.String() {
			return nil, fmt.Errorf("%w: a staged forgotten memory's tombstone names %s, its ACT %s", base.ErrInvalid, a.Forgotten.Cid, act.Memory)
		}
		return &forgotten{mem: act.Memory, tomb: a.Forgotten}, nil
	}
	var gone bool
	err = self.Store().View(func(r store.Reader) error {
		gone, err = r.Has(store.TombstoneKey(act.Memory))
		return err
	})
	if err != nil || !gone {
		return nil, err
	}
	return &forgotten{mem: act.Memory}, nil
}

// prepared is the memory of a staged record, ready to append.
func prepared(self *memory.Self, a *messages.StagedAppend) (*model.Prepared, error) {
	m := a.GetAppend()
	if m == nil {
		return nil, fmt.Errorf("%w: a staged append without its memory", base.ErrInvalid)
	}
	item, err := self.Chains.PrepareBlock(m.Block, m.Embedding, m.Meta)
	if err != nil {
		return nil, err
	}
	item.Replicated, item.Imported, item.File, item.EdgeType = true, m.Imported, m.File, a.EdgeType
	if m.RequestId != "" {
		item.Request = &model.Request{ID: m.RequestId, Result: m.RequestResult}
	}
	for _, n := range m.Neighbors {
		c, err := cid.Cast(n.Cid)
		if err != nil {
			return nil, fmt.Errorf("%w: neighbour cid: %v", base.ErrInvalid, err)
		}
		item.Neighbors = append(item.Neighbors, model.Neighbor{CID: c, Sim: n.Sim})
	}
	for _, b := range m.Archive {
		c, err := cid.Cast(b)
		if err != nil {
			return nil, fmt.Errorf("%w: archive cid: %v", base.ErrInvalid, err)
		}
		item.Archive = append(item.Archive, c)
	}
	if len(a.PageOf) > 0 {
		c, err := cid.Cast(a.PageOf)
		if err != nil {
			return nil, fmt.Errorf("%w: page cid: %v", base.ErrInvalid, err)
		}
		item.PageOf = &c
	}
	return item, nil
}

// cidOf reads CID bytes (Undef when malformed: it then equals nothing).
func cidOf(b []byte) cid.Cid {
	c, err := cid.Cast(b)
	if err != nil {
		return cid.Undef
	}
	return c
}

// localLength is the length of this member's copy of sona, -1 when it does
// not hold the sona.
func localLength(self *memory.Self, sona string) (int64, *messages.Sona, error) {
	rec, err := self.Sonas.Get(sona)
	if errors.Is(err, base.ErrNotFound) {
		return -1, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	return rec.Length, rec, nil
}

// localAct is the ACT at seq of this member's copy of sona.
func localAct(self *memory.Self, sona string, seq int64) (cid.Cid, error) {
	page, err := self.Sonas.Chain(sona, seq, 1)
	if err != nil {
		return cid.Undef, err
	}
	if len(page.Items) == 0 || page.Items[0].Seq != seq {
		return cid.Undef, fmt.Errorf("%w: %s has no seq %d here", base.ErrNotFound, sona, seq)
	}
	return page.Items[0].Act, nil
}

// entries are sona's appends from..to (inclusive) as this member holds
// them: from its chain, then its staged appends that continue it.
func entries(self *memory.Self, sona string, from, to int64) ([]*messages.StagedAppend, error) {
	var out []*messages.StagedAppend
	next := from
	for next <= to {
		page, err := self.Sonas.Chain(sona, next, int(min(to-next+1, 256)))
		if err != nil {
			return nil, err
		}
		if len(page.Items) == 0 {
			break
		}
		for _, e := range page.Items {
			if e.Seq != next || e.Seq > to {
				return out, nil
			}
			sa, err := fromChain(self, sona, e)
			if err != nil {
				return nil, err
			}
			out = append(out, sa)
			next++
		}
	}
	if next > to {
		return out, nil
	}
	st, err := readStaged(self.Store(), sona, next)
	if err != nil {
		return nil, err
	}
	for _, a := range st {
		if a.Seq != next || a.Seq > to {
			break
		}
		out = append(out, a)
		next++
	}
	return out, nil
}
