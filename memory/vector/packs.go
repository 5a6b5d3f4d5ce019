package vector

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A sona's memories are ids spread over the whole index: in a store of 16
// sonas one id in 16, in one of 100 one in 100, a record to a page. The
// screen of exactAmong then waits on memory for each record (140 ns a
// record at 320k memories in 16 sonas: half of an insert's CPU, stop 71).
// A pack is a copy of a named run's records side by side, in the run's
// order, which the screen reads in sequence, prefetching ahead: 4–5×
// faster over 12,500 records one id in 16 (BenchmarkScreen). Packs are kept
// within Options.PackBytes; one unused for packIdle makes room for one
// searched twice within packIdle, so that a store of more large sonas than
// the budget holds keeps the same ones packed rather than rebuilding them
// in turn, and a sona searched less often than that (whose pack would cost
// more to make than it saves) takes no other's room.

// Run is a part of the ids a search is confined to that only grows by
// appending — a sona's memories, in chain order — under a name of its
// own (the sona's uuid). A search of a named run may keep a pack of its
// records; its ids are compared with the pack's each time, so a run that
// changed otherwise (a sona that forgot memories) only costs a new pack.
type Run struct {
	Name string
	IDs  []uint64
}

// Unnamed is ids as one run that is never packed.
func Unnamed(ids []uint64) []Run { return []Run{{IDs: ids}} }

// RunsLen is the number of ids of runs.
func RunsLen(runs []Run) int {
	n := 0
	for _, r := range runs {
		n += len(r.IDs)
	}
	return n
}

const (
	// packMin is the fewest ids of a run that is packed: those screened on
	// their records (quantScanMin).
	packMin = quantScanMin
	// packSpread: a run is packed when its ids span at least packSpread
	// times their number (one sona's store has its records side by side
	// already).
	packSpread = 4
	// packGrow is the fewest new ids of a run for which its pack is
	// extended: the few since the last are screened where they lie.
	packGrow = 64
	// packIdle is how long a pack goes unsearched before another may take
	// its room.
	packIdle = time.Minute
)

// pack is a prefix of a run and its records: immutable once published,
// but for the room beyond its length, which a longer pack extending it
// may fill.
type pack struct {
	ids []uint64 // a copy: a run's backing array may be written past a shorter run's end
	// The records of the first mapped ids are in a restored snapshot's
	// file (mq, ms: mapped, not in the heap nor in the budget); those of
	// the rest in q and scales. Their int8 components, dims a record —
	// 384 bytes at 384 dimensions, six cache lines, where a record with
	// its scale spans seven — and their scales apart.
	mapped int
	mq     []int8
	ms     []float32
	q      []int8
	scales []float32
}

// screen adds the first n ids of p (n at most len(p.ids)) to sc, their
// records read in sequence with a prefetch ahead.
func (p *pack) screen(sc *screen, n, dims int) {
	m := min(p.mapped, n)
	screenRecords(sc, p.ids[:m], p.mq, p.ms, dims)
	screenRecords(sc, p.ids[m:n], p.q, p.scales, dims)
}

func screenRecords(sc *screen, ids []uint64, q []int8, scales []float32, dims int) {
	for i, id := range ids {
		if i+quantPrefetch < len(ids) { // in sequence, but ahead of the CPU's own fetching
			prefetch(q[(i+quantPrefetch)*dims : (i+quantPrefetch+1)*dims])
		}
		sc.add(id, q[i*dims:(i+1)*dims], scales[i])
	}
}

// packEntry is the pack of one name.
type packEntry struct {
	cur  atomic.Pointer[pack]
	used atomic.Int64 // when it was last searched (Unix nanoseconds)
	// again: it was searched within packIdle before that (may take the
	// room of idle packs).
	again atomic.Bool
	mu    sync.Mutex // held by the one extending or replacing it
	// Under mu:
	bytes   int64 // the capacity of cur's slices, reserved in packs.bytes
	dropped bool  // taken out of packs for another's room
}

// packs are an index's packs by name, within a budget of bytes.
type packs struct {
	budget int64
	mu     sync.Mutex
	byName map[string]*packEntry
	bytes  int64 // reserved by the entries of byName
	// mapped are the packs a restore mapped from its snapshot (nil:
	// none); written with kmu held, read with it read-held.
	mapped *mapped
}

// mapped are the packs of a restored snapshot, their records side by
// side in its file (snapshot.go).
type mapped struct {
	byName map[string]*pack
	ids    []uint64  // every pack's, one pack after the other
	q      []int8    // their records' components, dims each
	scales []float32 // and scales
	// slot is, by id, 1 + the index in ids of its first place in a pack
	// (0: in none).
	slot []uint32
}

// record is the record of id in a mapped pack (kmu read-held), if any.
func (m *mapped) record(id uint64, dims int) (Quantized, bool) {
	if m == nil || id >= uint64(len(m.slot)) || m.slot[id] == 0 {
		return Quantized{}, false
	}
	s := int(m.slot[id] - 1)
	return Quantized{q: m.q[s*dims : (s+1)*dims], scale: m.scales[s]}, true
}

// PackBytes is the heap the packs hold, within Options.PackBytes (those
// a restore mapped from its snapshot not counted).
func (x *Index) PackBytes() int64 {
	x.packs.mu.Lock()
	defer x.packs.mu.Unlock()
	return x.packs.bytes
}

