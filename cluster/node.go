package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
)

// Member is one member of the cluster as it registered in etcd.
type Member struct {
	// ID is the member's identity, kept in its data directory
	// (memoria.member): the same across restarts.
	ID string `json:"id"`
	// URL is where the member's REST API answers (cluster.advertise).
	URL string `json:"url"`
	// Peer is the base URL of its peer traffic.
	Peer string `json:"peer"`
	// Started is when this incarnation joined (unix milliseconds).
	Started int64 `json:"started"`
	// Version is the member's build (api.Version).
	Version string `json:"version"`
}

// NodeOptions configure Join.
type NodeOptions struct {
	Config config.Cluster
	// Self is this member's record (ID, URL, Peer, Version; Started is
	// set by Join).
	Self  Member
	Log   *slog.Logger
	Clock clock.Clock
}

// Node is this process's membership: its etcd client, its lease (which
// every key it owns is bound to), and the live members it sees. When the
// lease is lost (etcd unreachable for longer than the lease, or this
// process paused past it) the node is fenced: OnFence's listeners hear
// it before anything else happens, and the node joins again under a new
// lease.
type Node struct {
	cfg    config.Cluster
	client *clientv3.Client
	log    *slog.Logger
	clock  clock.Clock
	self   Member
	keys   keys

	mu      sync.RWMutex
	members map[string]Member
	lease   clientv3.LeaseID
	epoch   uint64 // bumped by every lease: a claim made under an older one is void
	fenceFn []func()
	changed []func()                          // hear membership changes
	gone    map[string]map[chan struct{}]bool // closed when the member leaves

	lastOK atomic.Int64 // unix nanos of etcd's last answer (keep-alive or request)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Errors of the cluster, classified (errors.Is). The retryable ones are
// actors.ErrUnavailable too (503 from the API); a divergence is
// base.ErrCorrupt.
var (
	// ErrEtcdUnavailable: etcd did not answer in time; writes fail, reads go on.
	ErrEtcdUnavailable = fmt.Errorf("%w: cluster: etcd is unavailable", actors.ErrUnavailable)
	// ErrFenced: this member lost its lease or its ownership of a sona
	// while writing; nothing of the write was acknowledged.
	ErrFenced = fmt.Errorf("%w: cluster: fenced (this member no longer owns the sona)", actors.ErrUnavailable)
	// ErrNotOwner: another member owns the sona.
	ErrNotOwner = fmt.Errorf("%w: cluster: another member owns the sona", actors.ErrUnavailable)
	// ErrNoReplicas: too few live members hold or can hold the sona.
	ErrNoReplicas = fmt.Errorf("%w: cluster: too few members available", actors.ErrUnavailable)
	// ErrDiverged: two copies of a chain disagree (never expected: a bug
	// or damage).
	ErrDiverged = fmt.Errorf("%w: cluster: copies of a chain diverged", base.ErrCorrupt)
)

// Join connects to etcd, registers this member under a new lease and
// starts keeping it alive and watching the others. A previous
// incarnation of the same member (the same data directory, so it is
// dead: the directory is locked) is removed first, with its lease and
// every sona it owned.
func Join(ctx context.Context, o NodeOptions) (*Node, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.Or(o.Clock)
	cl, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Config.Endpoints(),
		DialTimeout: o.Config.EtcdTimeout.D(),
		Logger:      zap.NewNop(),
		// Keep-alives of the gRPC connection find a dead etcd sooner.
		DialKeepAliveTime:    o.Config.LeaseTTL.D(),
		DialKeepAliveTimeout: o.Config.EtcdTimeout.D(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEtcdUnavailable, err)
	}
	n := &Node{cfg: o.Config, client: cl, log: o.Log.With("component", "cluster"), clock: o.Clock, self: o.Self,
		keys: keys{o.Config.Prefix}, members: map[string]Member{}}
	n.self.Started = n.clock.Now().UnixMilli()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.register(ctx, true); err != nil {
		n.cancel()
		cl.Close()
		return nil, fmt.Errorf("cluster: join %s: %w", strings.Join(o.Config.Endpoints(), ","), err)
	}
	n.wg.Add(1)
	go n.keepAlive()
	return n, nil
}

// Client is the etcd client (ownership and heads use it).
func (n *Node) Client() *clientv3.Client { return n.client }

// Self is this member's record.
func (n *Node) Self() Member { return n.self }

// Members are the live members, by ID.
func (n *Node) Members() []Member {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]Member, 0, len(n.members))
	for _, m := range n.members {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Member returns the live member id.
func (n *Node) Member(id string) (Member, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	m, ok := n.members[id]
	return m, ok
}

// Lease is the current lease and its epoch.
func (n *Node) Lease() (clientv3.LeaseID, uint64) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.lease, n.epoch
}

