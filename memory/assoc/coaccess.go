package assoc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// The co-access buffer: a recall strengthens the co-access of its hits
// (Strengthen: each hit's list of partners rewritten, ten lists of up to
// 2 KB for ten hits), and every recall did so in a write of its own —
// read from Badger in the committer, decoded, re-encoded, written, then
// flushed and compacted: a quarter of a recall's CPU on a store whose lists
// exist. Buffered (Graph.Buffer), a recall's strengthening is kept in
// memory as how much of each pair's distance to 1 is left
// ((1 − w) ← (1 − w)·(1 − rate) composes: n recalls multiply it n
// times), read back into every list the Graph gives (In), and written
// in the background, one rewrite of each list for all the recalls that
// strengthened it since: every BufferOptions.Every the maxFlushLists
// lists that have waited longest, and at once past MaxLists lists.
//
// What is lost to a crash is what waits: no one waits for it (recall's
// Trace is deferred), and it is not an acknowledged memory. A list waits
// about (lists waiting ÷ maxFlushLists) × Every: at 100k memories under
// 16 clients' recalls, some 100,000 lists, a few minutes. Written at
// once past 65,536 lists (stop 54), the lists were rewritten 2,400–2,700
// times a second — 4.5 MB/s into Badger's tree, its compactions, and a
// recall's reads missing the lists the flushes had just rewritten —, and
// over a minute a recall at 100k cost half as much again as over its
// first ten seconds; with 262,144 waiting, the oldest written first, the
// recalls made 1,043 /s over two minutes against 880 /s (issue 15, stop
// 57).

// BufferOptions configure the co-access buffer.
type BufferOptions struct {
	// Every is how often the lists that have waited longest are written
	// (recall.coaccess_flush), maxFlushLists of them.
	Every time.Duration
	// MaxLists is how many lists may wait; past it they are written at
	// once. 0: 262,144 (at 100k memories, recalls from 16 clients
	// strengthen 6,000 lists a second: 8,192 had them written every 1.3 s,
	// a tenth of a recall's CPU; 65,536, 2,400–2,700 a second, a sixth of
	// a sustained recall's).
	MaxLists int
	Clock    clock.Clock
	Logger   *slog.Logger
}

// buffer holds the strengthening not yet written (see above).
type buffer struct {
	g     *Graph // whose cache the flush reads the lists through
	max   int
	clock clock.Clock
	log   *slog.Logger

	mu sync.Mutex
	// pending is what the recalls strengthened since the flush in
	// flight took its lists, by their h/ keys' hashes (lists): a list is
	// no object of its own, and its key no string, for the collector to
	// mark — each was, and so were the recalls' CIDs the lists kept, a
	// seventh of the heap's objects after two minutes of advances (stop 82).
	pending lists
	// order are pending's keys, oldest first, for the flushes to take
	// (a key taken otherwise, or dropped, stays until it comes first).
	order []base.KeyHash
	// urgent are the keys of pending a Flush waits for: the next flush
	// takes them first.
	urgent map[base.KeyHash]struct{}
	// hash hashes the h/ keys; agents numbers the agents the lists are
	// for (agentIDs: each one's number), and key is room for a key.
	hash     base.KeyHasher
	agents   []string
	agentIDs map[string]uint32
	key      []byte
	// flushing is what the flush in flight writes, until it commits; it
	// stays, to be written again, when the flush fails. Only the
	// committer changes it (the flush, a forgetting), under mu.
	flushing *flushBatch
	// flushed are the last batches written (at most keepFlushed, none
	// older than goneFor), with the commit that wrote them: a view begun
	// before that commit reads the lists as they were, and merged gives
	// it the batch's strengthening, which the buffer no longer holds.
	flushed []flushedBatch
	// w writes: while its writes fail, flushes are tried every Every,
	// not at once, and past twice MaxLists lists nothing more is
	// buffered.
	w *store.BufferWriter // its timer armed while pending waits
	// gone are the memories forgotten lately (with when), by their CIDs'
	// bytes: a recall that read them before the forgetting does not
	// strengthen them after it. prune is armed while it holds any.
	gone  map[string]time.Time
	prune clock.Timer
	// targets numbers the memories the pending lists' strengthening goes
	// to (see targets); a list numbered by an older table is renumbered
	// when next strengthened, or when the table after it fills — at
	// tableMax memories (2·MaxLists).
	targets  *targets
	tableMax int
}

