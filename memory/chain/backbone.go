package chain

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// BackboneName is the name of the sona whose chain holds the backbone.
const BackboneName = "backbone"

// Backbone is Living Memory's backbone: the self's permanent identity,
// memories that never decay, never compress and are visible to every
// sona. They live on the chain of one reserved sona, named "backbone",
// whose one writer is the consensus actor: call the writing methods from
// one goroutine at a time. What the agents agree to write is decided by
// memory/consensus, which writes through AppendContent.
type Backbone struct {
	st     *store.Store
	sonas  *Sonas
	writer *Writer
	embed  Embed
	clock  clock.Clock
	id     atomic.Pointer[string] // uuid of the backbone's sona, once it exists
}

// NewBackbone writes the backbone through writer. Read its sona with Load.
func NewBackbone(st *store.Store, sonas *Sonas, writer *Writer, embed Embed, clk clock.Clock) *Backbone {
	return &Backbone{st: st, sonas: sonas, writer: writer, embed: embed, clock: clk}
}

// Load reads the backbone sona's uuid (x/backbone), if it exists.
func (b *Backbone) Load(r store.Reader) error {
	v, err := r.Get(KeyBackbone)
	if errors.Is(err, base.ErrNotFound) {
		return nil
	}
	if err == nil {
		id := string(v)
		b.id.Store(&id)
	}
	return err
}

// Sona returns the uuid of the backbone's sona, or "" when nothing was
// written to the backbone yet. It is read at open and set when the sona
// is made; it never changes after.
func (b *Backbone) Sona() string {
	if id := b.id.Load(); id != nil {
		return *id
	}
	return ""
}

// Is reports whether sona is the backbone's: only the consensus actor
// writes to it.
func (b *Backbone) Is(sona string) bool {
	id := b.Sona()
	return id != "" && id == sona
}

// Put records in tx that sona id is the backbone's (an import brings it),
// and takes it once tx commits.
func (b *Backbone) Put(tx store.Tx, id string) {
	tx.Set(KeyBackbone, []byte(id))
	tx.OnCommit(func() { b.id.Store(&id) })
}

// ensure returns the backbone sona's uuid, creating it (and its record
// under x/backbone, in the same transaction) on first use.
func (b *Backbone) ensure(ctx context.Context) (string, error) {
	if id := b.Sona(); id != "" {
		return id, nil
	}
	// Not unique: a sona of the self may be called "backbone" too.
	rec, err := b.sonas.create(ctx, BackboneName, false, func(tx store.Tx, rec *messages.Sona) { b.Put(tx, rec.Uuid) })
	if err != nil {
		return "", err
	}
	return rec.Uuid, nil
}

// Write writes content by agent straight to the backbone (a single
// agent's write needs no consensus) and returns its CID; existed when that
// memory already was on the backbone.
func (b *Backbone) Write(ctx context.Context, agent, content string, labels map[string]string) (cid.Cid, bool, error) {
	if err := ValidWrite(agent, content); err != nil {
		return cid.Undef, false, err
	}
	return b.AppendContent(ctx, agent, content, labels, nil)
}

// ValidWrite checks a single agent's write to the backbone.
func ValidWrite(agent, content string) error {
	if err := base.ValidText("content", content, consensus.MaxContentBytes); err != nil {
		return err
	}
	if err := base.ValidText("agent_id", agent, 200); err != nil {
		return err
	}
	return base.ValidateAgentID(agent)
}

// AppendContent appends a backbone memory of content by agent, with
// labels, and runs also in the same transaction (also runs even when the
// memory already was there).
func (b *Backbone) AppendContent(ctx context.Context, agent, content string, labels map[string]string, also store.Op) (cid.Cid, bool, error) {
	id, err := b.ensure(ctx)
	if err != nil {
		return cid.Undef, false, err
	}
	p, err := b.Prepare(ctx, agent, content, labels)
	if err != nil {
		return cid.Undef, false, err
	}
	res, err := b.appendTo(ctx, id, p, also)
	if err != nil {
		return cid.Undef, false, err
	}
	return p.CID, res.Seq == nil, nil
}

// Prepare makes the backbone memory of content by agent, with labels.
func (b *Backbone) Prepare(ctx context.Context, agent, content string, labels map[string]string) (*model.Prepared, error) {
	vecs, err := b.embed(ctx, content)
	if err != nil {
		return nil, err
	}
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}}
	if agent != "" {
		m.Data = model.Data{Other: &model.OtherData{Name: &agent, Content: content}}
	}
	return b.writer.Prepare(m, vecs[0], &messages.MemoryMeta{Kind: "fact", AgentId: agent, Backbone: true, Labels: labels})
}

// Append appends a prepared memory to the backbone's chain: how an import
// replays the backbone's exported chain (the backbone sona must exist).
// Only the consensus actor calls it.
func (b *Backbone) Append(ctx context.Context, p *model.Prepared) (*messages.Appended, error) {
	id := b.Sona()
	if id == "" {
		return nil, fmt.Errorf("%w: no backbone yet", base.ErrNotFound)
	}
	return b.appendTo(ctx, id, p, nil)
}

// appendTo appends p to the backbone sona id and runs also in the same
// transaction (also runs even when p already was there).
func (b *Backbone) appendTo(ctx context.Context, id string, p *model.Prepared, also store.Op) (*messages.Appended, error) {
	plan, existed, err := b.Plan(id, p)
	if err != nil {
		return nil, err
	}
	res := &messages.Appended{Cid: p.CID.String(), Existed: existed}
	op := also
	if plan != nil {
		res.Seq, res.Act = proto.Int64(plan.Seq), plan.Act.String()
		appendOp := b.writer.Op(plan)
		op = func(tx store.Tx) error {
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
		if err := b.st.Update(ctx, op); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Plan plans p's append to the backbone sona id on its chain as this
// store holds it: nil and existed when p already is on it.
func (b *Backbone) Plan(id string, p *model.Prepared) (plan *model.Append, existed bool, err error) {
	rec, err := b.sonas.State(id)
	if err != nil {
		return nil, false, err
	}
	if p.ExpectSeq != nil && *p.ExpectSeq != rec.Length {
		return nil, false, fmt.Errorf("%w: the backbone is at seq %d, append expected at %d", base.ErrChainConflict, rec.Length, *p.ExpectSeq)
	}
	if existed, err = b.writer.mems.InSona(p.CID, id); err != nil || existed {
		return nil, existed, err
	}
	plan, err = model.PlanAppend(id, rec.Head, rec.Length, p, b.clock.Now().Unix())
	return plan, false, err
}

// List lists the backbone's memories in the order they were written.
func (b *Backbone) List(from int64, limit int) (base.Page[Entry], error) {
	id := b.Sona()
	if id == "" {
		return base.Page[Entry]{}, nil
	}
	return b.sonas.Chain(id, from, limit)
}
