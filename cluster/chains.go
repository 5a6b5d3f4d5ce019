package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ipfs/go-cid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Head is a chain's acknowledged head as etcd keeps it
// (<prefix>/sona/<uuid>/head): the ACT at seq (seq -1, no ACT: an empty
// chain), its memory, and the members that hold the chain up to it.
type Head struct {
	Seq      int64    `json:"seq"`
	CID      string   `json:"cid,omitempty"`
	Memory   string   `json:"memory,omitempty"`
	Replicas []string `json:"replicas"`
}

func (h Head) committed() *messages.ChainHead {
	out := &messages.ChainHead{Seq: h.Seq}
	if c, err := cid.Decode(h.CID); err == nil {
		out.Act = c.Bytes()
	}
	return out
}

// chains is the ChainWriter of a member: a sona's appends are staged here
// and on R-1 replicas, the head moves in etcd by compare-and-set on this
// member's claim, then the appends enter the local chain and are done.
type chains struct {
	c *Cluster

	mu    sync.Mutex
	sonas map[string]*chain
	// claims are the highest fencing tokens seen per sona as a replica.
	claims map[string]int64
}

// chain is the state of one sona this member owns (or owned).
type chain struct {
	id string

	mu      sync.Mutex
	cond    *sync.Cond // signalled when running ends
	claim   int64      // the owner key's create revision: 0 when not held
	epoch   uint64     // the node's lease epoch the claim was made under
	head    Head       // acknowledged
	headRev int64      // the head key's mod revision (0: no key)
	rec     *messages.Sona
	queue   []*write
	running bool
	broken  error // set when the member stepped down: writes fail until Acquire
}

// write is one append on its way, or (a nil) a backbone's consensus
// write that appends nothing; it implements actors.Settling.
type write struct {
	ctx context.Context // the caller's trace span
	a   *model.Append
	// ledger is the backbone's consensus ledger as the write leaves it
	// (nil: the write does not change it).
	ledger *messages.Ledger
	done   chan struct{}
	err    error
}

func (w *write) Done() <-chan struct{} { return w.done }
func (w *write) Err() error            { return w.err }

func (w *write) settle(err error) {
	w.err = err
	close(w.done)
}

var _ actors.ChainWriter = (*chains)(nil)

func newChains(c *Cluster) *chains {
	return &chains{c: c, sonas: map[string]*chain{}, claims: map[string]int64{}}
}

func (cs *chains) get(id string) *chain {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ch := cs.sonas[id]
	if ch == nil {
		ch = &chain{id: id}
		ch.cond = sync.NewCond(&ch.mu)
		cs.sonas[id] = ch
	}
	return ch
}

// fenceAll steps down from every sona: the lease they were claimed under
// is gone.
func (cs *chains) fenceAll() {
	cs.mu.Lock()
	all := make([]*chain, 0, len(cs.sonas))
	for _, ch := range cs.sonas {
		all = append(all, ch)
	}
	cs.mu.Unlock()
	for _, ch := range all {
		ch.mu.Lock()
		ch.claim = 0
		ch.broken = ErrFenced
		ch.mu.Unlock()
	}
}

// Owned counts the sonas this member holds now.
func (cs *chains) Owned() int {
	_, epoch := cs.c.node.Lease()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	n := 0
	for _, ch := range cs.sonas {
		ch.mu.Lock()
		if ch.claim != 0 && ch.epoch == epoch && ch.broken == nil {
			n++
		}
		ch.mu.Unlock()
	}
	return n
}

// holds reports whether this member holds sona now.
func (cs *chains) holds(sona string) bool {
	cs.mu.Lock()
	ch := cs.sonas[sona]
	cs.mu.Unlock()
	if ch == nil {
		return false
	}
	_, epoch := cs.c.node.Lease()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.claim != 0 && ch.epoch == epoch && ch.broken == nil
}

// Acquire claims sona in etcd unless this member holds it, then catches
// the local chain up to the acknowledged head (staged appends first, then
// from the members that hold it).
func (cs *chains) Acquire(ctx context.Context, sona string) (bool, error) {
	ch := cs.get(sona)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	_, epoch := cs.c.node.Lease()
	if ch.claim != 0 && ch.epoch == epoch && ch.broken == nil {
		return false, nil
	}
	for ch.running { // the writes of a lost claim are failing: let them finish
		ch.cond.Wait()
	}
	if !cs.c.node.Healthy() {
		return false, fmt.Errorf("%w: cannot take sona %s", ErrEtcdUnavailable, sona)
	}
	claim, head, headRev, err := cs.claim(ctx, sona)
	if err != nil {
		return false, err
	}
	if err := cs.catchUp(ctx, sona, head); err != nil {
		cs.release(sona, claim)
		return false, err
	}
	rec, err := cs.c.self.Sonas.Get(sona)
	if err != nil {
		cs.release(sona, claim)
		return false, err
	}
	ch.claim, ch.epoch, ch.head, ch.headRev, ch.rec, ch.broken = claim, epoch, head, headRev, rec, nil
	cs.c.log.Debug("owning sona", "sona", sona, "seq", head.Seq, "claim", claim)
	return true, nil
}