// pendingList is the strengthening of one memory's list for one agent.
type pendingList struct {
	agent uint32   // by its number in the buffer's agents
	of    uint32   // the memory whose list it is, by its number in t
	t     *targets // what of's and ds's numbers name
	ds    []delta
}

// lists are pending lists by their h/ keys' hashes.
type lists map[base.KeyHash]pendingList

// keyOf is pl's h/ key, in the room b.key (b.mu held).
func (b *buffer) keyOf(pl pendingList) []byte {
	b.key = append(append(append(append(b.key[:0], KeyCoAccess...), b.agents[pl.agent]...), 0), pl.t.at(pl.of)...)
	return b.key
}

// agentID is agent's number, given now if it has none (b.mu held).
func (b *buffer) agentID(agent string) uint32 {
	id, ok := b.agentIDs[agent]
	if !ok {
		id = uint32(len(b.agents))
		b.agents = append(b.agents, agent)
		b.agentIDs[agent] = id
	}
	return id
}

// targets numbers the memories a buffer's strengthening goes to: a delta
// holds a number, not the cid.Cid (a string), so that the millions of
// deltas a full buffer holds at 100,000 memories (65,536 lists of up to
// 2·MaxLinks partners) are no pointers for the collector to mark. With
// them as CIDs, a recall at 100k under 16 clients spent 13–14% of the CPU
// in the collector; numbered, 11–12%, and some 3% more recalls a second
// (issue 15, stop 55). The table holds the CIDs' bytes packed
// (base.KeyTable), not the recalls' CIDs: those were a string each that
// the buffer kept alive, a twentieth of the heap's objects after two
// minutes of advances (stop 82). A table only grows: the buffer starts a new one when it
// holds twice MaxLists memories, and the lists move to it when next
// strengthened, or when the table after it fills (renumber), so at most
// two tables are in use by what is pending, besides those of the batches
// being or lately written.
type targets struct {
	cids base.KeyTable // the CIDs' bytes by number; only added to, by id, under the buffer's lock
	ids  *base.KeyIndex
}

func newTargets() *targets {
	t := &targets{}
	t.ids = base.NewKeyIndex(0, t.cids.At)
	return t
}

// id is the number of the memory whose CID's bytes are key, given now if
// it has none.
func (t *targets) id(key string) uint32 {
	if v, ok := t.ids.Get(key); ok {
		return v
	}
	t.cids.Add(key)
	v := uint32(t.cids.Len() - 1)
	t.ids.Put(key, v)
	return v
}

// at is the CID's bytes of number v (aliasing the table: read it under
// the buffer's lock, or in the committer, where the table grows).
func (t *targets) at(v uint32) string { return t.cids.At(v) }

// renumber moves pl to the buffer's current table (b.mu held).
func (b *buffer) renumber(pl *pendingList) {
	if pl.t == b.targets {
		return
	}
	for i, d := range pl.ds {
		pl.ds[i].to = b.targets.id(pl.t.at(d.to))
	}
	pl.of = b.targets.id(pl.t.at(pl.of))
	pl.t = b.targets
}

// newTable starts a new table once the current one holds twice MaxLists
// memories, and moves to it the lists still numbered by the tables before
// the current one (b.mu held).
func (b *buffer) newTable() {
	if b.targets.cids.Len() < b.tableMax {
		return
	}
	prev := b.targets
	b.targets = newTargets()
	for k, pl := range b.pending {
		if pl.t != prev {
			b.renumber(&pl)
			b.pending[k] = pl
		}
	}
}

