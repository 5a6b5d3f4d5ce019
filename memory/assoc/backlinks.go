package assoc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The links back: a new memory's links are written both ways (Put), and
// its own list is written with it, but the link back to it in the list of
// each memory it links to — the sona's previous memory, the memories a
// response drew on, its similar neighbours — rewrote that whole list (up
// to MaxLinks links of ~43 bytes) with every new memory that linked to
// it. The memories a sona's responses draw on are drawn on again by the
// next response, so their lists were rewritten with each: at 1,000 sonas
// half of the bytes an advance wrote into Badger's tree, and taking them
// away gave 12% more advances (issue 15, stop 96).
//
// Held (Graph.HoldLinksBack), the links back of a new memory wait in
// memory for Hold, read back into every list the Graph gives a view (In,
// Walk) meanwhile, and each list is then rewritten once for every link
// back that reached it while it waited: every second, the lists whose
// first link back has waited Hold, oldest first, at most maxFlushLists a
// write; at once past MaxLists lists.
//
// Nothing is lost to a crash: each link back is also in its new memory's
// own list, written with the memory. A flush records in its write the
// insertion-log position below which every memory's links back are
// written (KeyLinksBack); at open (Recover) the memories logged after it
// are read again and their links handed back to the buffer. Only a new
// memory's links are held — an existing memory joining another sona has
// no new insertion-log position — and only between memories whose CIDs
// are of the memories' form (CIDv1 DAG-CBOR SHA2-256), with a type of the
// known ones; any other link back is written at once, as before.

// KeyLinksBack is x/linksback: the insertion-log position below which (and
// at which) every memory's links back are written into their targets'
// lists (8 bytes big endian).
var KeyLinksBack = []byte("x/linksback")

// HoldOptions configure the links back held in memory.
type HoldOptions struct {
	// Hold is how long a list's first link back waits before the list is
	// written (recall.links_hold).
	Hold time.Duration
	// MaxLists is how many lists may wait; past it the longest waiting
	// are written at once. 0: 65,536.
	MaxLists int
	// Log calls fn with each memory logged after position after, in the
	// log's order (Recover).
	Log    func(r store.Reader, after uint64, fn func(seq uint64, c cid.Cid) error) error
	Clock  clock.Clock
	Logger *slog.Logger
}

// digest is a memory's CID as held: its SHA2-256 digest (the CID's form
// is the memories', cidPrefix).
type digest [digestLen]byte

// digestOf is c's digest, false when c is not of the memories' form.
func digestOf(c []byte) (digest, bool) {
	if len(c) != len(cidPrefix)+digestLen || [4]byte(c) != cidPrefix {
		return digest{}, false
	}
	return digest(c[len(cidPrefix):]), true
}

// cid is the CID whose digest d is, in bytes.
func (d digest) cid() []byte { return append(cidPrefix[:len(cidPrefix):len(cidPrefix)], d[:]...) }

// gone reports whether the memory of d is forgotten (its tombstone, which
// the store answers for from memory when it holds none).
func (d digest) gone(r store.Reader) (bool, error) {
	c, err := cid.Cast(d.cid())
	if err != nil {
		return false, err
	}
	return r.Has(store.TombstoneKey(c))
}

// backLink is a link back held: from's link, for the list of the memory
// it is held for. 72 bytes, no pointer for the collector to mark.
type backLink struct {
	from     digest
	strength float64
	at       int64  // its updated_at, Unix seconds
	src      uint64 // from's insertion-log position
	told     uint64 // the commit that made it (Event.Told); 0: before any view
	typ      byte   // typeCodes
}

// backList is what is held for one list: its links back, in the order
// they came (their src ascending), and when the first came.
type backList struct {
	links []backLink
	since time.Time
}

type backLists map[digest]*backList

// heldBatch is a flush's lists, kept once written for the views that
// began before its commit (told) and read the lists as they were.
type heldBatch struct {
	lists backLists
	told  uint64
	at    time.Time
}