// OnFence has fn called (on the keep-alive goroutine) whenever the lease
// is lost, before the node joins again.
func (n *Node) OnFence(fn func()) {
	n.mu.Lock()
	n.fenceFn = append(n.fenceFn, fn)
	n.mu.Unlock()
}

// OnChange has fn called (on the watch goroutine) after the member list
// changed.
func (n *Node) OnChange(fn func()) {
	n.mu.Lock()
	n.changed = append(n.changed, fn)
	n.mu.Unlock()
}

// Healthy reports whether etcd answered within the last lease TTL.
func (n *Node) Healthy() bool {
	last := n.lastOK.Load()
	return last != 0 && n.clock.Now().UnixNano()-last < int64(n.cfg.LeaseTTL.D())
}

// answered records that etcd just answered.
func (n *Node) answered() { n.lastOK.Store(n.clock.Now().UnixNano()) }

// failed records a failed etcd request: until etcd answers again, writes
// fail at once instead of each waiting for a timeout.
func (n *Node) failed() { n.lastOK.Store(0) }

// request bounds one etcd request by cluster.etcd_timeout.
func (n *Node) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.cfg.EtcdTimeout.D())
}

// register grants a lease, removes a previous incarnation (first only),
// publishes this member, and reads the member list.
func (n *Node) register(ctx context.Context, first bool) error {
	rctx, cancel := n.request(ctx)
	defer cancel()
	key := n.keys.member(n.self.ID)
	if first {
		old, err := n.client.Get(rctx, key)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrEtcdUnavailable, err)
		}
		if len(old.Kvs) == 1 && old.Kvs[0].Lease != 0 {
			// The same data directory cannot be open twice: that member is
			// dead. Revoking its lease frees its sonas now, not at expiry.
			if _, err := n.client.Revoke(rctx, clientv3.LeaseID(old.Kvs[0].Lease)); err != nil && !isLeaseNotFound(err) {
				return fmt.Errorf("%w: revoke the lease of this member's previous run: %v", ErrEtcdUnavailable, err)
			}
			n.log.Info("removed this member's previous run", "lease", fmt.Sprintf("%x", old.Kvs[0].Lease))
		}
	}
	grant, err := n.client.Grant(rctx, int64(n.cfg.LeaseTTL.D()/time.Second))
	if err != nil {
		return fmt.Errorf("%w: grant a lease: %v", ErrEtcdUnavailable, err)
	}
	rec, err := json.Marshal(n.self)
	if err != nil {
		return err
	}
	if _, err := n.client.Put(rctx, key, string(rec), clientv3.WithLease(grant.ID)); err != nil {
		return fmt.Errorf("%w: register: %v", ErrEtcdUnavailable, err)
	}
	list, err := n.client.Get(rctx, n.keys.members(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("%w: list members: %v", ErrEtcdUnavailable, err)
	}
	members := n.parseMembers(list.Kvs)
	n.mu.Lock()
	n.lease = grant.ID
	n.epoch++
	n.members = members
	n.mu.Unlock()
	n.answered()
	n.notify()
	n.wg.Add(1)
	go n.watch(list.Header.Revision + 1)
	n.log.Info("joined the cluster", "member", n.self.ID, "members", len(members), "lease", fmt.Sprintf("%x", grant.ID))
	return nil
}

// parseMembers reads member records, skipping malformed ones.
func (n *Node) parseMembers(kvs []*mvccpb.KeyValue) map[string]Member {
	members := map[string]Member{}
	for _, kv := range kvs {
		var m Member
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			n.log.Warn("ignoring a malformed member record", "key", string(kv.Key), "err", err)
			continue
		}
		members[m.ID] = m
	}
	return members
}