type flushBatch struct{ lists lists }

// flushedBatch is a batch written by the commit told (Event.Told), at at.
type flushedBatch struct {
	lists lists
	told  uint64
	at    time.Time
}

// keepFlushed bounds the batches kept for older views: a recall's view
// lives milliseconds, a flush comes every recall.coaccess_flush or
// MaxLists lists.
const keepFlushed = 4

// delta is a pending strengthening of one link: 16 bytes, of which a
// full buffer holds millions (77 MB of 24-byte ones under recalls at 1M
// memories, README stop 74).
type delta struct {
	to   uint32  // the partner, by its number in the list's targets
	at   uint32  // the latest strengthening, Unix seconds (unixSeconds)
	keep float64 // what is left of 1 − w: the product of each recall's 1 − rate
}

// unixSeconds is now as a delta holds it: within 1970–2106.
func unixSeconds(now int64) uint32 { return uint32(min(max(now, 0), math.MaxUint32)) }

// strengthened is w after the recalls a delta counts, keep being what
// they left of 1 − w: 1 − w ← (1 − w)·keep.
func strengthened(w, keep float64) float64 { return 1 - (1-w)*keep }

// maxID marks a memory add leaves out (gone).
const maxID = math.MaxUint32

// maxDeltas bounds a list's pending partners: past it the least
// strengthened go (a written list keeps MaxLinks).
const maxDeltas = 2 * MaxLinks

// goneFor is how long a forgotten memory is kept from the buffer: longer
// than any recall takes between reading it and leaving its trace.
const goneFor = time.Minute

// maxFlushLists bounds one flush's transaction (a list is up to 2 KB).
const maxFlushLists = 2048

// Buffer has g keep the recalls' co-access strengthening in memory and
// write it through c (see above). Call it before the store's first
// write, and Close before the store closes.
func (g *Graph) Buffer(c store.Committer, o BufferOptions) {
	b := &buffer{g: g, max: o.MaxLists, clock: clock.Or(o.Clock), log: o.Logger,
		pending: lists{}, urgent: map[base.KeyHash]struct{}{}, hash: base.NewKeyHasher(), agentIDs: map[string]uint32{},
		gone: map[string]time.Time{}, targets: newTargets()}
	if b.max <= 0 {
		b.max = 262_144
	}
	b.tableMax = 2 * b.max
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.w = store.NewBufferWriter(&b.mu, c, b.flushOp, b.scheduleLocked,
		store.BufferWriterOptions{Every: o.Every, Clock: b.clock, Logger: b.log, What: "co-access: the buffered strengthening"})
	g.buf = b
}

// Strengthen is the op that strengthens the co-access of the memories
// returned together, for agent: the package's Strengthen, or — buffered —
// an op that writes nothing and hands the strengthening to the buffer
// once the batch it shares commits.
func (g *Graph) Strengthen(agent string, together []cid.Cid, rate float64, now int64) store.Op {
	if g.buf == nil {
		return g.strengthen(agent, together, rate, now)
	}
	together = slices.Clone(together)
	return func(tx store.Tx) error {
		tx.OnCommit(func() { g.buf.add(agent, together, 1-rate, now) })
		return nil
	}
}

// Waiting is how many lists the buffer holds not yet written (those a
// flush is writing too): what a crash would lose.
func (g *Graph) Waiting() int {
	if g.buf == nil {
		return 0
	}
	b := g.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.pending)
	if b.flushing != nil {
		n += len(b.flushing.lists)
	}
	return n
}

// Flush writes the links back held and the strengthening buffered so far
// and waits until they are durable (an export's, a close's).
func (g *Graph) Flush(ctx context.Context) error {
	var err error
	if g.back != nil {
		err = g.back.flush(ctx)
	}
	if g.buf != nil {
		err = errors.Join(err, g.buf.flush(ctx))
	}
	return err
}