// backBuffer holds the links back (see above).
type backBuffer struct {
	g     *Graph
	hold  time.Duration
	max   int
	log   func(r store.Reader, after uint64, fn func(seq uint64, c cid.Cid) error) error
	clock clock.Clock
	slog  *slog.Logger

	mu sync.Mutex
	// held are the lists waiting, and order their digests in the order
	// their waiting began (a digest whose list went, or began waiting
	// again since, is skipped when it comes first).
	held  backLists
	order []queued
	// flushing is what the flush in flight writes, until it commits; it
	// stays, to be written again, when the flush fails. mark is the
	// position its write records.
	flushing backLists
	mark     uint64
	// written are the last flushes' lists (at most keepWritten, none
	// older than goneFor), for the views begun before their commits.
	written []heldBatch
	// logged is the insertion log's end as the last commit told left it:
	// every memory at or below it has handed its links back (a commit's
	// hooks run before the next batch).
	logged uint64
	// forcing counts the Flushes waiting: every list is due meanwhile.
	forcing int
	w       *store.BufferWriter
	// flushes and links count the flushes committed and the links back
	// they wrote.
	flushes, links uint64
}

type queued struct {
	to    digest
	since time.Time
}

// keepWritten bounds the flushes kept for older views: a view lives
// milliseconds, a flush comes at most every ten.
const keepWritten = 16

// HoldLinksBack has g hold the new memories' links back in memory and
// write them through c (see above); with o.Hold 0 they are written at
// once, and the buffer only takes back what a crash under a longer hold
// lost. Call it before the store's first write, then Recover; Close
// before the store closes.
func (g *Graph) HoldLinksBack(c store.Committer, o HoldOptions) {
	b := &backBuffer{g: g, hold: o.Hold, max: o.MaxLists, log: o.Log, clock: clock.Or(o.Clock), slog: o.Logger, held: backLists{}}
	if b.max <= 0 {
		b.max = 65_536
	}
	if b.slog == nil {
		b.slog = slog.New(slog.DiscardHandler)
	}
	every := min(max(o.Hold/8, 10*time.Millisecond), time.Second)
	b.w = store.NewBufferWriter(&b.mu, c, b.flushOp, b.scheduleLocked,
		store.BufferWriterOptions{Every: every, Clock: b.clock, Logger: b.slog, What: "links: the links back held"})
	g.back = b
}

