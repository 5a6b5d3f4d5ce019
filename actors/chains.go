package actors

import (
	"context"

	"github.com/memoria-ai/memoria/memory"
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
	Write(ctx context.Context, a *memory.Append) Settling
	// Release is told that sona's actor stopped.
	Release(sona string)
}

// Settling is a write that settles: Done is closed when it is done, and
// then Err says how (nil: durable). *memory.Pending is one.
type Settling interface {
	Done() <-chan struct{}
	Err() error
}

// localChains writes to the store alone: one node.
type localChains struct{ self *memory.Self }

func (localChains) Acquire(context.Context, string) (bool, error) { return false, nil }

func (l localChains) Write(ctx context.Context, a *memory.Append) Settling {
	return l.self.Store().SubmitTraced(ctx, l.self.Chains.Op(a))
}

func (localChains) Release(string) {}
