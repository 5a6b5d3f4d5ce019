package meta

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/store"
)

// Touch is the operation that records that memories were recalled: one
// more access each, and the activity tick from which their decay counts —
// the length of sonas[i], memory i's first sona, as activity reports it
// (false: the sona is gone, or "", the tick stays). It writes their hot
// state only.
func Touch(cids []cid.Cid, sonas []string, activity func(sona string) (int64, bool)) store.Op {
	return touch(UpdateHot, cids, sonas, activity)
}

// Touch is the package's Touch, reading through the cache (Store.UpdateHot)
// — or, buffered (BufferTouches), an op that writes nothing: the buffer
// writes the touches later.
func (m *Store) Touch(cids []cid.Cid, sonas []string, activity func(sona string) (int64, bool)) store.Op {
	if m.touches != nil {
		return m.touches.op(cids, sonas, activity)
	}
	return touch(m.UpdateHot, cids, sonas, activity)
}

func touch(update func([]cid.Cid, func(*Hot, cid.Cid)) store.Op, cids []cid.Cid, sonas []string, activity func(sona string) (int64, bool)) store.Op {
	first := make(map[cid.Cid]string, len(cids))
	for i, c := range cids {
		first[c] = sonas[i]
	}
	return update(cids, func(h *Hot, c cid.Cid) {
		h.AccessCount++
		if sona := first[c]; sona != "" {
			if tick, ok := activity(sona); ok {
				h.LastAccessTick = max(h.LastAccessTick, tick)
			}
		}
	})
}

// Used is a memory a response drew on, with its recall score.
type Used struct {
	CID   cid.Cid
	Score float64
}

// Reinforce raises the importance of the memories a response used: each
// takes an EWMA step toward its signal, its score relative to the best
// score of the recall (so the strongest support moves most), and the rise
// propagates along its edges with the configured per-hop decay and depth.
// Importance only rises here: a signal below a memory's importance leaves
// it as it is.
//
// The walk along the edges and that comparison run in a view, in the
// caller's goroutine, and the committer gets only the memories whose
// importance the view shows below their signal: a memory's edges never
// change, and its importance never falls — it rises here, in
// ReinforceDuplicate and with the evaluator's priority (a maximum) —, so
// a memory the view shows at or above its signal is one the commit would
// leave as it is. A long-lived sona's response reaches hundreds of
// memories within two hops, of which a few tens rise (issue 15: the walk
// and the reads of ~650 hot states were a millisecond of the committer's
// time an advance after 6,500 advances of one sona). The view reads the
// hot state only of a memory not known to hold its signal already: the
// floors keep what earlier walks read, and the commits keep them
// (floors.go).
func (m *Store) Reinforce(used []Used) *store.Pending {
	rc := m.rc
	seeds := seedsOf(used)
	var (
		rising  []cid.Cid
		targets = map[cid.Cid]float64{} // rising's signals
	)
	w := walks.Get().(*walk)
	defer walks.Put(w)
	err := m.st.View(func(r store.Reader) error {
		told := store.ToldBefore(r)
		for c, target := range m.propagate(r, seeds, w) {
			key := m.floors.hash(c.KeyString())
			if m.floors.atLeast(key, target) {
				continue
			}
			h, ok, err := m.hotIn(r, c)
			if err != nil {
				return err
			}
			if ok {
				m.floors.fill(key, h.Importance, told)
			}
			if !ok || h.Importance < target { // not stored here: the committer tells
				rising = append(rising, c)
				targets[c] = target
			}
		}
		return nil
	})
	if err != nil {
		return m.st.Defer(func(store.Tx) error { return err })
	}
	slices.SortFunc(rising, func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) })
	return m.st.Defer(m.UpdateHot(rising, func(h *Hot, c cid.Cid) {
		if target := targets[c]; target > h.Importance {
			h.Importance += rc.ImportanceAlpha * (target - h.Importance)
		}
	}))
}

// seedsOf is the signal of each memory used: its score relative to the
// best (the strongest support moves most).
func seedsOf(used []Used) map[cid.Cid]float64 {
	best := 0.0
	for _, r := range used {
		best = math.Max(best, r.Score)
	}
	seeds := map[cid.Cid]float64{}
	if best > 0 {
		for _, r := range used {
			seeds[r.CID] = math.Max(seeds[r.CID], r.Score/best)
		}
	}
	return seeds
}

// propagate is the signal of each memory the seeds reach along their
// edges in r: a seed's own, decayed by ImportanceHopDecay a hop, up to
// ImportanceDepth hops and down to ImportanceFloor, the strongest where
// paths meet.
//
// The walk is breadth first, so a visit queued earlier is no deeper than
// one queued later: a visit of a memory already queued at least as
// strong would change nothing when its turn came (the earlier one sets
// its signal at least as high, and reaches at least as far, as strongly),
// and is not queued. A long-lived sona's response reaches the same few
// hundred memories along many edges: queued each time, the visits were
// 30 KB allocated an advance at 1,000 sonas (issue 15, stop 99).
//
// It walks in w (nil: a new walk), and the signal it returns is w's: it
// holds until w walks again.
func (m *Store) propagate(r store.Reader, seeds map[cid.Cid]float64, w *walk) map[cid.Cid]float64 {
	rc := m.rc
	if w == nil {
		w = newWalk()
	}
	clear(w.signal)
	clear(w.queued)
	signal, queued, queue := w.signal, w.queued, w.queue[:0]
	defer func() { w.queue = queue[:0] }()
	enqueue := func(c cid.Cid, strength float64, depth int) {
		if strength < rc.ImportanceFloor || queued[c] >= strength {
			return
		}
		queued[c] = strength
		queue = append(queue, visit{c, strength, depth})
	}
	for _, c := range slices.SortedFunc(maps.Keys(seeds), func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) }) {
		enqueue(c, seeds[c], 0)
	}
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		if signal[v.c] >= v.strength {
			continue
		}
		signal[v.c] = v.strength
		if v.depth == rc.ImportanceDepth {
			continue
		}
		mem, err := m.MemoryIn(r, v.c)
		if err != nil {
			continue // not a memory (or gone): nothing to propagate
		}
		for _, e := range mem.Edges {
			enqueue(e.Target, v.strength*rc.ImportanceHopDecay, v.depth+1)
		}
	}
	return signal
}

// walk is propagate's room: its signal, the strongest visit of each
// memory queued, and its queue, kept for the next walk (walks). A
// long-lived sona's response reaches hundreds of memories within two
// hops, and the maps grown anew at each walk were a ninth of the bytes
// an advance allocated at ten sonas (issue 15, stop 102).
type walk struct {
	signal, queued map[cid.Cid]float64
	queue          []visit
}

// visit is a memory queued by a walk, with its signal and depth.
type visit struct {
	c        cid.Cid
	strength float64
	depth    int
}

func newWalk() *walk {
	return &walk{signal: map[cid.Cid]float64{}, queued: map[cid.Cid]float64{}}
}

var walks = sync.Pool{New: func() any { return newWalk() }}

// ReinforceDuplicate reinforces a deduplicated memory: an importance step
// toward 1 and one more access, as if it had been stored again.
func (m *Store) ReinforceDuplicate(ctx context.Context, c cid.Cid) error {
	alpha := m.rc.ImportanceAlpha
	return m.st.Update(ctx, m.UpdateHot([]cid.Cid{c}, func(h *Hot, _ cid.Cid) {
		h.Importance += alpha * (1 - h.Importance)
		h.AccessCount++
	}))
}
