package actors

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/model"
)

// ChainWriter carries out the appends a sona's actor plans (Options.Chains).
// The default submits each to the store. A cluster member's (package
// cluster) also stages it on the chain's replicas and moves the chain's
// head in etcd, so that an append is done only once it is durable on R
// members and this member still owns the chain.
type ChainWriter interface {
	// Acquire makes this process the writer of sona's chain, or fails (a
	// retryable error when another member owns it or etcd is down). It is
	// called before every append and is cheap while the chain is held.
	// fresh reports that the local chain may have changed underneath the
	// actor (it was caught up), which must then read it again.
	Acquire(ctx context.Context, sona string) (fresh bool, err error)
	// Write carries out a, planned on the chain as the actor holds it:
	// the result settles once a is durable (and, in a cluster, fenced and
	// replicated) or failed. Writes of one sona are carried out in the
	// order they are made. ctx carries the caller's trace span.
	Write(ctx context.Context, a *model.Append) Settling
	// Release is told that sona's actor stopped.
	Release(sona string)
}

// Settling is a write that settles: Done is closed when it is done, and
// then Err says how (nil: durable). *store.Pending is one.
type Settling interface {
	Done() <-chan struct{}
	Err() error
}

// localChains writes to the store alone: one node.
type localChains struct{ self *memory.Self }

func (localChains) Acquire(context.Context, string) (bool, error) { return false, nil }

func (l localChains) Write(ctx context.Context, a *model.Append) Settling {
	return l.self.Store().SubmitTraced(ctx, l.self.Chains.Op(a))
}

func (localChains) Release(string) {}

// flights are the chain writes in flight in this process, by sona. A sona
// actor that (re)loads its chain waits for its own sona's — those of an
// incarnation that failed, or those planned after an append that failed
// — rather than for everything the store was given (Store.Barrier): that
// cost a group commit's round trip on every activation, with 10,000 sonas
// nearly every advance's. Writes to a chain that do not go through its
// actor (an import's sona records, a cluster member's catch-up) are
// durable before their writer goes on.
type flights struct {
	mu   sync.Mutex
	next uint64
	by   map[string]map[uint64]Settling
}

// add records p, a write of sona's chain; the actor calls done with the
// id once it settled.
func (f *flights) add(sona string, p Settling) (id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]map[uint64]Settling{}
	}
	if f.by[sona] == nil {
		f.by[sona] = map[uint64]Settling{}
	}
	f.next++
	f.by[sona][f.next] = p
	return f.next
}

// done forgets a write that settled.
func (f *flights) done(sona string, id uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.by[sona], id)
	if len(f.by[sona]) == 0 {
		delete(f.by, sona)
	}
}

// wait waits until every write of sona's chain in flight now has
// settled (the actor that made one may have failed before it heard).
func (f *flights) wait(ctx context.Context, sona string) error {
	f.mu.Lock()
	ps := maps.Clone(f.by[sona])
	f.mu.Unlock()
	for id, p := range ps {
		select {
		case <-p.Done():
			f.done(sona, id)
		case <-ctx.Done():
			return fmt.Errorf("waiting for the writes of sona %s in flight: %w", sona, ctx.Err())
		}
	}
	return nil
}