// Recover hands the buffer the links back a crash may have lost: those
// of every memory logged after the store's KeyLinksBack. A store that has
// none had its links back written at once, and is given one at the log's
// end. With no hold, what is read again is written now and the mark
// removed. It returns how many memories it read again.
func (g *Graph) Recover(ctx context.Context, c store.Committer) (int, error) {
	b := g.back
	if b == nil {
		return 0, nil
	}
	if b.log == nil {
		return 0, errors.New("links: no insertion log to read the links back again from (HoldOptions.Log)")
	}
	var (
		mark, end uint64
		found     bool
		n         int
	)
	err := g.v.View(func(r store.Reader) error {
		var err error
		if end, err = store.ReadU64(r, store.KeyMemSeq); err != nil && !errors.Is(err, base.ErrNotFound) {
			return err
		}
		if mark, err = store.ReadU64(r, KeyLinksBack); errors.Is(err, base.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		found = true
		if mark >= end {
			return nil
		}
		now := b.clock.Now()
		return b.log(r, mark, func(seq uint64, c cid.Cid) error {
			from, ok := digestOf(c.Bytes())
			if !ok {
				return nil // not a memory's CID: its links back were written at once
			}
			raw, err := r.Get(Key(c))
			if errors.Is(err, base.ErrNotFound) {
				return nil // forgotten, or no links
			}
			if err != nil {
				return err
			}
			var ts builtTargets
			es, err := decodeEntries(raw, nil, &ts)
			if err != nil {
				return fmt.Errorf("links: the list of %s, read again: %w", c, err)
			}
			n++
			b.mu.Lock()
			for _, e := range es {
				b.addLocked(from, e.Target, e.Type, e.Strength, e.UpdatedAt, seq, 0, now)
			}
			b.mu.Unlock()
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.logged, b.mark = end, mark
	b.mu.Unlock()
	switch {
	case b.hold == 0 && found:
		if err = b.flush(ctx); err == nil {
			err = c.Update(ctx, func(tx store.Tx) error {
				tx.Delete(KeyLinksBack)
				return nil
			})
		}
	case b.hold > 0 && !found:
		err = c.Update(ctx, func(tx store.Tx) error {
			tx.Set(KeyLinksBack, base.U64(end))
			return nil
		})
	}
	return n, err
}

// put is Put's links back of from, a new memory at insertion-log
// position logSeq: written in tx when they cannot be held (or nothing is
// held), else handed to the buffer once tx commits.
func (b *backBuffer) put(tx store.Tx, from cid.Cid, links []Link, now int64, logSeq uint64) error {
	f, fromOK := digestOf(from.Bytes())
	var held []Link
	for _, l := range links {
		if l.Target == from {
			continue
		}
		if _, ok := digestOf(l.Target.Bytes()); ok && fromOK && b.hold > 0 && typeCode(l.Type) != 0 {
			held = append(held, l)
			continue
		}
		if err := b.g.Update(tx, Key(l.Target), now, func(list *List) { keepStronger(list, from, l.Type, l.Strength) }); err != nil {
			return err
		}
	}
	if len(held) > 0 {
		tx.OnCommit(func() {
			told, at := b.g.told.Load(), b.clock.Now() // the hooks run once the commit is told
			b.mu.Lock()
			defer b.mu.Unlock()
			for _, l := range held {
				b.addLocked(f, l.Target.Bytes(), l.Type, l.Strength, now, logSeq, told, at)
			}
			b.scheduleLocked()
		})
	}
	return nil
}

// addLocked holds from's link back for the list of target (CID bytes),
// made by the commit told (b.mu held).
func (b *backBuffer) addLocked(from digest, target []byte, typ string, strength float64, updated int64, src, told uint64, now time.Time) {
	to, ok := digestOf(target)
	code := typeCode(typ)
	if !ok || code == 0 || to == from {
		return
	}
	bl := b.held[to]
	if bl == nil {
		bl = &backList{since: now}
		b.held[to] = bl
		b.order = append(b.order, queued{to, now})
	}
	bl.links = append(bl.links, backLink{from: from, strength: strength, at: updated, src: src, told: told, typ: code})
}

// scheduleLocked has the lists due written now — those that waited Hold
// (more than a flush takes, after one), past MaxLists, or while a Flush
// waits —, unless writes fail, and arms the timer for the rest (b.mu
// held).
func (b *backBuffer) scheduleLocked() {
	if b.w.Busy() || b.w.Closed() || len(b.held) == 0 && b.flushing == nil {
		return
	}
	if !b.w.Failing() && (b.flushing != nil || b.dueLocked(b.clock.Now())) {
		go b.kick()
		return
	}
	b.w.Arm(b.fire)
}

// fire is the timer's: a flush when a list is due, else the timer again.
func (b *backBuffer) fire() {
	if b.kick() == nil {
		b.mu.Lock()
		b.scheduleLocked()
		b.mu.Unlock()
	}
}

func (b *backBuffer) kick() *store.BufferWrite {
	return b.w.Kick(func() bool { return b.flushing != nil || b.dueLocked(b.clock.Now()) })
}

// dueLocked reports whether the list waiting longest is to be written
// now (b.mu held).
func (b *backBuffer) dueLocked(now time.Time) bool {
	b.trimLocked()
	return len(b.order) > 0 && (b.forcing > 0 || len(b.held) >= b.max || now.Sub(b.order[0].since) >= b.hold)
}

// trimLocked drops from order's front the digests whose lists went or
// began waiting again since (b.mu held).
func (b *backBuffer) trimLocked() {
	i := 0
	for ; i < len(b.order); i++ {
		q := b.order[i]
		if bl, ok := b.held[q.to]; ok && bl.since.Equal(q.since) {
			break
		}
	}
	b.order = b.order[i:]
}

// flushOp writes the lists flushing holds — taking into it those due
// first when it holds none — and the position at or below which every
// memory's links back are then written. It may run again (a batch
// split): it writes flushing again, which its commit then moves to
// written.
func (b *backBuffer) flushOp(tx store.Tx) error {
	b.mu.Lock()
	if b.flushing == nil {
		now := b.clock.Now()
		b.flushing = backLists{}
		// Past MaxLists, the longest waiting go down to half of it.
		over := len(b.held) >= b.max
		for len(b.flushing) < maxFlushLists && (b.dueLocked(now) || over && len(b.held) > b.max/2) && len(b.order) > 0 {
			q := b.order[0]
			b.order = b.order[1:]
			b.flushing[q.to] = b.held[q.to]
			delete(b.held, q.to)
		}
		// The list waiting longest holds the earliest memory whose links
		// back are not all written: they come in the log's order.
		b.mark = b.logged
		if b.trimLocked(); len(b.order) > 0 {
			b.mark = b.held[b.order[0].to].links[0].src - 1
		}
	}
	batch, mark := b.flushing, b.mark
	keys := make([]digest, 0, len(batch))
	for to := range batch {
		keys = append(keys, to)
	}
	b.mu.Unlock()
	slices.SortFunc(keys, func(x, y digest) int { return bytes.Compare(x[:], y[:]) })
	key := slices.Clone(KeyAssoc)
	for _, to := range keys {
		// A memory forgotten in this batch, before this op, is not given
		// links back, nor named in one (its commit's hook drops them).
		if gone, err := to.gone(tx); gone || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		var links []backLink
		for _, l := range batch[to].links {
			if gone, err := l.from.gone(tx); err != nil {
				return err
			} else if !gone {
				links = append(links, l)
			}
		}
		key = append(append(key[:len(KeyAssoc)], cidPrefix[:]...), to[:]...)
		err := b.g.Update(tx, key, 0, func(l *List) {
			ts := builtTargets{keep: true}
			l.entries = withHeld(l.entries, links, &ts)
		})
		if errors.Is(err, base.ErrCorrupt) {
			b.slog.Warn("links: a damaged list is not given its links back", "key", string(key), "err", err)
			continue
		}
		if err != nil {
			return err
		}
	}
	tx.Set(KeyLinksBack, base.U64(mark))
	tx.OnCommit(func() {
		told, now := b.g.told.Load(), b.clock.Now()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.written = slices.DeleteFunc(b.written, func(h heldBatch) bool { return now.Sub(h.at) > goneFor })
		if len(b.written) == keepWritten {
			b.written = slices.Delete(b.written, 0, 1)
		}
		b.written = append(b.written, heldBatch{lists: b.flushing, told: told, at: now})
		for _, bl := range b.flushing {
			b.links += uint64(len(bl.links))
		}
		b.flushes++
		b.flushing = nil
	})
	return nil
}

// apply gives es, a list strongest first of at most MaxLinks links, the
// link back l unless it has one to l's memory at least as strong (Put's
// rule), keeping its order and its length bound: l goes in only before
// its last, which then goes. (A list's links only move down, but for one
// a stronger link to its own memory replaces, so a link past the bound
// never comes back within it: the list is the one applying every link
// back, then cutting, gives. Grown past the bound, it was copied to a
// larger array each time.) A target made is built in ts (kept).
func (l backLink) apply(es []Entry, ts *builtTargets) []Entry {
	i := slices.IndexFunc(es, func(e Entry) bool { d, ok := digestOf(e.Target); return ok && d == l.from })
	if i >= 0 {
		if es[i].Strength >= l.strength {
			return es
		}
		es = slices.Delete(es, i, i+1)
	}
	e := Entry{Target: ts.cid(l.from[:]), Type: typeCodes[l.typ], Strength: l.strength, UpdatedAt: l.at}
	j, _ := slices.BinarySearchFunc(es, e, strongerFirst)
	if j >= MaxLinks {
		return es
	}
	return slices.Insert(es[:min(len(es), MaxLinks-1)], j, e)
}

// keepStronger gives list the link to to (of typ, strength) unless it has
// one at least as strong: Put's rule, for each direction.
func keepStronger(list *List, to cid.Cid, typ string, strength float64) {
	if e := list.Find(to); e != nil && e.Strength >= strength {
		return
	}
	e := list.Get(to)
	e.Type, e.Strength = typ, strength
}

// collect appends to held the links back held for the list under key
// that a view sees, having seen the commits told before it read the list (told:
// store.ToldBefore) — those of the flushes whose commits it may not see
// too — in the order they came; none when key is not a memory's list.
// Past MaxLinks of them it appends only the MaxLinks that withHeld
// applies (heldTop, offered each in that order), in held's room: a hot
// memory's list in a long-lived sona has hundreds waiting, and appending
// them all grew a new array a walk (a thirtieth of the bytes its advance
// allocated, issue 15, stop 105).
func (b *backBuffer) collect(key []byte, told uint64, held []backLink) []backLink {
	to, ok := digestOf(key[len(KeyAssoc):])
	if !ok {
		return nil
	}
	start := len(held)
	var top heldTop // past MaxLinks: those withHeld applies, chosen as they come
	over := false
	take := func(ls backLists) {
		bl, ok := ls[to]
		if !ok {
			return
		}
		for _, l := range bl.links {
			switch {
			case l.told > told:
			case over:
				top = top.offer(l)
			case len(held)-start < MaxLinks:
				held = append(held, l)
			default:
				// Chosen in held's own room, each read before a write
				// reaches it: offer writes no further than it has been
				// offered.
				over, top = true, heldTop{links: held[start:start]}
				for _, h := range held[start:] {
					top = top.offer(h)
				}
				top = top.offer(l)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.written {
		if told < h.told {
			take(h.lists)
		}
	}
	take(b.flushing)
	take(b.held)
	if over {
		return held[:start+len(top.links)]
	}
	return held
}

// withHeld returns es, a list as stored, with the links back held
// applied (those that can be in it: heldTop), strongest first, at most
// MaxLinks, as their flush will write it; the targets of the links it
// adds are built in ts. es is the caller's.
func withHeld(es []Entry, held []backLink, ts *builtTargets) []Entry {
	es = es[:min(len(es), MaxLinks)]
	if len(held) > MaxLinks {
		var room [MaxLinks]backLink
		top := heldTop{links: room[:0]}
		for _, l := range held {
			top = top.offer(l)
		}
		held = top.links
	}
	for _, l := range held {
		es = l.apply(es, ts)
	}
	return es
}

// heldTop gathers, of links back for one list offered in the order they
// came, those that can be in the list once they are applied to it: of
// each memory's, the first of its strongest (a later one no stronger
// changes nothing: apply), and of those the MaxLinks first in the list's
// order — strongest first, ties by their memories' digests, as
// strongerFirst orders their targets. Any other is preceded by MaxLinks
// links at least as strong, whatever the list held, and cut. A list a
// sona's responses keep drawing on gathers tens or more while held (a
// sona advanced twenty times a second, Hold 30 s), and every read of it
// applied each of them to the list, in time quadratic in their number
// (issue 15).
type heldTop struct {
	links   []backLink // at most MaxLinks, in no order
	weakest int        // the last of links in the list's order, once they are MaxLinks
}

// offer is t given l. (A value, not a pointer's: the room its links
// are in stays on its caller's stack.)
func (t heldTop) offer(l backLink) heldTop {
	full := len(t.links) == MaxLinks
	if full && !l.before(t.links[t.weakest]) {
		// After MaxLinks others; or, when its memory's is among them,
		// no stronger than that one (which comes no later than the last).
		return t
	}
	i := slices.IndexFunc(t.links, func(h backLink) bool { return h.from == l.from })
	switch {
	case i >= 0 && l.strength <= t.links[i].strength:
		return t
	case i >= 0:
		t.links[i] = l
	case !full:
		t.links = append(t.links, l)
	default:
		t.links[t.weakest] = l
	}
	if len(t.links) == MaxLinks {
		t.weakest = 0
		for j := range t.links {
			if t.links[t.weakest].before(t.links[j]) {
				t.weakest = j
			}
		}
	}
	return t
}

// before reports whether l comes before o in a list (strongerFirst of
// their entries).
func (l backLink) before(o backLink) bool {
	if l.strength != o.strength {
		return l.strength > o.strength
	}
	return bytes.Compare(l.from[:], o.from[:]) < 0
}

// all are the lists held, being written and written lately (b.mu held).
func (b *backBuffer) all() []backLists {
	out := []backLists{b.held, b.flushing}
	for _, h := range b.written {
		out = append(out, h.lists)
	}
	return out
}

// forList is the links back held for c's list, as an operation sees them
// (every commit before it made them): Forget reads them with the list.
func (b *backBuffer) forList(c cid.Cid) []Link {
	to, ok := digestOf(c.Bytes())
	if !ok {
		return nil
	}
	var out []Link
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ls := range []backLists{b.flushing, b.held} {
		if bl, ok := ls[to]; ok {
			for _, l := range bl.links {
				from, err := cid.Cast(l.from.cid())
				if err != nil { // the bytes of a memory's CID
					panic("links: a held link's CID does not read back: " + err.Error())
				}
				out = append(out, Link{Target: from, Type: typeCodes[l.typ], Strength: l.strength})
			}
		}
	}
	return out
}

// Replace writes in tx the typed links of c whole (none: deleted), as an
// import restores them: what is held for c's list is dropped, then and
// there, so that no flush after this op in its batch writes it into
// the list (an import's appends made links back that its exported
// lists replace).
func (g *Graph) Replace(tx store.Tx, c cid.Cid, list *messages.Associations) {
	if len(list.GetLinks()) == 0 {
		tx.Delete(Key(c))
	} else {
		tx.Set(Key(c), Marshal(list))
	}
	if b := g.back; b != nil {
		if to, ok := digestOf(c.Bytes()); ok {
			b.mu.Lock()
			delete(b.held, to)
			delete(b.flushing, to)
			b.mu.Unlock()
		}
	}
}

// forgotten drops what is held of and toward the memories gone.
func (b *backBuffer) forgotten(gone []cid.Cid) {
	set := map[digest]bool{}
	for _, c := range gone {
		if d, ok := digestOf(c.Bytes()); ok {
			set[d] = true
		}
	}
	if len(set) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ls := range b.all() {
		for to, bl := range ls {
			if set[to] {
				delete(ls, to)
			} else if bl.links = slices.DeleteFunc(bl.links, func(l backLink) bool { return set[l.from] }); len(bl.links) == 0 {
				delete(ls, to)
			}
		}
	}
}

// flush writes every link back held when it is called and waits until
// it is durable (an export's, a close's).
func (b *backBuffer) flush(ctx context.Context) error {
	b.mu.Lock()
	targets := map[digest]struct{}{}
	for _, ls := range []backLists{b.held, b.flushing} {
		for to := range ls {
			targets[to] = struct{}{}
		}
	}
	b.forcing++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.forcing--
		b.mu.Unlock()
	}()
	return b.w.Flush(ctx, b.kick, func() bool {
		if b.flushing != nil {
			return true
		}
		for to := range targets {
			if _, ok := b.held[to]; ok {
				return true
			}
		}
		return false
	})
}

// loggedTo notes the insertion log's end a commit told left (Graph.committed).
func (b *backBuffer) loggedTo(end uint64) {
	b.mu.Lock()
	b.logged = max(b.logged, end)
	b.mu.Unlock()
}

// close writes what is held and stops the timer.
func (b *backBuffer) close(ctx context.Context) error {
	err := b.flush(ctx)
	b.mu.Lock()
	b.w.Close()
	b.mu.Unlock()
	return err
}

// LinksBackHeld is how many lists wait for links back (those being
// written too: what a crash would make Recover read again), and how many
// flushes and links back were written so far.
func (g *Graph) LinksBackHeld() (lists int, flushes, links uint64) {
	if g.back == nil {
		return 0, 0, 0
	}
	b := g.back
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held) + len(b.flushing), b.flushes, b.links
}
