package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/memory/base"
	memchain "github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The backbone (README "Heartbeat, dream and the backbone") is one chain
// for the whole cluster. Its sona's uuid is claimed once in etcd
// (<prefix>/backbone, by the first member to start; the others adopt it),
// and it is written like any sona: by its owner (the /backbone routes
// and the conflicts' are routed to it), through the chain writer, staged
// on the replicas and fenced in etcd before it is acknowledged. Its
// consensus ledger — the pending concepts and open conflicts, keys p/
// and r/ — travels whole with each write: with the append whose
// transaction changes it (a commit, a resolution), or in a stage request
// of its own for a write that appends nothing (a pending version, a
// conflict), after which the head is moved to name the members that took
// it (the write's fence). Every live member is staged on (every sona's
// recall reads the backbone); R of them must take a write.

// backboneInfo is <prefix>/backbone.
type backboneInfo struct {
	UUID      string `json:"uuid"`
	CreatedAt int64  `json:"created_at"`
}

// claimBackbone reads the cluster's backbone from etcd, claiming it with
// this member's backbone (or a new uuid) when nobody has yet. A member
// whose store has a backbone of its own, another one, refuses to join: two
// backbones cannot be one chain.
func (c *Cluster) claimBackbone(ctx context.Context) error {
	n := c.node
	local := c.self.Backbone.Sona()
	mine := backboneInfo{UUID: local, CreatedAt: c.clock.Now().Unix()}
	if local != "" {
		rec, err := c.self.Sonas.Get(local)
		if err != nil {
			return fmt.Errorf("cluster: this member's backbone sona %s: %w", local, err)
		}
		mine.CreatedAt = rec.CreatedAt
	} else {
		mine.UUID = uuid.NewString()
	}
	v, _ := json.Marshal(mine)
	rctx, cancel := n.request(ctx)
	defer cancel()
	key := n.keys.backbone()
	resp, err := n.client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(v))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		n.failed()
		return fmt.Errorf("%w: claim the backbone: %v", ErrEtcdUnavailable, err)
	}
	n.answered()
	info := mine
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) != 1 || json.Unmarshal(kvs[0].Value, &info) != nil || info.UUID == "" {
			return fmt.Errorf("%w: %s in etcd is not a backbone", base.ErrCorrupt, key)
		}
	}
	if local != "" && local != info.UUID {
		return fmt.Errorf("cluster: this member's store has a backbone of its own (sona %s), the cluster's is %s: export this member's sonas and import them into a member with an empty store", local, info.UUID)
	}
	c.backbone = &messages.Sona{Uuid: info.UUID, Name: memchain.BackboneName, CreatedAt: info.CreatedAt}
	// An import bringing another backbone is refused before it writes,
	// though this member's store records none until it holds this one.
	c.self.Transfer.ExpectBackbone(info.UUID)
	c.log.Debug("backbone", "sona", info.UUID, "claimed", resp.Succeeded)
	if local != "" && resp.Succeeded {
		// This member's backbone is the cluster's: its chain is registered
		// in etcd before anyone could start another.
		if _, err := c.chains.Acquire(ctx, local); err != nil {
			return err
		}
	}
	return nil
}

// isBackbone reports whether sona is the cluster's backbone.
func (c *Cluster) isBackbone(sona string) bool {
	return c.backbone != nil && c.backbone.Uuid == sona
}

// holdBackbone makes this member hold the backbone's sona (an empty
// chain until it is caught up), recorded as its backbone (x/backbone).
func (c *Cluster) holdBackbone(ctx context.Context) error {
	if _, err := c.self.Sonas.Adopt(ctx, c.backbone); err != nil {
		return err
	}
	if c.self.Backbone.Sona() != "" {
		return nil
	}
	return c.self.Store().Update(ctx, func(tx store.Tx) error {
		c.self.Backbone.Put(tx, c.backbone.Uuid)
		return nil
	})
}

// Backbone is the consensus actor's writer (actors.Options.Backbone): the
// cluster's backbone, written on this member when it owns it.
func (c *Cluster) Backbone() actors.BackboneWriter {
	b := &backbone{c: c}
	b.ledger = consensus.NewLedger(ledgerStore{c.self.Store(), b}, b, c.conf, c.clock)
	return b
}

// backbone writes the cluster's backbone; its ledger is consensus's, on
// this member's store, whose writes go through the chain writer.
type backbone struct {
	c      *Cluster
	ledger *consensus.Ledger
}

var (
	_ actors.BackboneWriter = (*backbone)(nil)
	_ consensus.Env         = (*backbone)(nil)
)