// Close writes what is buffered and held and stops the buffers' timers.
func (g *Graph) Close(ctx context.Context) error {
	var err error
	if g.back != nil {
		err = g.back.close(ctx)
	}
	if g.buf == nil {
		return err
	}
	err = errors.Join(err, g.buf.flush(ctx))
	b := g.buf
	b.mu.Lock()
	b.w.Close()
	if b.prune != nil {
		b.prune.Stop()
		b.prune = nil
	}
	b.mu.Unlock()
	return err
}

// Forgotten drops what is buffered for or toward the memories gone, and
// keeps them from the buffer for a while. It is forgetting's, called in
// its transaction: that may run again or fail, and dropping learning
// about memories that are then kept loses nothing that matters.
func (g *Graph) Forgotten(gone []cid.Cid) {
	if g.buf == nil || len(gone) == 0 {
		return
	}
	b := g.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for _, c := range gone {
		b.gone[c.KeyString()] = now
	}
	b.without(b.pending)
	if b.flushing != nil {
		b.without(b.flushing.lists)
	}
	b.pruneLocked()
}

// pruneLocked lets go of the memories forgotten more than goneFor ago,
// and arms the timer that does it again while any are left (a forget of
// a million memories would hold them all).
func (b *buffer) pruneLocked() {
	now := b.clock.Now()
	for c, at := range b.gone {
		if now.Sub(at) > goneFor {
			delete(b.gone, c)
		}
	}
	if len(b.gone) > 0 && b.prune == nil && !b.w.Closed() {
		b.prune = b.clock.AfterFunc(goneFor+time.Second, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.prune = nil
			b.pruneLocked()
		})
	}
}

// without takes out of lists (in place) the lists of the memories gone
// and the strengthening toward them.
func (b *buffer) without(ls lists) {
	for k, pl := range ls {
		if _, ok := b.gone[pl.t.at(pl.of)]; ok {
			delete(ls, k)
			continue
		}
		isGone := func(d delta) bool {
			_, ok := b.gone[pl.t.at(d.to)]
			return ok
		}
		if pl.ds = slices.DeleteFunc(pl.ds, isGone); len(pl.ds) == 0 {
			delete(ls, k)
		} else {
			ls[k] = pl
		}
	}
}

// add records that together were returned together (keep: 1 − rate).
func (b *buffer) add(agent string, together []cid.Cid, keep float64, now int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w.Refuses(len(b.pending), b.max) {
		return
	}
	ids := make([]uint32, len(together)) // each one's number, or maxID when gone
	partners := -1                       // of each list: the memories not gone but its own
	for i, c := range together {
		ids[i] = maxID
		if _, ok := b.gone[c.KeyString()]; !ok {
			ids[i] = b.targets.id(c.KeyString())
			partners++
		}
	}
	for ai := range together {
		if ids[ai] == maxID {
			continue
		}
		pl := pendingList{agent: b.agentID(agent), of: ids[ai], t: b.targets}
		key := b.hash.OfBytes(b.keyOf(pl))
		if old, ok := b.pending[key]; ok {
			pl = old
		} else {
			// Room for its partners at once: appended one by one, a new
			// list's deltas were a slice of twice the room most of the
			// time (nine partners in sixteen), and four slices before it.
			pl.ds = make([]delta, 0, partners)
			b.order = append(b.order, key)
		}
		b.renumber(&pl)
		for _, t := range ids {
			if t == maxID || t == ids[ai] {
				continue
			}
			i := slices.IndexFunc(pl.ds, func(d delta) bool { return d.to == t })
			if i < 0 {
				pl.ds = append(pl.ds, delta{to: t, keep: 1})
				i = len(pl.ds) - 1
			}
			pl.ds[i].keep *= keep
			pl.ds[i].at = max(pl.ds[i].at, unixSeconds(now))
		}
		if len(pl.ds) > maxDeltas {
			slices.SortFunc(pl.ds, func(x, y delta) int { return cmp.Compare(x.keep, y.keep) })
			pl.ds = pl.ds[:maxDeltas]
		}
		b.pending[key] = pl
	}
	b.newTable()
	b.scheduleLocked()
}

