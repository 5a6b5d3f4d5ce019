package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// mover moves heads in etcd, each by compare-and-set on its owner's claim
// and its previous head, many in one transaction: the head moves of one
// group commit (the writes that became durable together) share one etcd
// round trip, so throughput does not fall to etcd's per-transaction rate.
type mover struct {
	n    *Node
	reqs chan *moveReq
	done chan struct{}
}

type moveReq struct {
	sona    string
	claim   int64 // the owner key's create revision must be this
	headRev int64 // the head key's mod revision must be this (0: absent)
	value   string
	result  chan moveResult
}

type moveResult struct {
	rev int64
	err error
}

// maxMoves bounds one transaction: each move is two compares and a put,
// and etcd takes at most 128 operations of each kind by default.
const maxMoves = 60

func newMover(n *Node) *mover {
	m := &mover{n: n, reqs: make(chan *moveReq, 1024), done: make(chan struct{})}
	go m.loop()
	return m
}

// move sets sona's head to head if the claim and the previous head still
// hold, and returns the head key's new mod revision. A failed compare is
// ErrFenced; etcd not answering is ErrEtcdUnavailable (the head may or may
// not have moved: the next owner reads it).
func (m *mover) move(ctx context.Context, sona string, claim, headRev int64, head Head) (int64, error) {
	v, err := json.Marshal(head)
	if err != nil {
		return 0, err
	}
	r := &moveReq{sona: sona, claim: claim, headRev: headRev, value: string(v), result: make(chan moveResult, 1)}
	select {
	case m.reqs <- r:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case res := <-r.result:
		return res.rev, res.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: moving the head of %s: %v", ErrEtcdUnavailable, sona, ctx.Err())
	}
}

// close stops the mover after the moves queued.
func (m *mover) close() {
	close(m.reqs)
	<-m.done
}

func (m *mover) loop() {
	defer close(m.done)
	for first := range m.reqs {
		batch := []*moveReq{first}
	fill:
		for len(batch) < maxMoves {
			select {
			case r, ok := <-m.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		m.commit(batch)
	}
}

// commit moves a batch in one transaction; when a compare fails, each
// move is tried alone so that only the fenced ones fail.
func (m *mover) commit(batch []*moveReq) {
	k := m.n.keys
	cmps := make([]clientv3.Cmp, 0, 2*len(batch))
	ops := make([]clientv3.Op, 0, len(batch))
	for _, r := range batch {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.owner(r.sona)), "=", r.claim))
		if r.headRev == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k.head(r.sona)), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k.head(r.sona)), "=", r.headRev))
		}
		ops = append(ops, clientv3.OpPut(k.head(r.sona), r.value))
	}
	ctx, cancel := m.n.request(context.Background())
	resp, err := m.n.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	cancel()
	switch {
	case err != nil:
		m.n.failed()
		for _, r := range batch {
			r.result <- moveResult{err: fmt.Errorf("%w: moving the head of %s (it may or may not have moved): %v", ErrEtcdUnavailable, r.sona, err)}
		}
	case resp.Succeeded:
		m.n.answered()
		for _, r := range batch {
			r.result <- moveResult{rev: resp.Header.Revision}
		}
	case len(batch) == 1:
		m.n.answered()
		r := batch[0]
		r.result <- moveResult{err: fmt.Errorf("%w: the owner or the head of %s changed in etcd", ErrFenced, r.sona)}
	default:
		for _, r := range batch {
			m.commit([]*moveReq{r})
		}
	}
}