// claim takes sona's owner key for this member (or finds it already
// holds it) and reads the head. A sona etcd does not know but this member
// holds (a store from before the cluster) is registered with its local
// head.
func (cs *chains) claim(ctx context.Context, sona string) (claim int64, head Head, headRev int64, err error) {
	n := cs.c.node
	lease, _ := n.Lease()
	k := n.keys
	rctx, cancel := n.request(ctx)
	defer cancel()
	resp, err := n.client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.owner(sona)), "=", 0)).
		Then(clientv3.OpPut(k.owner(sona), n.self.ID, clientv3.WithLease(lease)), clientv3.OpGet(k.head(sona))).
		Else(clientv3.OpGet(k.owner(sona)), clientv3.OpGet(k.head(sona))).
		Commit()
	if err != nil {
		n.failed()
		return 0, Head{}, 0, fmt.Errorf("%w: claim sona %s: %v", ErrEtcdUnavailable, sona, err)
	}
	n.answered()
	if resp.Succeeded {
		claim = resp.Header.Revision
	} else {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 1 && string(kvs[0].Value) == n.self.ID && clientv3.LeaseID(kvs[0].Lease) == lease {
			claim = kvs[0].CreateRevision // ours already (an actor that restarted)
		} else {
			owner := ""
			if len(kvs) == 1 {
				owner = string(kvs[0].Value)
			}
			return 0, Head{}, 0, fmt.Errorf("%w: %s is owned by member %s", ErrNotOwner, sona, owner)
		}
	}
	hkv := resp.Responses[1].GetResponseRange().Kvs
	if len(hkv) == 1 {
		if err := json.Unmarshal(hkv[0].Value, &head); err != nil {
			cs.release(sona, claim)
			return 0, Head{}, 0, fmt.Errorf("%w: head of %s in etcd: %v", base.ErrCorrupt, sona, err)
		}
		return claim, head, hkv[0].ModRevision, nil
	}
	// etcd does not know the sona: register it if this member holds it.
	length, rec, err := localLength(cs.c.self, sona)
	if err == nil && rec == nil {
		err = fmt.Errorf("%w: sona %s", base.ErrNotFound, sona)
	}
	if err == nil {
		head, headRev, err = cs.register(ctx, rec, claim, length)
	}
	if err != nil {
		cs.release(sona, claim)
		return 0, Head{}, 0, err
	}
	return claim, head, headRev, nil
}

// register publishes a sona this member holds: its head, its name, its
// info; the claim must still be this member's.
func (cs *chains) register(ctx context.Context, rec *messages.Sona, claim, length int64) (Head, int64, error) {
	n := cs.c.node
	k := n.keys
	head := Head{Seq: length - 1, Replicas: []string{n.self.ID}}
	if rec.Head != nil {
		head.CID = *rec.Head
	}
	if rec.LastMemory != nil {
		head.Memory = *rec.LastMemory
	}
	hv, _ := json.Marshal(head)
	iv, _ := json.Marshal(sonaInfo{Name: rec.Name, CreatedAt: rec.CreatedAt})
	rctx, cancel := n.request(ctx)
	defer cancel()
	resp, err := n.client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(k.owner(rec.Uuid)), "=", claim),
			clientv3.Compare(clientv3.CreateRevision(k.head(rec.Uuid)), "=", 0)).
		Then(clientv3.OpPut(k.head(rec.Uuid), string(hv)), clientv3.OpPut(k.info(rec.Uuid), string(iv)),
			clientv3.OpPut(k.names(rec.Name)+rec.Uuid, "")).
		Commit()
	if err != nil {
		n.failed()
		return Head{}, 0, fmt.Errorf("%w: register sona %s: %v", ErrEtcdUnavailable, rec.Uuid, err)
	}
	if !resp.Succeeded {
		return Head{}, 0, fmt.Errorf("%w: registering sona %s", ErrFenced, rec.Uuid)
	}
	return head, resp.Header.Revision, nil
}