// hold makes this member the backbone's owner, caught up to its head
// (its ledger with it), or fails (503: another member owns it).
func (b *backbone) hold(ctx context.Context) error {
	if err := b.c.holdBackbone(ctx); err != nil {
		return err
	}
	_, err := b.c.chains.Acquire(ctx, b.c.backbone.Uuid)
	return err
}

func (b *backbone) Write(ctx context.Context, agent, content string, labels map[string]string) (cid.Cid, bool, error) {
	if err := memchain.ValidWrite(agent, content); err != nil {
		return cid.Undef, false, err
	}
	if err := b.hold(ctx); err != nil {
		return cid.Undef, false, err
	}
	return b.appendContent(ctx, agent, content, labels, nil)
}

func (b *backbone) Contribute(ctx context.Context, c *messages.Contribute) (*messages.ContributeResult, error) {
	if err := b.hold(ctx); err != nil {
		return nil, err
	}
	return b.ledger.Contribute(ctx, c)
}

func (b *backbone) Resolve(ctx context.Context, conflictID, content, agent string) (cid.Cid, error) {
	if err := b.hold(ctx); err != nil {
		return cid.Undef, err
	}
	return b.ledger.Resolve(ctx, conflictID, content, agent)
}

// Append appends an import's replay of the backbone, when it is the
// cluster's backbone (an import of another is refused when it is planned:
// claimBackbone's ExpectBackbone).
func (b *backbone) Append(ctx context.Context, p *model.Prepared) (*messages.Appended, error) {
	id := b.c.backbone.Uuid
	if got := b.c.self.Backbone.Sona(); got != id {
		return nil, fmt.Errorf("%w: the import's backbone (sona %s) is not the cluster's (%s)", base.ErrChainConflict, got, id)
	}
	if err := b.hold(ctx); err != nil {
		return nil, err
	}
	plan, existed, err := b.c.self.Backbone.Plan(id, p)
	if err != nil {
		return nil, err
	}
	if existed {
		return &messages.Appended{Cid: p.CID.String(), Existed: true}, nil
	}
	if err := b.write(ctx, plan, nil); err != nil {
		return nil, err
	}
	return &messages.Appended{Cid: p.CID.String(), Seq: &plan.Seq, Act: plan.Act.String()}, nil
}

func (b *backbone) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return b.c.self.Embed(ctx, texts...)
}

func (b *backbone) AppendBackbone(ctx context.Context, agent, content string, labels map[string]string, also store.Op) (cid.Cid, error) {
	c, _, err := b.appendContent(ctx, agent, content, labels, also)
	return c, err
}

func (b *backbone) ValidateAgentID(id string) error { return base.ValidateAgentID(id) }

func (b *backbone) Memories() int64 {
	_, n := b.c.self.Counts()
	return n
}

// appendContent appends the backbone memory of content by agent through
// the chain writer, with the ledger as also leaves it; when the memory
// is on the backbone already, only the ledger is written.
func (b *backbone) appendContent(ctx context.Context, agent, content string, labels map[string]string, also store.Op) (cid.Cid, bool, error) {
	bb := b.c.self.Backbone
	p, err := bb.Prepare(ctx, agent, content, labels)
	if err != nil {
		return cid.Undef, false, err
	}
	plan, existed, err := bb.Plan(b.c.backbone.Uuid, p)
	if err != nil {
		return cid.Undef, false, err
	}
	var ledger *messages.Ledger
	if also != nil {
		if ledger, err = b.ledgerAfter(also); err != nil {
			return cid.Undef, false, err
		}
	}
	if plan == nil && ledger == nil {
		return p.CID, existed, nil
	}
	return p.CID, existed, b.write(ctx, plan, ledger)
}

// write carries out an append and/or a ledger through the chain writer
// and waits until it is done.
func (b *backbone) write(ctx context.Context, plan *model.Append, ledger *messages.Ledger) error {
	w := b.c.chains.write(ctx, b.c.backbone.Uuid, plan, ledger)
	select {
	case <-w.Done():
		return w.Err()
	case <-ctx.Done():
		return fmt.Errorf("cluster: the backbone's write: %w", ctx.Err())
	}
}

// ledgerAfter is the backbone's ledger on this member as op leaves it.
func (b *backbone) ledgerAfter(op store.Op) (*messages.Ledger, error) {
	var out *messages.Ledger
	err := b.c.self.Store().View(func(r store.Reader) error {
		rec := &ledgerTx{Reader: r, writes: map[string][]byte{}}
		if err := op(rec); err != nil {
			return err
		}
		if rec.err != nil {
			return rec.err
		}
		var err error
		out, err = readLedger(r, rec.writes)
		return err
	})
	return out, err
}

