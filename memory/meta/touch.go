package meta

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The touches' buffer: a recall records that it returned each of its
// memories (Touch: one more access, and the tick their decay counts
// from), and it did so in a write of each one's hot state (o/) — twenty
// keys a recall, each through the committer, Badger's memtable, its log
// and its compactions: a tenth of a recall's CPU at 100k memories.
// Buffered (Store.BufferTouches), a recall's touches are kept in memory,
// read back into every read of a memory's metadata in a view (MetaIn),
// and written every TouchOptions.Every: one write of each memory's hot
// state for all the recalls that returned it since.
//
// What is lost to a crash is at most that much of the memories' use: no
// one waits for it (recall's Trace is deferred), and it is not an
// acknowledged memory. An operation reads the hot state as stored (it
// may write it: the buffered touches are added when they are written).
// While a write of touches commits, and for a view begun before it, a
// read may count them twice or not at all for a moment.

// TouchOptions configure the touches' buffer.
type TouchOptions struct {
	// Every is how long touches wait in memory before they are written
	// (recall.touch_flush).
	Every time.Duration
	// Max is how many memories' touches may wait; past it they are
	// written at once. 0: 131,072 (about 12 MB).
	Max    int
	Clock  clock.Clock
	Logger *slog.Logger
}

// touched is what the recalls since the last write did to a memory.
type touched struct {
	count int64 // its accesses
	tick  int64 // the latest activity tick
}

func (d touched) add(o touched) touched {
	return touched{count: d.count + o.count, tick: max(d.tick, o.tick)}
}

func (d touched) apply(h *Hot) {
	h.AccessCount += d.count
	h.LastAccessTick = max(h.LastAccessTick, d.tick)
}

// touches holds the touches not yet written (see above).
type touches struct {
	m   *Store
	max int

	mu sync.RWMutex
	// pending are the touches since the last write began, by CID key;
	// due those it takes (all pending then), written a part at a time;
	// flushing the part in flight, until it commits (it stays, to be
	// written again, when it fails).
	pending, due map[string]touched
	flushing     *touchBatch
	// w writes: while its writes fail, they are tried every Every, and
	// past twice Max memories nothing more is buffered.
	w *store.BufferWriter // its timer armed while pending waits
}

type touchBatch struct{ touches map[string]touched }

// maxFlushTouches bounds one write's transaction: each memory's hot state
// is read and written in the committer, which other writes wait for.
const maxFlushTouches = 1024

// BufferTouches has m keep the recalls' touches in memory and write them
// through c (see above). Call it before the store's first write, and
// CloseTouches before the store closes.
func (m *Store) BufferTouches(c store.Committer, o TouchOptions) {
	t := &touches{m: m, max: o.Max,
		pending: map[string]touched{}, due: map[string]touched{}}
	if t.max <= 0 {
		t.max = 131_072
	}
	t.w = store.NewBufferWriter(&t.mu, c, t.flushOp, t.scheduleLocked,
		store.BufferWriterOptions{Every: o.Every, Clock: o.Clock, Logger: o.Logger, What: "touches: the buffered touches"})
	m.touches = t
}

// TouchesWaiting is how many memories' touches the buffer holds not yet
// written (those a write is writing too): what a crash would lose.
func (m *Store) TouchesWaiting() int {
	t := m.touches
	if t == nil {
		return 0
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	n := len(t.pending) + len(t.due)
	if t.flushing != nil {
		n += len(t.flushing.touches)
	}
	return n
}

// FlushTouches writes the touches buffered so far and waits until they
// are durable (an export's, a close's).
func (m *Store) FlushTouches(ctx context.Context) error {
	if m.touches == nil {
		return nil
	}
	return m.touches.flush(ctx)
}

// CloseTouches writes what is buffered and stops the buffer's timer.
func (m *Store) CloseTouches(ctx context.Context) error {
	t := m.touches
	if t == nil {
		return nil
	}
	err := t.flush(ctx)
	t.mu.Lock()
	t.w.Close()
	t.mu.Unlock()
	return err
}

// op is Touch buffered: an op that writes nothing and hands the
// touches to the buffer once the batch it shares commits.
func (t *touches) op(cids []cid.Cid, sonas []string, activity func(sona string) (int64, bool)) store.Op {
	return func(tx store.Tx) error {
		ds := make([]touched, len(cids))
		for i := range cids {
			ds[i].count = 1
			if sonas[i] != "" {
				if tick, ok := activity(sonas[i]); ok {
					ds[i].tick = tick
				}
			}
		}
		tx.OnCommit(func() { t.add(cids, ds) })
		return nil
	}
}

func (t *touches) add(cids []cid.Cid, ds []touched) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.w.Refuses(len(t.pending)+len(t.due), t.max) {
		return
	}
	for i, c := range cids {
		k := c.KeyString()
		t.pending[k] = t.pending[k].add(ds[i])
	}
	t.scheduleLocked()
}