// sonaInfo is <prefix>/sona/<uuid>/info.
type sonaInfo struct {
	Name      string `json:"name"`
	CreatedAt int64  `json:"created_at"`
}

// release gives the owner key up if it is still this claim's.
func (cs *chains) release(sona string, claim int64) {
	n := cs.c.node
	rctx, cancel := n.request(context.Background())
	defer cancel()
	_, err := n.client.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(n.keys.owner(sona)), "=", claim)).
		Then(clientv3.OpDelete(n.keys.owner(sona))).Commit()
	if err != nil {
		cs.c.log.Debug("release sona", "sona", sona, "err", err) // the lease frees it anyway
	}
}

// Created makes a sona just created here durable in the cluster: this
// member claims it and registers it in etcd, R-1 replicas adopt it, and
// the head records them.
func (cs *chains) Created(ctx context.Context, rec *messages.Sona) error {
	if _, err := cs.Acquire(ctx, rec.Uuid); err != nil {
		return err
	}
	ch := cs.get(rec.Uuid)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	replicas, err := cs.c.replicate(ctx, rec, ch.claim, ch.head, nil, nil)
	if err == nil && len(replicas) > 0 {
		next := ch.head
		next.Replicas = append([]string{cs.c.node.self.ID}, replicas...)
		var rev int64
		if rev, err = cs.c.mover.move(ctx, rec.Uuid, ch.claim, ch.headRev, next); err == nil {
			ch.head, ch.headRev = next, rev
		}
	}
	if err != nil {
		ch.broken = err
		return fmt.Errorf("cluster: sona %s was created here but is not yet held by %d members: %w", rec.Uuid, cs.c.cfg.Replicas, err)
	}
	return nil
}

// Release gives sona up when its actor stops (passivation).
func (cs *chains) Release(sona string) {
	ch := cs.get(sona)
	ch.mu.Lock()
	for ch.running {
		ch.cond.Wait()
	}
	claim := ch.claim
	ch.claim, ch.broken = 0, nil
	ch.mu.Unlock()
	if claim != 0 {
		// Before the actor is gone: a successor activated at once must
		// not find the key of this claim (and take it for its own).
		cs.release(sona, claim)
	}
}

// catchUp brings the local chain to head: the local staged appends it
// covers (when they provably are its: see acknowledged), then what other
// members hold; staged appends past it are dropped (the head never
// reached them).
func (cs *chains) catchUp(ctx context.Context, sona string, head Head) error {
	self := cs.c.self
	length, _, err := localLength(self, sona)
	if err != nil {
		return err
	}
	if length-1 > head.Seq {
		return fmt.Errorf("%w: %s: this member's chain has %d ACTs, the acknowledged head is at seq %d", ErrDiverged, sona, length, head.Seq)
	}
	if length >= 0 && length-1 < head.Seq {
		st, err := readStaged(self.Store(), sona, length)
		if err != nil {
			return err
		}
		run, ok := acknowledged(st, length, head.committed())
		if !ok && len(st) > 0 {
			err = fmt.Errorf("%w: the staged appends from seq %d do not end at the head (seq %d)", ErrDiverged, length, head.Seq)
		} else {
			err = apply(ctx, self, sona, run)
		}
		if err != nil && !errors.Is(err, ErrDiverged) {
			return err
		} else if err != nil {
			cs.c.log.Warn("dropping staged appends that are not the acknowledged chain's", "sona", sona, "err", err)
			if err := dropStaged(ctx, self.Store(), sona, length); err != nil {
				return err
			}
		}
		if length, _, err = localLength(self, sona); err != nil {
			return err
		}
	}
	if length-1 < head.Seq {
		if err := cs.fetch(ctx, sona, length, head); err != nil {
			return err
		}
	}
	if head.Seq >= 0 {
		act, err := localAct(self, sona, head.Seq)
		if err != nil {
			return err
		}
		if act.String() != head.CID {
			return fmt.Errorf("%w: %s seq %d is %s here, %s in etcd", ErrDiverged, sona, head.Seq, act, head.CID)
		}
	}
	return dropStaged(ctx, self.Store(), sona, head.Seq+1)
}