// ledgerStore is the ledger's store: reads are this member's, a write
// (a pending version, a conflict: Ledger.Update) goes through the chain
// writer. The ledger submits nothing (Submit is the store's).
type ledgerStore struct {
	*store.Store
	b *backbone
}

func (l ledgerStore) Update(ctx context.Context, op store.Op) error {
	ledger, err := l.b.ledgerAfter(op)
	if err != nil {
		return err
	}
	return l.b.write(ctx, nil, ledger)
}

// ledgerPrefixes are the key spaces of the consensus ledger.
var ledgerPrefixes = [][]byte{consensus.KeyPending, consensus.KeyConflict}

func isLedgerKey(k []byte) bool {
	return slices.ContainsFunc(ledgerPrefixes, func(p []byte) bool { return bytes.HasPrefix(k, p) })
}

// ledgerTx runs a ledger's op over a reader, recording its writes (nil:
// deleted) instead of making them. A write outside the ledger's key
// spaces fails the op (err).
type ledgerTx struct {
	store.Reader
	writes map[string][]byte
	err    error
}

func (t *ledgerTx) Get(key []byte) ([]byte, error) {
	if v, ok := t.writes[string(key)]; ok {
		if v == nil {
			return nil, base.ErrNotFound
		}
		return slices.Clone(v), nil
	}
	return t.Reader.Get(key)
}

func (t *ledgerTx) Has(key []byte) (bool, error) {
	if v, ok := t.writes[string(key)]; ok {
		return v != nil, nil
	}
	return t.Reader.Has(key)
}

func (t *ledgerTx) Set(key, val []byte) {
	if t.outside(key) {
		return
	}
	t.writes[string(key)] = slices.Clone(val)
}

func (t *ledgerTx) Delete(key []byte) {
	if t.outside(key) {
		return
	}
	t.writes[string(key)] = nil
}

func (t *ledgerTx) outside(key []byte) bool {
	if isLedgerKey(key) {
		return false
	}
	if t.err == nil {
		t.err = fmt.Errorf("cluster: the backbone's ledger writes key %q, outside its key spaces", key)
	}
	return true
}

func (t *ledgerTx) PutBlock(cid.Cid, []byte) error {
	return fmt.Errorf("cluster: the backbone's ledger writes no blocks")
}

func (t *ledgerTx) OnCommit(func()) {}

func (t *ledgerTx) Committed([]byte) bool { return false }

// readLedger reads the whole ledger from r, with writes over it.
func readLedger(r store.Reader, writes map[string][]byte) (*messages.Ledger, error) {
	recs := map[string][]byte{}
	for _, p := range ledgerPrefixes {
		if err := store.Scan(r, p, func(k, v []byte) error {
			recs[string(k)] = slices.Clone(v)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for k, v := range writes {
		if v == nil {
			delete(recs, k)
		} else {
			recs[k] = v
		}
	}
	out := &messages.Ledger{}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range recs {
			if !yield(k) {
				return
			}
		}
	}) {
		out.Records = append(out.Records, &messages.LedgerRecord{Key: []byte(k), Value: recs[k]})
	}
	return out, nil
}

// ledgerOp replaces this member's ledger with l (nil: leaves it).
func ledgerOp(l *messages.Ledger) store.Op {
	return func(tx store.Tx) error {
		if l == nil {
			return nil
		}
		keep := map[string]bool{}
		for _, rec := range l.Records {
			if !isLedgerKey(rec.Key) {
				return fmt.Errorf("%w: a backbone ledger record's key %q is outside its key spaces", base.ErrInvalid, rec.Key)
			}
			keep[string(rec.Key)] = true
		}
		for _, p := range ledgerPrefixes {
			var drop [][]byte
			if err := store.Keys(tx, p, func(k []byte) {
				if !keep[string(k)] {
					drop = append(drop, slices.Clone(k))
				}
			}); err != nil {
				return err
			}
			for _, k := range drop {
				tx.Delete(k)
			}
		}
		for _, rec := range l.Records {
			tx.Set(rec.Key, rec.Value)
		}
		return nil
	}
}

// backboneRoute reports whether path is one of the backbone's routes:
// /backbone…, /conflicts….
func backboneRoute(path string) bool {
	return path == "/backbone" || strings.HasPrefix(path, "/backbone/") || path == "/conflicts" || strings.HasPrefix(path, "/conflicts/")
}