// of is what the buffer holds of the memory under key.
func (t *touches) of(key string) (touched, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d, ok := t.pending[key]
	if e, in := t.due[key]; in {
		d, ok = d.add(e), true
	}
	if t.flushing != nil {
		if e, in := t.flushing.touches[key]; in {
			d, ok = d.add(e), true
		}
	}
	return d, ok
}

// scheduleLocked arms the timer for what waits, or has it written now
// when a write is under way (its next part) or too much waits.
func (t *touches) scheduleLocked() {
	if t.w.Busy() || t.w.Closed() || len(t.pending) == 0 && len(t.due) == 0 && t.flushing == nil {
		return
	}
	if !t.w.Failing() && (len(t.due) > 0 || t.flushing != nil || len(t.pending) >= t.max) {
		go t.kick()
		return
	}
	t.w.Arm(func() {
		t.mu.Lock()
		t.takeLocked()
		t.mu.Unlock()
		t.kick()
	})
}

// takeLocked makes every pending touch due.
func (t *touches) takeLocked() {
	for k, d := range t.pending {
		t.due[k] = t.due[k].add(d)
	}
	clear(t.pending)
}

// kick submits a write unless one is in flight or nothing waits (pending
// becomes due when nothing is); it returns the write in flight (nil:
// none).
func (t *touches) kick() *store.BufferWrite {
	return t.w.Kick(func() bool {
		if len(t.due) == 0 && t.flushing == nil {
			t.takeLocked()
		}
		return len(t.due) > 0 || t.flushing != nil
	})
}

// flush writes what is buffered when it is called, or returns the first
// failure. What recalls add meanwhile waits for the next.
func (t *touches) flush(ctx context.Context) error {
	t.mu.Lock()
	t.takeLocked()
	t.mu.Unlock()
	return t.w.Flush(ctx, t.kick, func() bool { return len(t.due) > 0 || t.flushing != nil })
}

// flushOp writes the touches flushing holds, taking up to
// maxFlushTouches of due's first when it holds none. It may run again (a
// batch split): it writes flushing again, which its commit then empties.
func (t *touches) flushOp(tx store.Tx) error {
	t.mu.Lock()
	if t.flushing == nil {
		t.flushing = &touchBatch{touches: make(map[string]touched, min(len(t.due), maxFlushTouches))}
		for k, d := range t.due {
			if len(t.flushing.touches) == maxFlushTouches {
				break
			}
			t.flushing.touches[k] = d
			delete(t.due, k)
		}
	}
	batch := t.flushing
	t.mu.Unlock()
	cids := make([]cid.Cid, 0, len(batch.touches))
	for k := range batch.touches {
		if c, err := base.CID(k); err == nil {
			cids = append(cids, c)
		}
	}
	slices.SortFunc(cids, func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) })
	// A memory forgotten meanwhile is passed over.
	err := t.m.UpdateHot(cids, func(h *Hot, c cid.Cid) { batch.touches[c.KeyString()].apply(h) })(tx)
	if err != nil {
		return err
	}
	tx.OnCommit(func() {
		t.mu.Lock()
		if t.flushing == batch {
			t.flushing = nil
		}
		t.mu.Unlock()
	})
	return nil
}

// TouchedTick is the latest activity tick of the touches the buffer
// holds for c (0: none): what WithTouches makes its access tick at least.
func (m *Store) TouchedTick(c cid.Cid) int64 {
	if m.touches == nil {
		return 0
	}
	d, _ := m.touches.of(c.KeyString())
	return d.tick
}

// WithTouches is meta, c's metadata read in r, with the touches the
// buffer holds for c when r is a view (an operation reads the hot state
// as stored: it may write it). meta is not modified.
func (m *Store) WithTouches(r store.Reader, c cid.Cid, meta *messages.MemoryMeta) *messages.MemoryMeta {
	if _, op := r.(store.Tx); op || m.touches == nil {
		return meta
	}
	d, ok := m.touches.of(c.KeyString())
	if !ok {
		return meta
	}
	h := HotOf(meta)
	d.apply(&h)
	return withHot(meta, h)
}
