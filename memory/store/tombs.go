package store

import (
	"bytes"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// tombFilter is a Bloom filter of the tombstone keys (PrefixTombstone) a
// Badger store holds: a read of a tombstone the filter has never seen is
// answered "not found" without Badger. Nearly every block written asks for
// its tombstone (PutBlock: was it forgotten?) and so do the chains' and
// metadata's checks, and Badger looks for an absent key in every memtable
// and every level: at 10,000 sonas, six of an advance's 26 reads of Badger
// were of tombstones, none of which existed.
//
// No false negatives: it holds every tombstone key of the store from the
// open (load), every one a write transaction sets from before its
// commit (badgerBatch.set), and every one after a WriteBehind. A
// tombstone deleted stays in it (a false positive: Badger answers). It
// grows by parts, each holding twice the keys of the one before and at
// most about 1% false positives when full: a few percent over the few
// parts a store needs (six hold a million tombstones). Lookups take no
// lock.
type tombFilter struct {
	seed  maphash.Seed
	mu    sync.Mutex                   // adds
	parts atomic.Pointer[[]*bloomPart] // never empty; adds go to the last
}

// bloomPart is one Bloom filter of up to max keys, at bitsPerKey bits a
// key or more (its bits a power of two) with probes probes (at most about
// 1% false positives when full).
type bloomPart struct {
	bits []uint64 // read and set atomically
	mask uint64   // len(bits)*64 - 1
	n    int      // keys added (under tombFilter.mu)
	max  int
}

const (
	bitsPerKey    = 10
	probes        = 7
	firstPartKeys = 1 << 14
)

func newTombFilter() *tombFilter {
	f := &tombFilter{seed: maphash.MakeSeed()}
	parts := []*bloomPart{newBloomPart(firstPartKeys)}
	f.parts.Store(&parts)
	return f
}

func newBloomPart(keys int) *bloomPart {
	words := 1
	for words*64 < keys*bitsPerKey {
		words *= 2
	}
	return &bloomPart{bits: make([]uint64, words), mask: uint64(words*64 - 1), max: keys}
}

// add records key, a tombstone key. Safe to call more than once for a key.
func (f *tombFilter) add(key []byte) {
	h := maphash.Bytes(f.seed, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := *f.parts.Load()
	last := parts[len(parts)-1]
	if last.n >= last.max {
		last = newBloomPart(2 * last.max)
		grown := append(parts[:len(parts):len(parts)], last)
		f.parts.Store(&grown)
	}
	for i := range uint64(probes) {
		b := last.probe(h, i)
		atomic.OrUint64(&last.bits[b/64], 1<<(b%64))
	}
	last.n++
}

// probe is the bit of key's i-th probe in p, for key's hash h (double
// hashing: the hash's two halves, the second odd).
func (p *bloomPart) probe(h, i uint64) uint64 { return (h + i*(h>>32|1)) & p.mask }

// mayHold reports whether key may be a tombstone of the store: false
// means it surely is not.
func (f *tombFilter) mayHold(key []byte) bool {
	h := maphash.Bytes(f.seed, key)
	for _, p := range *f.parts.Load() {
		in := true
		for i := range uint64(probes) {
			b := p.probe(h, i)
			if atomic.LoadUint64(&p.bits[b/64])&(1<<(b%64)) == 0 {
				in = false
				break
			}
		}
		if in {
			return true
		}
	}
	return false
}

// absent reports whether key is surely not in the store: a tombstone key
// the filter has never seen. f may be nil (no filter: nothing is known).
func (f *tombFilter) absent(key []byte) bool {
	return f != nil && bytes.HasPrefix(key, PrefixTombstone) && !f.mayHold(key)
}

// load adds every tombstone key db holds.
func (f *tombFilter) load(db *badger.DB) error {
	return db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: PrefixTombstone})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			f.add(it.Item().Key())
		}
		return nil
	})
}