// fetch appends seq from..head.Seq from the members head names, each
// append verified against its CID and the chain. from is -1 when this
// member does not hold the sona yet.
func (cs *chains) fetch(ctx context.Context, sona string, from int64, head Head) error {
	var errs []error
	for _, id := range head.Replicas {
		if id == cs.c.node.self.ID {
			continue
		}
		m, ok := cs.c.node.Member(id)
		if !ok {
			errs = append(errs, fmt.Errorf("member %s is not live", id))
			continue
		}
		ledgerTaken := false
		for {
			resp, err := cs.c.entries(ctx, m, sona, max(from, 0), head.Seq)
			if err != nil {
				errs = append(errs, fmt.Errorf("member %s: %w", id, err))
				break
			}
			if from < 0 {
				var err error
				if cs.c.isBackbone(sona) {
					err = cs.c.holdBackbone(ctx)
				} else {
					_, err = cs.c.self.Sonas.Adopt(ctx, resp.Sona)
				}
				if err != nil {
					return err
				}
				from = 0
			}
			if resp.Ledger != nil && cs.c.isBackbone(sona) && !ledgerTaken {
				// The backbone's ledger as the member that holds it has
				// it; its staged appends' own ledgers come after.
				if err := cs.c.self.Store().Update(ctx, ledgerOp(resp.Ledger)); err != nil {
					return err
				}
				ledgerTaken = true
			}
			if from > head.Seq {
				return nil
			}
			if len(resp.Appends) == 0 {
				errs = append(errs, fmt.Errorf("member %s lacks seq %d", id, from))
				break
			}
			if err := apply(ctx, cs.c.self, sona, resp.Appends); err != nil {
				return err
			}
			from += int64(len(resp.Appends))
		}
	}
	return fmt.Errorf("%w: sona %s: no live member holds seq %d..%d (%v)", ErrNoReplicas, sona, max(from, 0), head.Seq, errors.Join(errs...))
}

// Write queues a for the sona's pipeline.
func (cs *chains) Write(ctx context.Context, a *model.Append) actors.Settling {
	return cs.write(ctx, a.Sona, a, nil)
}

// write queues an append (a), a change of the backbone's ledger, or both,
// for sona's pipeline.
func (cs *chains) write(ctx context.Context, sona string, a *model.Append, ledger *messages.Ledger) *write {
	w := &write{ctx: ctx, a: a, ledger: ledger, done: make(chan struct{})}
	ch := cs.get(sona)
	ch.mu.Lock()
	_, epoch := cs.c.node.Lease()
	switch {
	case ch.broken != nil:
		ch.mu.Unlock()
		w.settle(ch.broken)
		return w
	case ch.claim == 0 || ch.epoch != epoch:
		ch.mu.Unlock()
		w.settle(fmt.Errorf("%w: %s", ErrFenced, sona))
		return w
	case !cs.c.node.Healthy():
		ch.broken = ErrEtcdUnavailable
		ch.mu.Unlock()
		w.settle(fmt.Errorf("%w: writes to %s are refused until it answers", ErrEtcdUnavailable, sona))
		return w
	}
	ch.queue = append(ch.queue, w)
	if !ch.running {
		ch.running = true
		go cs.run(ch)
	}
	ch.mu.Unlock()
	return w
}

// run carries out the queued writes of ch, a batch at a time, until the
// queue is empty.
func (cs *chains) run(ch *chain) {
	for {
		ch.mu.Lock()
		// A write that appends nothing (the backbone's ledger) is a
		// batch of its own.
		batch := ch.queue
		n := len(batch)
		if i := slices.IndexFunc(batch, func(w *write) bool { return w.a == nil }); i >= 0 {
			n = max(i, 1)
		}
		batch, ch.queue = batch[:n], slices.Clone(batch[n:])
		if len(batch) == 0 {
			ch.running = false
			ch.cond.Broadcast()
			ch.mu.Unlock()
			return
		}
		broken, claim, head, headRev, rec := ch.broken, ch.claim, ch.head, ch.headRev, ch.rec
		ch.mu.Unlock()
		if broken == nil {
			var newHead Head
			var newRev int64
			if batch[0].a == nil {
				newHead, newRev, broken = cs.commitLedger(ch.id, rec, claim, head, headRev, batch[0].ledger)
			} else {
				newHead, newRev, broken = cs.commit(ch.id, rec, claim, head, headRev, batch)
			}
			ch.mu.Lock()
			if broken == nil {
				ch.head, ch.headRev = newHead, newRev
			} else if ch.broken == nil {
				ch.broken = broken // step down: the next Acquire reads the head again
				cs.c.log.Warn("stepping down from a sona", "sona", ch.id, "err", broken)
			}
			ch.mu.Unlock()
		}
		for _, w := range batch {
			w.settle(broken)
		}
	}
}