// scheduleLocked arms the timer for what waits, or has it written now
// when too much does.
func (b *buffer) scheduleLocked() {
	if b.w.Busy() || b.w.Closed() || len(b.pending) == 0 && b.flushing == nil {
		return
	}
	if len(b.pending) >= b.max && !b.w.Failing() {
		go b.kick()
		return
	}
	b.w.Arm(func() { b.kick() })
}

// kick submits a flush unless one is in flight or nothing waits; it
// returns the flush in flight (nil: none).
func (b *buffer) kick() *store.BufferWrite {
	return b.w.Kick(func() bool { return len(b.pending) > 0 || b.flushing != nil })
}

// flush writes what is buffered when it is called (the flush in flight,
// then pending's lists, which the flushes after it take first), or
// returns the first failure. What recalls add meanwhile may wait for the
// next: under a steady load it would never be done. (It counted rounds
// once: under a steady load the lists added meanwhile could fill them,
// and a list buffered at the call could stay pending.)
func (b *buffer) flush(ctx context.Context) error {
	b.mu.Lock()
	for k := range b.pending {
		b.urgent[k] = struct{}{}
	}
	b.mu.Unlock()
	return b.w.Flush(ctx, b.kick, b.urgentLeft)
}

// urgentLeft reports whether a key a Flush waits for is still pending,
// forgetting those that are not (b.mu held).
func (b *buffer) urgentLeft() bool {
	for k := range b.urgent {
		if _, ok := b.pending[k]; ok {
			return true
		}
		delete(b.urgent, k)
	}
	return false
}

// flushOp writes the lists flushing holds, taking up to maxFlushLists of
// pending's first when it holds none. It may run again (a batch split):
// it writes flushing again, which its commit then empties.
func (b *buffer) flushOp(tx store.Tx) error {
	b.mu.Lock()
	if b.flushing == nil {
		b.flushing = &flushBatch{lists: make(lists, min(len(b.pending), maxFlushLists))}
		take := func(k base.KeyHash, pl pendingList) bool {
			if len(b.flushing.lists) == maxFlushLists {
				return false
			}
			b.flushing.lists[k] = pl
			delete(b.pending, k)
			delete(b.urgent, k)
			return true
		}
		for k := range b.urgent { // what a Flush waits for first
			if pl, ok := b.pending[k]; !ok {
				delete(b.urgent, k)
			} else if !take(k, pl) {
				break
			}
		}
		for len(b.order) > 0 && len(b.flushing.lists) < maxFlushLists { // the oldest next
			k := b.order[0]
			b.order = b.order[1:]
			if pl, ok := b.pending[k]; ok {
				take(k, pl)
			}
		}
	}
	batch := b.flushing
	before := b.g.told.Load() // the commits told before this one
	type keyed struct {
		key []byte
		pl  pendingList
	}
	keys := make([]keyed, 0, len(batch.lists))
	for _, pl := range batch.lists {
		keys = append(keys, keyed{slices.Clone(b.keyOf(pl)), pl})
	}
	b.mu.Unlock()
	slices.SortFunc(keys, func(x, y keyed) int { return bytes.Compare(x.key, y.key) })
	var table indexRoom // each list's index (List.each)
	for _, k := range keys {
		pl := k.pl
		err := b.g.Update(tx, k.key, 0, func(l *List) {
			// Read without the lock: the tables grow only in add, which
			// commit hooks call — in the committer, as this.
			l.each(len(pl.ds), func(i int) string { return pl.t.at(pl.ds[i].to) }, &table, func(i int, e *Entry) {
				e.Type = CoAccess
				e.Strength = strengthened(e.Strength, pl.ds[i].keep)
				e.UpdatedAt = int64(pl.ds[i].at)
			})
		})
		if errors.Is(err, base.ErrCorrupt) {
			b.log.Warn("co-access: a damaged list is not strengthened", "key", string(k.key), "err", err)
			continue
		}
		if err != nil {
			return err
		}
	}
	tx.OnCommit(func() {
		b.mu.Lock()
		if b.flushing == batch {
			b.flushing = nil
			// The hooks run after the commit is told (Graph.committed):
			// the latest told is this commit's — unless it was not told
			// (an op run again alone, which wrote nothing).
			if told := b.g.told.Load(); told > before {
				now := b.clock.Now()
				b.flushed = slices.DeleteFunc(b.flushed, func(f flushedBatch) bool { return now.Sub(f.at) > goneFor })
				if len(b.flushed) == keepFlushed {
					b.flushed = slices.Delete(b.flushed, 0, 1)
				}
				b.flushed = append(b.flushed, flushedBatch{lists: batch.lists, told: told, at: now})
			}
		}
		b.mu.Unlock()
	})
	return nil
}