// isLeaseNotFound reports whether etcd refused a lease operation because
// the lease is gone (expired or revoked already).
func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// keepAlive keeps the lease alive; when it is lost, fences and joins
// again.
func (n *Node) keepAlive() {
	defer n.wg.Done()
	for {
		lease, epoch := n.Lease()
		ch, err := n.client.KeepAlive(n.ctx, lease)
		if err == nil {
			for range ch {
				n.answered()
			}
		}
		if n.ctx.Err() != nil {
			return
		}
		n.fence(epoch)
		// Join again under a new lease, as soon as etcd answers.
		for n.ctx.Err() == nil {
			if err := n.register(n.ctx, false); err == nil {
				break
			} else {
				n.log.Warn("cannot rejoin the cluster yet", "err", err)
			}
			t := n.clock.NewTimer(n.cfg.LeaseTTL.D() / 2)
			select {
			case <-n.ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
}

// fence voids everything claimed under the lease of epoch.
func (n *Node) fence(epoch uint64) {
	n.failed()
	n.mu.Lock()
	if n.epoch != epoch {
		n.mu.Unlock()
		return
	}
	n.epoch++ // claims of the lost lease no longer count
	// The member list stays as it was last seen: while etcd is away the
	// members probably are not, and reads are still routed to them.
	fns := slices.Clone(n.fenceFn)
	n.mu.Unlock()
	n.log.Warn("lost the cluster lease: fenced, stepping down from every sona", "member", n.self.ID)
	for _, fn := range fns {
		fn()
	}
	n.notify()
}

// watch follows the member list from revision rev until the node closes
// or its lease is replaced.
func (n *Node) watch(rev int64) {
	defer n.wg.Done()
	_, epoch := n.Lease()
	ctx, cancel := context.WithCancel(n.ctx)
	defer cancel()
	for ctx.Err() == nil {
		wch := n.client.Watch(clientv3.WithRequireLeader(ctx), n.keys.members(), clientv3.WithPrefix(), clientv3.WithRev(rev))
		for resp := range wch {
			if _, e := n.Lease(); e != epoch {
				return // a new registration watches on its own
			}
			if err := resp.Err(); err != nil {
				n.log.Debug("member watch", "err", err)
				break
			}
			n.answered()
			n.mu.Lock()
			for _, ev := range resp.Events {
				id := strings.TrimPrefix(string(ev.Kv.Key), n.keys.members())
				switch ev.Type {
				case clientv3.EventTypePut:
					var m Member
					if err := json.Unmarshal(ev.Kv.Value, &m); err == nil {
						if _, known := n.members[id]; !known && id != n.self.ID {
							n.log.Info("a member joined", "member", id, "url", m.URL)
						}
						n.members[id] = m
					}
				case clientv3.EventTypeDelete:
					if _, known := n.members[id]; known && id != n.self.ID {
						n.log.Info("a member left (its lease ended or it left)", "member", id)
					}
					delete(n.members, id)
				}
			}
			n.mu.Unlock()
			rev = resp.Header.Revision + 1
			if len(resp.Events) > 0 {
				n.notify()
			}
		}
		if _, e := n.Lease(); e != epoch {
			return
		}
		// The watch broke (etcd gone, or compacted past rev): read the
		// list again when etcd answers.
		if err := n.relist(ctx, &rev); err != nil {
			t := n.clock.NewTimer(n.cfg.LeaseTTL.D() / 2)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
}

// relist reads the member list again and sets rev after it.
func (n *Node) relist(ctx context.Context, rev *int64) error {
	rctx, cancel := n.request(ctx)
	defer cancel()
	list, err := n.client.Get(rctx, n.keys.members(), clientv3.WithPrefix())
	if err != nil {
		return err
	}
	members := n.parseMembers(list.Kvs)
	n.mu.Lock()
	n.members = members
	n.mu.Unlock()
	*rev = list.Header.Revision + 1
	n.answered()
	n.notify()
	return nil
}

// Gone returns a channel closed once member id is no longer live (at
// once if it is not now), and a function that stops watching.
func (n *Node) Gone(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.members[id]; !ok {
		close(ch)
		return ch, func() {}
	}
	if n.gone == nil {
		n.gone = map[string]map[chan struct{}]bool{}
	}
	if n.gone[id] == nil {
		n.gone[id] = map[chan struct{}]bool{}
	}
	n.gone[id][ch] = true
	return ch, func() {
		n.mu.Lock()
		delete(n.gone[id], ch)
		n.mu.Unlock()
	}
}

func (n *Node) notify() {
	n.mu.Lock()
	for id, chs := range n.gone {
		if _, ok := n.members[id]; !ok {
			for ch := range chs {
				close(ch)
			}
			delete(n.gone, id)
		}
	}
	fns := slices.Clone(n.changed)
	n.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Close leaves the cluster: the lease is revoked, so this member's sonas
// are free for others at once, and the client is closed.
func (n *Node) Close() error {
	lease, _ := n.Lease()
	rctx, cancel := n.request(context.Background())
	_, err := n.client.Revoke(rctx, lease)
	cancel()
	n.cancel()
	n.wg.Wait()
	if cerr := n.client.Close(); err == nil {
		err = cerr
	}
	if err != nil && !isLeaseNotFound(err) {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	return nil
}