// commit carries out one batch: stage here and on the replicas, move the
// head by compare-and-set, append locally.
func (cs *chains) commit(sona string, rec *messages.Sona, claim int64, head Head, headRev int64, batch []*write) (Head, int64, error) {
	self := cs.c.self
	ctx, cancel := context.WithTimeout(context.Background(), cs.c.cfg.PeerTimeout.D()+2*cs.c.cfg.EtcdTimeout.D())
	defer cancel()
	recs := make([]*messages.StagedAppend, len(batch))
	for i, w := range batch {
		if w.a.Seq != head.Seq+1+int64(i) {
			return Head{}, 0, fmt.Errorf("%w: %s: append planned at seq %d, the acknowledged head is at %d", base.ErrChainConflict, sona, w.a.Seq, head.Seq)
		}
		sa, err := staged(self, w.a, claim)
		if err != nil {
			return Head{}, 0, err
		}
		sa.Ledger = w.ledger
		recs[i] = sa
	}
	op, err := stageOp(sona, recs)
	if err != nil {
		return Head{}, 0, err
	}
	local := self.Store().Submit(op)
	replicas, err := cs.c.replicate(ctx, rec, claim, head, recs, nil)
	if err != nil {
		return Head{}, 0, err
	}
	if err := local.Wait(ctx); err != nil {
		return Head{}, 0, err
	}
	last := batch[len(batch)-1].a
	next := Head{Seq: last.Seq, CID: last.Act.String(), Memory: last.Item.CID.String(), Replicas: append([]string{cs.c.node.self.ID}, replicas...)}
	rev, err := cs.c.mover.move(ctx, sona, claim, headRev, next)
	if err != nil {
		return Head{}, 0, err
	}
	// The head moved: the appends are the chain's. Into the local chain.
	var p *store.Pending
	for _, w := range batch {
		appendOp, key, ledger := self.Chains.Op(w.a), stagedKey(sona, w.a.Seq), ledgerOp(w.ledger)
		p = self.Store().SubmitTraced(w.ctx, func(tx store.Tx) error {
			if err := appendOp(tx); err != nil {
				return err
			}
			tx.Delete(key)
			return ledger(tx)
		})
	}
	if err := p.Wait(ctx); err != nil {
		// Acknowledged in the cluster (the head moved) but not appended
		// here: step down; the next owner (or this one) catches up.
		return Head{}, 0, fmt.Errorf("cluster: %s: the head moved to seq %d but the local append failed (the write is in the chain; retry reads it): %w", sona, last.Seq, err)
	}
	return next, rev, nil
}

// commitLedger carries out a backbone's consensus write that appends
// nothing (a pending version, a conflict): the ledger goes to the
// replicas, the head is moved to name them (by compare-and-set on this
// member's claim: the write's fence), then the ledger is taken here.
func (cs *chains) commitLedger(sona string, rec *messages.Sona, claim int64, head Head, headRev int64, ledger *messages.Ledger) (Head, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cs.c.cfg.PeerTimeout.D()+2*cs.c.cfg.EtcdTimeout.D())
	defer cancel()
	replicas, err := cs.c.replicate(ctx, rec, claim, head, nil, ledger)
	if err != nil {
		return Head{}, 0, err
	}
	next := head
	next.Replicas = append([]string{cs.c.node.self.ID}, replicas...)
	rev, err := cs.c.mover.move(ctx, sona, claim, headRev, next)
	if err != nil {
		return Head{}, 0, err
	}
	if err := cs.c.self.Store().Update(ctx, ledgerOp(ledger)); err != nil {
		return Head{}, 0, fmt.Errorf("cluster: %s: the replicas took the backbone's ledger but this member could not: %w", sona, err)
	}
	return next, rev, nil
}

// replicaCandidates are the other live members in sona's rendezvous
// order: its replicas are the first R-1 of them that take its appends.
func (c *Cluster) replicaCandidates(sona string) []string {
	var ids []string
	for _, m := range c.node.Members() {
		if m.ID != c.node.self.ID {
			ids = append(ids, m.ID)
		}
	}
	return Rank(sona, ids)
}