// entry is the entry of name, made if it has none.
func (ps *packs) entry(name string) *packEntry {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	e := ps.byName[name]
	if e == nil {
		if ps.byName == nil {
			ps.byName = map[string]*packEntry{}
		}
		e = &packEntry{}
		ps.byName[name] = e
	}
	return e
}

// reserve takes n more bytes for e (e.mu held), dropping packs unused
// since idleBefore, the least recently used first, to make room when e was
// searched again within packIdle; false when there is none.
func (ps *packs) reserve(e *packEntry, n int64, idleBefore int64) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for ps.bytes+n > ps.budget {
		if !e.again.Load() {
			return false
		}
		var victim *packEntry
		var name string
		for nm, o := range ps.byName {
			// A pack mapped from a snapshot holds little of the budget
			// (its ids, and the records of those added since): kept.
			if p := o.cur.Load(); p != nil && p.mapped > 0 {
				continue
			}
			if o != e && o.used.Load() < idleBefore && (victim == nil || o.used.Load() < victim.used.Load()) {
				victim, name = o, nm
			}
		}
		if victim == nil || !victim.mu.TryLock() {
			return false
		}
		ps.bytes -= victim.bytes
		victim.bytes, victim.dropped = 0, true
		victim.cur.Store(nil)
		delete(ps.byName, name)
		victim.mu.Unlock()
	}
	ps.bytes += n
	e.bytes += n
	return true
}

// release gives back n bytes of e (e.mu held).
func (ps *packs) release(e *packEntry, n int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.bytes -= n
	e.bytes -= n
}

// reset drops every pack (the ids name other vectors). Called with kmu
// held, so that no extend (under kmu read-held) runs.
func (ps *packs) reset() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, e := range ps.byName {
		e.mu.Lock()
		e.cur.Store(nil)
		e.bytes, e.dropped = 0, true
		e.mu.Unlock()
	}
	ps.byName, ps.bytes, ps.mapped = nil, 0, nil
}

// install makes the packs a restore mapped the packs of their names
// (none when packs are off). Called with kmu held, after reset.
func (ps *packs) install(m *mapped) {
	if ps.budget <= 0 || m == nil || len(m.byName) == 0 {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.mapped = m
	ps.byName = make(map[string]*packEntry, len(m.byName))
	for name, p := range m.byName {
		e := &packEntry{}
		e.cur.Store(p)
		ps.byName[name] = e
	}
}

// packable reports whether run r may be packed: named, long enough and
// spread out enough for its records to lie apart.
func (ps *packs) packable(r Run) bool {
	n := len(r.IDs)
	if ps.budget <= 0 || r.Name == "" || n < packMin {
		return false
	}
	lo, hi := min(r.IDs[0], r.IDs[n-1]), max(r.IDs[0], r.IDs[n-1])
	return hi-lo+1 >= packSpread*uint64(n)
}

// packOf returns r's entry and its pack's prefix valid for r (how many of
// r's ids its records are) — nil and 0 when r is not packable; 0 when its
// pack is missing or no longer r's.
func (x *Index) packOf(r Run) (*packEntry, *pack, int) {
	if !x.packs.packable(r) {
		return nil, nil, 0
	}
	e := x.packs.entry(r.Name)
	now := x.clock.Now().UnixNano()
	e.again.Store(now-e.used.Swap(now) < int64(packIdle))
	p := e.cur.Load()
	if p == nil {
		return e, nil, 0
	}
	n := min(len(p.ids), len(r.IDs))
	if !slices.Equal(p.ids[:n], r.IDs[:n]) {
		return e, nil, 0
	}
	return e, p, n
}

// extend packs the records of r's ids its pack lacks (all of them when
// it has none, or one of other ids), unless another is at it, fewer than
// packGrow are new, or the budget has no room. Called with kmu read-held
// (it reads the records).
func (x *Index) extend(e *packEntry, r Run) {
	if !e.mu.TryLock() {
		return
	}
	defer e.mu.Unlock()
	if e.dropped {
		return
	}
	var np pack
	p := e.cur.Load()
	if p != nil && !slices.Equal(p.ids, r.IDs[:min(len(p.ids), len(r.IDs))]) {
		e.cur.Store(nil) // no longer r's
		x.packs.release(e, e.bytes)
		p = nil
	}
	if p != nil {
		if len(r.IDs)-len(p.ids) < packGrow {
			return // extended meanwhile, or r is older than it
		}
		np = *p // its slices appended to past their ends, which p's readers do not read
	}
	if want := len(r.IDs); cap(np.ids) < want {
		// Room for an eighth more: a growing run is copied some twenty
		// times from packMin to 10,000 ids, not at every extension.
		room := want + want/8
		grown := int64(room)*8 + int64(room-np.mapped)*int64(x.dims+4) - e.bytes
		if !x.packs.reserve(e, grown, x.clock.Now().Add(-packIdle).UnixNano()) {
			return
		}
		np.ids = append(make([]uint64, 0, room), np.ids...)
		np.q = append(make([]int8, 0, (room-np.mapped)*x.dims), np.q...)
		np.scales = append(make([]float32, 0, room-np.mapped), np.scales...)
	}
	for _, id := range r.IDs[len(np.ids):] {
		rec := x.qv.at(uint32(id))
		np.ids = append(np.ids, id)
		np.q = append(np.q, rec[:x.dims]...)
		np.scales = append(np.scales, recordScale(rec[x.dims:]))
	}
	e.cur.Store(&np)
}
