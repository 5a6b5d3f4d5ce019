package store

import (
	"bytes"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/memoria-ai/memoria/memory/base"
)

// OpenMemory opens an empty store held in memory: a sorted list of
// entries, replaced whole by each commit, so that a view reads one
// immutable snapshot and never blocks the committer. It has the Badger
// backend's semantics (the conformance suite storetest holds both to
// them), including a transaction's size limit (15% of MemTableMB, values
// from 64 KiB counting as pointers, as Badger keeps them in its value log),
// but no files: nothing survives Close, there is no acknowledged mark and
// no free-space check unless Options.FreeSpace is set. For tests and for
// nodes that need no durability.
func OpenMemory(o Options) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	eng := &memEngine{maxTxn: int64(o.MemTableMB) << 20 * 15 / 100}
	eng.state.Store(&memState{})
	eng.last.Store(eng.state.Load())
	s, err := newStore(eng, "(memory)", o)
	if err != nil {
		return nil, err
	}
	s.start()
	s.startGC(o)
	return s, nil
}

// memEngine is the in-memory backend.
//
// As on Badger, a commit is read by the committer's next transaction at
// once (last) and by the views once it is shown (state; Store.tell).
type memEngine struct {
	state  atomic.Pointer[memState] // the last shown: views read it
	last   atomic.Pointer[memState] // the last committed: write transactions read it
	maxTxn int64                    // bytes of one transaction
}

// memState is one committed state: entries sorted by key, never modified.
type memState struct{ entries []valueItem }

func (st *memState) find(key []byte) (int, bool) {
	i := sort.Search(len(st.entries), func(i int) bool { return bytes.Compare(st.entries[i].key, key) >= 0 })
	return i, i < len(st.entries) && bytes.Equal(st.entries[i].key, key)
}

func (e *memEngine) view(told uint64, fn func(Reader) error) error {
	return fn(&memBatch{base: e.state.Load(), told: told})
}

func (e *memEngine) begin() batch {
	return &memBatch{eng: e, base: e.last.Load(), writes: map[string]*write{}}
}

func (e *memEngine) show() { e.state.Store(e.last.Load()) }

func (e *memEngine) check() error { return nil }
func (e *memEngine) working(bool) {}
func (e *memEngine) close() error { return nil }

// memBatch reads a state and, in a write transaction, buffers writes over
// it until commit.
type memBatch struct {
	eng    *memEngine
	base   *memState
	writes map[string]*write // nil in a view
	size   int64
	told   uint64 // the view's (see Store.View), 0 in a write transaction
}

func (b *memBatch) toldBefore() uint64 { return b.told }

func (b *memBatch) Get(key []byte) ([]byte, error) {
	it, err := b.Item(key)
	if err != nil {
		return nil, err
	}
	return it.ValueCopy(nil)
}

func (b *memBatch) Item(key []byte) (Item, error) {
	if w, ok := b.writes[string(key)]; ok {
		if w.delete {
			return nil, base.ErrNotFound
		}
		return valueItem{slices.Clone(key), w.val}, nil
	}
	if i, ok := b.base.find(key); ok {
		return b.base.entries[i], nil
	}
	return nil, base.ErrNotFound
}

func (b *memBatch) Has(key []byte) (bool, error) { return hasItem(b, key) }

// NewIterator iterates over the state and the transaction's writes so far,
// as they are when it is made.
func (b *memBatch) NewIterator(o IterOptions) Iterator {
	return &memIterator{entries: b.merged(o.Prefix), reverse: o.Reverse, pos: -1}
}

// merged are the entries under prefix with the writes applied.
func (b *memBatch) merged(prefix []byte) []valueItem {
	lo, _ := b.base.find(prefix)
	var out []valueItem
	for _, e := range b.base.entries[lo:] {
		if !bytes.HasPrefix(e.key, prefix) {
			break
		}
		if _, ok := b.writes[string(e.key)]; !ok {
			out = append(out, e)
		}
	}
	for k, w := range b.writes {
		if !w.delete && bytes.HasPrefix([]byte(k), prefix) {
			out = append(out, valueItem{[]byte(k), w.val})
		}
	}
	if len(b.writes) > 0 {
		slices.SortFunc(out, func(x, y valueItem) int { return bytes.Compare(x.key, y.key) })
	}
	return out
}

func (b *memBatch) set(key, val []byte) error {
	return b.put(key, &write{val: slices.Clone(val)})
}

func (b *memBatch) delete(key []byte) error { return b.put(key, &write{delete: true}) }

func (b *memBatch) wrote(key []byte) bool {
	_, ok := b.writes[string(key)]
	return ok
}

func (b *memBatch) put(key []byte, w *write) error {
	n := memEntrySize(key, *w)
	if b.size+n > b.eng.maxTxn {
		return errTxnTooBig
	}
	b.size += n
	b.writes[string(key)] = w
	return nil
}

// memEntrySize is what a write at key counts against a transaction's
// limit: as in Badger, a value bound for the value log only by its
// pointer.
func memEntrySize(key []byte, w write) int64 {
	n := int64(len(key)) + entryOverhead
	if !valueLogged(key, len(w.val)) {
		n += int64(len(w.val))
	}
	return n
}

func (b *memBatch) fits(w *tx) bool {
	size := b.size
	for _, k := range w.order {
		size += memEntrySize([]byte(k), w.writes[k])
	}
	return size <= b.eng.maxTxn
}

func (b *memBatch) commit() error {
	next := &memState{entries: make([]valueItem, 0, len(b.base.entries)+len(b.writes))}
	keys := make([]string, 0, len(b.writes))
	for k := range b.writes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	old := b.base.entries
	for _, k := range keys {
		for len(old) > 0 && string(old[0].key) < k {
			next.entries = append(next.entries, old[0])
			old = old[1:]
		}
		if len(old) > 0 && string(old[0].key) == k {
			old = old[1:]
		}
		if w := b.writes[k]; !w.delete {
			next.entries = append(next.entries, valueItem{[]byte(k), w.val})
		}
	}
	next.entries = append(next.entries, old...)
	b.eng.last.Store(next)
	b.writes = nil
	return nil
}

func (b *memBatch) discard() { b.writes = nil }

// memIterator walks a sorted list of entries.
type memIterator struct {
	entries []valueItem
	reverse bool
	pos     int
}

func (it *memIterator) Rewind() {
	if it.reverse {
		it.pos = len(it.entries) - 1
	} else {
		it.pos = 0
	}
}

func (it *memIterator) Seek(key []byte) {
	i := sort.Search(len(it.entries), func(i int) bool { return bytes.Compare(it.entries[i].key, key) >= 0 })
	if it.reverse && (i == len(it.entries) || !bytes.Equal(it.entries[i].key, key)) {
		i-- // the last key ≤ key
	}
	it.pos = i
}

func (it *memIterator) Valid() bool { return it.pos >= 0 && it.pos < len(it.entries) }

func (it *memIterator) Next() {
	if it.reverse {
		it.pos--
	} else {
		it.pos++
	}
}

func (it *memIterator) Item() Item { return it.entries[it.pos] }
func (it *memIterator) Close()     {}