// replicate stages recs (or, for the backbone, a ledger) on R-1
// replicas (the first live members in the sona's rendezvous order that
// take them) and returns their ids. The backbone is staged on every live
// member (every sona's recall reads it), R-1 of which must take it.
func (c *Cluster) replicate(ctx context.Context, rec *messages.Sona, claim int64, head Head, recs []*messages.StagedAppend, ledger *messages.Ledger) ([]string, error) {
	need := c.cfg.Replicas - 1
	candidates := c.replicaCandidates(rec.Uuid)
	want := need
	if c.isBackbone(rec.Uuid) {
		want = len(candidates)
	}
	if want == 0 {
		return nil, nil
	}
	if len(candidates) < need {
		return nil, fmt.Errorf("%w: sona %s needs %d replicas, %d other members are live", ErrNoReplicas, rec.Uuid, need, len(candidates))
	}
	type result struct {
		id  string
		err error
	}
	var done []string
	var errs []error
	next := 0
	for len(done) < want && next < len(candidates) {
		n := min(want-len(done), len(candidates)-next)
		results := make(chan result, n)
		for _, id := range candidates[next : next+n] {
			go func() { results <- result{id, c.stageOnLive(ctx, id, rec, claim, head, recs, ledger)} }()
		}
		next += n
		for range n {
			r := <-results
			if r.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.id, r.err))
				continue
			}
			done = append(done, r.id)
		}
	}
	if len(done) < need {
		return nil, fmt.Errorf("%w: sona %s: %d of %d replicas took the append: %v", ErrNoReplicas, rec.Uuid, len(done), need, errors.Join(errs...))
	}
	slices.Sort(done)
	return done, nil
}

// stageOnLive is stageOn cut short when member id leaves the cluster (a
// member paused past its lease would hold the write up until the peer
// timeout).
func (c *Cluster) stageOnLive(ctx context.Context, id string, rec *messages.Sona, claim int64, head Head, recs []*messages.StagedAppend, ledger *messages.Ledger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gone, unwatch := c.node.Gone(id)
	defer unwatch()
	go func() {
		select {
		case <-gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	return c.stageOn(ctx, id, rec, claim, head, recs, ledger)
}

// stageOn stages recs on member id, first sending what it lacks of the
// chain.
func (c *Cluster) stageOn(ctx context.Context, id string, rec *messages.Sona, claim int64, head Head, recs []*messages.StagedAppend, ledger *messages.Ledger) error {
	m, ok := c.node.Member(id)
	if !ok {
		return fmt.Errorf("member %s left", id)
	}
	req := &messages.StageRequest{Sona: rec, Owner: c.node.self.ID, Claim: claim, Committed: head.committed(), Appends: recs, Ledger: ledger}
	for range 3 {
		resp, err := c.stage(ctx, m, req)
		if err != nil {
			return err
		}
		if resp.Ok {
			return nil
		}
		// The replica lacks seq need_from..: send the chain from there.
		first := head.Seq + 1
		if len(recs) > 0 {
			first = recs[0].Seq
		}
		if resp.NeedFrom < 0 || resp.NeedFrom >= first {
			return fmt.Errorf("member %s asks for seq %d, this batch starts at %d", id, resp.NeedFrom, first)
		}
		missing, err := entries(c.self, rec.Uuid, resp.NeedFrom, first-1)
		if err != nil {
			return err
		}
		if int64(len(missing)) != first-resp.NeedFrom {
			return fmt.Errorf("this member lacks seq %d..%d of its own chain", resp.NeedFrom, first-1)
		}
		for _, sa := range missing {
			sa.Claim = claim
		}
		// Catch it up in chunks, each staged, then applied as committed.
		for i := 0; i < len(missing); i += 256 {
			chunk := missing[i:min(i+256, len(missing))]
			committed := &messages.ChainHead{Seq: chunk[0].Seq - 1}
			if committed.Seq >= 0 {
				committed.Act = missingAct(missing, i-1, c.self, rec.Uuid, committed.Seq)
			}
			r, err := c.stage(ctx, m, &messages.StageRequest{Sona: rec, Owner: c.node.self.ID, Claim: claim, Committed: committed, Appends: chunk})
			if err != nil {
				return err
			}
			if !r.Ok {
				return fmt.Errorf("member %s refused the chain from seq %d (needs %d)", id, chunk[0].Seq, r.NeedFrom)
			}
		}
	}
	return fmt.Errorf("member %s did not take the append after catching up", id)
}

// missingAct is the ACT at seq: from the catch-up list when it has it,
// else from the local chain.
func missingAct(list []*messages.StagedAppend, i int, self *memory.Self, sona string, seq int64) []byte {
	if i >= 0 && i < len(list) {
		return list[i].Act
	}
	if act, err := localAct(self, sona, seq); err == nil {
		return act.Bytes()
	}
	return nil
}
