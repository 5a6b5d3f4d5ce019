package actors

import (
	"context"
	"slices"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// RecallFunc runs a recall and submits its trace (Options.Recall).
// unanswered names what did not answer in time (in a cluster: members),
// the recall being made of the rest.
type RecallFunc func(ctx context.Context, q recall.Query) (out []*recall.Recalled, unanswered []string, err error)

// recall runs a chat step's or a query's recall. Without Options.Recall
// it is this store's, its trace returned for the step to submit; with
// it, the trace is submitted already and the members that did not answer
// are noted in caller's collector (CollectUnanswered), if any.
func (s *System) recall(ctx, caller context.Context, q recall.Query) ([]*recall.Recalled, recall.Trace, error) {
	if s.recaller == nil {
		return s.self.Recaller.Recall(ctx, q)
	}
	out, unanswered, err := s.recaller(ctx, q)
	if u, ok := caller.Value(unansweredKey{}).(*unansweredSet); ok && len(unanswered) > 0 {
		u.add(unanswered)
	}
	return out, nil, err
}

type unansweredKey struct{}

type unansweredSet struct {
	mu  sync.Mutex
	ids []string
}

func (u *unansweredSet) add(ids []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(u.ids, id) {
			u.ids = append(u.ids, id)
		}
	}
	slices.Sort(u.ids)
}

// CollectUnanswered returns ctx carrying a collector of the members the
// recalls of a chat step or query made under it left out (Advance,
// AdvanceStream and Query pass ctx on), and the function that lists them,
// sorted.
func CollectUnanswered(ctx context.Context) (context.Context, func() []string) {
	u := &unansweredSet{}
	return context.WithValue(ctx, unansweredKey{}, u), func() []string {
		u.mu.Lock()
		defer u.mu.Unlock()
		return slices.Clone(u.ids)
	}
}

// context is the caller's context (its values), or an empty one.
func (c *call) context() context.Context {
	if c == nil {
		return context.Background()
	}
	return c.ctx
}

// noteGathered remembers the memories a gathered recall of this step
// returned (Options.Recall set): other members may hold them and this
// one not.
func (r *advanceRun) noteGathered(rs []*recall.Recalled) {
	if r.a.sys.recaller == nil {
		return
	}
	r.gathered = make(map[cid.Cid]bool, len(rs))
	for _, rc := range rs {
		r.gathered[rc.CID] = true
	}
}

// linkGathered marks a memory of the step whose edges name what its
// gathered recall returned as Replicated: its edge targets were checked
// (each gathered block against its CID, by the member that gathered them)
// and may be other members' memories, not stored here.
func (r *advanceRun) linkGathered(item *model.Prepared) {
	for _, e := range item.Memory.Edges {
		if r.gathered[e.Target] {
			item.Replicated = true
			return
		}
	}
}
