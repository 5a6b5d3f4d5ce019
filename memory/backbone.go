package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/messages"
)

// Living Memory's backbone. The backbone is the self's permanent identity:
// memories that never decay, never compress and are visible to every sona.
// They live on the chain of one reserved sona, named "backbone", whose one
// writer is the consensus actor: call the writing methods here from one
// goroutine at a time. What the agents agree to write is decided by
// memory/consensus (Self.Consensus), which writes through consensusEnv.

// BackboneName is the name of the sona whose chain holds the backbone.
const BackboneName = "backbone"

var keyBackbone = []byte("x/backbone")

// BackboneSona returns the uuid of the backbone's sona, or "" when nothing
// was written to the backbone yet. It is read from x/backbone at open and
// set when the sona is made; it never changes after.
func (s *Self) BackboneSona() string {
	if id := s.backbone.Load(); id != nil {
		return *id
	}
	return ""
}

// loadBackbone reads the backbone sona's uuid at open.
func (s *Self) loadBackbone(txn Reader) error {
	item, err := txn.Item(keyBackbone)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err == nil {
		id := string(v)
		s.backbone.Store(&id)
	}
	return err
}

// IsBackbone reports whether sona is the backbone's: only the consensus
// actor writes to it.
func (s *Self) IsBackbone(sona string) bool {
	id := s.BackboneSona()
	return id != "" && id == sona
}

// ensureBackbone returns the backbone sona's uuid, creating it (and its
// record under x/backbone, in the same transaction) on first use.
func (s *Self) ensureBackbone(ctx context.Context) (string, error) {
	if id := s.BackboneSona(); id != "" {
		return id, nil
	}
	rec, err := s.createSona(ctx, BackboneName, func(tx Tx, rec *messages.Sona) {
		tx.Set(keyBackbone, []byte(rec.Uuid))
		tx.OnCommit(func() { s.backbone.Store(&rec.Uuid) })
	})
	if err != nil {
		return "", err
	}
	return rec.Uuid, nil
}

// WriteBackbone writes content by agent straight to the backbone (a
// single agent's write needs no consensus) and returns its CID; existed
// when that memory already was on the backbone.
func (s *Self) WriteBackbone(ctx context.Context, agent, content string, labels map[string]string) (cid.Cid, bool, error) {
	if err := base.ValidText("content", content, consensus.MaxContentBytes); err != nil {
		return cid.Undef, false, err
	}
	if err := base.ValidText("agent_id", agent, 200); err != nil {
		return cid.Undef, false, err
	}
	if err := ValidateAgentID(agent); err != nil {
		return cid.Undef, false, err
	}
	return s.appendBackbone(ctx, agent, content, labels, nil)
}

// appendBackbone appends a backbone memory and runs also in the same
// transaction (also runs even when the memory already was there).
func (s *Self) appendBackbone(ctx context.Context, agent, content string, labels map[string]string, also Op) (cid.Cid, bool, error) {
	id, err := s.ensureBackbone(ctx)
	if err != nil {
		return cid.Undef, false, err
	}
	vecs, err := s.Embed(ctx, content)
	if err != nil {
		return cid.Undef, false, err
	}
	m := &Memory{Data: Data{Text: &TextData{Content: content}}}
	if agent != "" {
		m.Data = Data{Other: &OtherData{Name: &agent, Content: content}}
	}
	p, err := s.Prepare(m, vecs[0], &messages.MemoryMeta{Kind: "fact", AgentId: agent, Backbone: true, Labels: labels})
	if err != nil {
		return cid.Undef, false, err
	}
	res, err := s.appendPreparedBackbone(ctx, id, p, also)
	if err != nil {
		return cid.Undef, false, err
	}
	return p.CID, res.Seq == nil, nil
}

// AppendBackbone appends a prepared memory to the backbone's chain: how
// an import replays the backbone's exported chain (the backbone sona must
// exist). Only the consensus actor calls it.
func (s *Self) AppendBackbone(ctx context.Context, p *Prepared) (*messages.Appended, error) {
	id := s.BackboneSona()
	if id == "" {
		return nil, fmt.Errorf("%w: no backbone yet", ErrNotFound)
	}
	return s.appendPreparedBackbone(ctx, id, p, nil)
}

// appendPreparedBackbone appends p to the backbone sona id and runs also
// in the same transaction (also runs even when p already was there).
func (s *Self) appendPreparedBackbone(ctx context.Context, id string, p *Prepared, also Op) (*messages.Appended, error) {
	rec, err := s.Sona(id)
	if err != nil {
		return nil, err
	}
	if p.ExpectSeq != nil && *p.ExpectSeq != rec.Length {
		return nil, fmt.Errorf("%w: the backbone is at seq %d, append expected at %d", ErrChainConflict, rec.Length, *p.ExpectSeq)
	}
	existed, err := s.Memories.InSona(p.CID, id)
	if err != nil {
		return nil, err
	}
	res := &messages.Appended{Cid: p.CID.String(), Existed: existed}
	op := also
	if !existed {
		var head *cid.Cid
		if rec.Head != nil {
			h, err := cid.Decode(*rec.Head)
			if err != nil {
				return nil, fmt.Errorf("%w: backbone head: %v", ErrCorrupt, err)
			}
			head = &h
		}
		plan, err := PlanAppend(id, head, rec.Length, p, s.clock.Now().Unix())
		if err != nil {
			return nil, err
		}
		res.Seq, res.Act = proto.Int64(plan.Seq), plan.Act.String()
		appendOp := s.AppendOp(plan)
		op = func(tx Tx) error {
			if err := appendOp(tx); err != nil {
				return err
			}
			if also != nil {
				return also(tx)
			}
			return nil
		}
	}
	if op != nil {
		if err := s.store.Update(ctx, op); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Backbone lists the backbone's memories in the order they were written.
func (s *Self) Backbone(from int64, limit int) (Page[ChainEntry], error) {
	id := s.BackboneSona()
	if id == "" {
		return Page[ChainEntry]{}, nil
	}
	return s.Chain(id, from, limit)
}

// consensusEnv is what the consensus ledger needs of the self
// (consensus.Env).
type consensusEnv struct{ s *Self }

func (e consensusEnv) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

func (e consensusEnv) AppendBackbone(ctx context.Context, agent, content string, labels map[string]string, also Op) (cid.Cid, error) {
	c, _, err := e.s.appendBackbone(ctx, agent, content, labels, also)
	return c, err
}

func (e consensusEnv) ValidateAgentID(id string) error { return ValidateAgentID(id) }

func (e consensusEnv) Memories() int64 {
	_, n := e.s.Counts()
	return n
}