// merged returns links, the list under key as a view that saw the commits
// told before it read it (told: store.ToldBefore), with the buffered
// strengthening of key applied — and that of the batches flushed by
// commits the view does not see (links itself when there is none). links
// is the caller's (Graph.In decodes it for each read): merged appends to
// it and orders it in place.
func (b *buffer) merged(key []byte, links []Link, told uint64) []Link {
	type named struct {
		to   string // the CID's bytes, aliasing its table (never changed)
		keep float64
	}
	var (
		waiting [keepFlushed + 2]pendingList // what waits for key, sized before it is copied
		n, size int
	)
	k := b.hash.OfBytes(key)
	take := func(ls lists) {
		if pl, ok := ls[k]; ok {
			waiting[n], n, size = pl, n+1, size+len(pl.ds)
		}
	}
	b.mu.Lock()
	for _, f := range b.flushed {
		if told < f.told {
			take(f.lists)
		}
	}
	if b.flushing != nil {
		take(b.flushing.lists)
	}
	take(b.pending)
	var room [32]named // most lists wait for fewer
	ds := room[:0:min(size, len(room))]
	if size > len(room) {
		ds = make([]named, 0, size)
	}
	for _, pl := range waiting[:n] {
		for _, d := range pl.ds {
			ds = append(ds, named{pl.t.at(d.to), d.keep})
		}
	}
	b.mu.Unlock()
	if len(ds) == 0 {
		return links
	}
	out := slices.Grow(links, len(ds)) // links is the caller's (Graph.In)
	var table indexRoom
	ix := newTargetIndex(len(out)+len(ds), &table)
	for i, l := range out {
		ix.findOrAdd(targetHash(l.Target.KeyString()), i, func(at int) bool { return out[at].Target == l.Target })
	}
	for _, d := range ds {
		i, added := ix.findOrAdd(targetHash(d.to), len(out), func(at int) bool { return out[at].Target.KeyString() == d.to })
		if added {
			to, err := cid.Cast([]byte(d.to))
			if err != nil { // the bytes of a cid.Cid that add was given
				panic("co-access: a buffered partner's CID does not read back: " + err.Error())
			}
			out = append(out, Link{Target: to, Type: CoAccess})
		}
		out[i].Strength = strengthened(out[i].Strength, d.keep)
	}
	slices.SortFunc(out, func(x, y Link) int {
		if c := cmp.Compare(y.Strength, x.Strength); c != 0 {
			return c
		}
		return strings.Compare(x.Target.KeyString(), y.Target.KeyString()) // the bytes' order, as Update's
	})
	return out[:min(len(out), MaxLinks)]
}
