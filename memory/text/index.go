// Package text is Memoria's full-text index: BM25 over memory text with
// English analysis (Unicode words, possessives dropped, lower case, stop
// words, Porter stemming).
//
// The index lives in memory: an inverted index (each term's postings) to
// find and score candidates, and each document's terms to score the
// candidates another path names. It is derived state, persisted in its own
// directory as a snapshot (file "index": the layout version, a
// generation, the watermark — the insertion-log position of the last
// memory it holds — and every document's terms, under a CRC-32C) and a log
// of the batches applied since (file "log-<generation>", each record
// under its own CRC, written when the batch is applied, synced by Flush).
// When the log outgrows the snapshot, at Close, and at Compact (which a
// forget's purge calls, so that no file keeps a deleted document's terms),
// a new snapshot replaces both (written aside, synced, renamed). Open replays the log up
// to its first incomplete or damaged record, which a crash leaves at its
// end, and the owner replays the insertion log past the watermark.
//
// An index of another layout is refused (ErrStale), a damaged snapshot
// too (ErrCorrupt); the owner rebuilds either from the store. A write
// that fails (a full disk) does not fail the batch: searches go on from
// memory, the log stops at the last batch it holds, and the next snapshot
// (at Flush, Close or the next compaction) starts it again; until then a
// restart catches up from the store.
package text

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/memoria-ai/memoria/memory/base"
)

// Version is the index layout: bump it when the layout or the analysis
// changes, and existing indexes will be rebuilt. (Layouts 1 and 2 were
// bleve's.)
const Version = "3"

// ErrStale means the directory holds an index of another version:
// delete it and rebuild.
var ErrStale = errors.New("text: index is stale: rebuild it")

// ErrCorrupt means the index's files are damaged, or a search or a batch
// broke an invariant: delete it and rebuild.
var ErrCorrupt = errors.New("text: index is corrupt: rebuild it")

// Doc is one memory to index.
type Doc struct {
	ID    string // the memory's CID
	Text  string
	Sonas []string // uuids of the sonas it belongs to
}

// Hit is one search result.
type Hit struct {
	ID    string
	Score float64 // BM25
}

// BM25's parameters, for every index of the process (SetBM25).
var bm25K1, bm25B = 1.2, 0.75

// SetBM25 sets BM25's k1 and b for every index of the process; call it
// before searching.
func SetBM25(k1, b float64) { bm25K1, bm25B = k1, b }

// Index is a BM25 full-text index. It is safe for concurrent use.
type Index struct {
	mu        sync.RWMutex // guards what follows, up to pmu
	terms     map[string]uint32
	names     []string       // by term id: the term
	df        []uint32       // by term id: live documents holding it
	post      [][]posting    // by term id: its postings, dead slots included
	tokens    uint64         // the live documents' lengths summed
	docs      *base.KeyIndex // a document's id → its slot (slotID), of the live ones
	slots     []slot
	runs          // the slots' ids, sonas, terms and frequencies
	dead      int // dead slots
	sonaIDs   map[string]uint32
	sonaNames []string
	bySona    [][]uint32 // by sona id: its documents' slots, ascending, dead ones included until compactSlots
	owner     []uint32   // by slot: its one sona, ownerMany, or ownerDead (relistSlot)
	watermark uint64
	pruneFrom uint64 // collection size from which searches take two passes

	pmu      sync.Mutex // guards the files; taken before mu
	dir      string
	gen      uint64
	log      *os.File
	logSize  int64
	snapSize int64
	logErr   error // the log missed a batch: nothing is appended until the next snapshot
	logMin   int64 // the log's size from which it may be compacted
}

// posting is one document holding a term, with the term's frequency in it
// and its slot's owner (postOwner), in what was padding.
type posting struct {
	slot  uint32
	freq  uint16 // saturated at 65,535
	owner uint16
}

// slot is one document: its id, its terms (ids ascending, with their
// frequencies), its length in tokens and its sonas (ascending) — each a
// run in the index's pools, read with idOf, termsOf and sonasOf.
type slot struct {
	id, idLen     uint32 // in strs
	sonas, nSonas uint32 // in sonaRuns
	terms, nTerms uint32 // in narrowTerms, or wideTerms when wide
	length        uint32
	dead          bool
	wide          bool // a term's id is 65,536 or more: the run is wideTerms'
	freqs         bool // a term's frequency is not 1: the run holds them after the ids
}

// runs are the slots' ids, sonas and terms, in pools. A document's terms
// are one run: their ids, then their frequencies when one is not 1 (else
// none is held). Its ids are two bytes each when all are under 65,536 —
// a term's id is its order of first use, so a collection's common words
// have the low ones —, else four. At 1M memories of the bench's texts
// (12.9M terms, 99.7% of them once in their memory) the terms took 77 MB
// as ids of four bytes and frequencies of two beside them, 26 MB now
// (README, stop 107).
type runs struct {
	strs        pool[byte]
	sonaRuns    pool[uint32]
	narrowTerms pool[uint16]
	wideTerms   pool[uint32]
}

// newSlot is a slot of a document, its runs added to the pools: its terms'
// ids ascending, and their frequencies.
func (x *runs) newSlot(id string, ids []uint32, freqs []uint16, length uint32, sonas []uint32) slot {
	sl := x.slotOf(id, length, sonas)
	sl.nTerms = uint32(len(ids))
	sl.wide = len(ids) > 0 && ids[len(ids)-1] > math.MaxUint16
	sl.freqs = slices.ContainsFunc(freqs, func(f uint16) bool { return f != 1 })
	n := len(ids)
	if sl.freqs {
		n *= 2
	}
	if sl.wide {
		var run []uint32
		sl.terms, run = x.wideTerms.grow(n)
		copy(run, ids)
		if sl.freqs {
			for i, f := range freqs {
				run[len(ids)+i] = uint32(f)
			}
		}
	} else {
		var run []uint16
		sl.terms, run = x.narrowTerms.grow(n)
		for i, id := range ids {
			run[i] = uint16(id)
		}
		if sl.freqs {
			copy(run[len(ids):], freqs)
		}
	}
	return sl
}

// copySlot is slot s of old's runs, its runs added to x's pools.
func (x *runs) copySlot(old *runs, s *slot) slot {
	sl := x.slotOf(old.idOf(s), s.length, old.sonasOf(s))
	sl.nTerms, sl.wide, sl.freqs = s.nTerms, s.wide, s.freqs
	if n := s.termsLen(); s.wide {
		sl.terms = x.wideTerms.add(old.wideTerms.get(s.terms, n))
	} else {
		sl.terms = x.narrowTerms.add(old.narrowTerms.get(s.terms, n))
	}
	return sl
}

// slotOf is a slot of a document, its id and sonas added to the pools.
func (x *runs) slotOf(id string, length uint32, sonas []uint32) slot {
	return slot{id: x.strs.add(unsafe.Slice(unsafe.StringData(id), len(id))), idLen: uint32(len(id)),
		sonas: x.sonaRuns.add(sonas), nSonas: uint32(len(sonas)), length: length}
}

// termsLen is the length of s's run of terms.
func (s *slot) termsLen() uint32 {
	if s.freqs {
		return 2 * s.nTerms
	}
	return s.nTerms
}

// idOf is the id of slot s's document.
func (x *runs) idOf(s *slot) string { return str(&x.strs, s.id, s.idLen) }

// termsOf are the terms of slot s's document (none once it is dead).
func (x *runs) termsOf(s *slot) docTerms {
	if s.wide {
		return docTerms{wide: x.wideOf(s), isWide: true}
	}
	return docTerms{narrow: x.narrowOf(s)}
}

// narrowOf and wideOf are slot s's run of terms, of ids of two bytes
// (unless s.wide) or four.
func (x *runs) narrowOf(s *slot) termRun[uint16] {
	return termRun[uint16]{x.narrowTerms.get(s.terms, s.termsLen()), int(s.nTerms), s.freqs}
}

func (x *runs) wideOf(s *slot) termRun[uint32] {
	return termRun[uint32]{x.wideTerms.get(s.terms, s.termsLen()), int(s.nTerms), s.freqs}
}

// termRun is a document's terms as its slot's run holds them: n ids
// ascending, then their frequencies if freqs (else each is 1). A loop
// over many documents reads each in a run of its own width (scoreRun,
// addPostings); docTerms asks the width at each term. Not to be changed.
type termRun[T uint16 | uint32] struct {
	run   []T
	n     int
	freqs bool
}

// id is the i-th term's id.
func (r termRun[T]) id(i int) uint32 { return uint32(r.run[i]) }

// freq is the i-th term's frequency.
func (r termRun[T]) freq(i int) uint16 {
	if !r.freqs {
		return 1
	}
	return uint16(r.run[r.n+i])
}

// find is the place of the term id, if the document holds it (none past
// the run's width).
func (r termRun[T]) find(id uint32) (int, bool) {
	if uint64(id) > uint64(^T(0)) {
		return 0, false
	}
	return slices.BinarySearch(r.run[:r.n], T(id))
}

// docTerms are a document's terms, in a run of either width.
type docTerms struct {
	narrow termRun[uint16] // unless isWide
	wide   termRun[uint32] // when isWide
	isWide bool
}

func (t docTerms) len() int {
	if t.isWide {
		return t.wide.n
	}
	return t.narrow.n
}

func (t docTerms) id(i int) uint32 {
	if t.isWide {
		return t.wide.id(i)
	}
	return t.narrow.id(i)
}

func (t docTerms) freq(i int) uint16 {
	if t.isWide {
		return t.wide.freq(i)
	}
	return t.narrow.freq(i)
}

func (t docTerms) find(id uint32) (int, bool) {
	if t.isWide {
		return t.wide.find(id)
	}
	return t.narrow.find(id)
}

// sonasOf are the sonas of slot s's document, ascending (none once it is
// dead); not to be changed.
func (x *runs) sonasOf(s *slot) []uint32 { return x.sonaRuns.get(s.sonas, s.nSonas) }

// analysed is a document's analysis: its terms ascending, their
// frequencies, its length in tokens.
type analysed struct {
	id     string
	terms  []string
	freqs  []uint16
	length uint32
	sonas  []string
}

func analyseDoc(d Doc) analysed {
	toks := analyze(d.Text)
	counts := map[string]int{}
	for _, t := range toks {
		counts[t]++
	}
	a := analysed{id: d.ID, length: uint32(len(toks)), sonas: d.Sonas, terms: make([]string, 0, len(counts))}
	for t := range counts {
		a.terms = append(a.terms, t)
	}
	slices.Sort(a.terms)
	a.freqs = make([]uint16, len(a.terms))
	for i, t := range a.terms {
		a.freqs[i] = uint16(min(counts[t], math.MaxUint16))
	}
	return a
}

func newIndex(dir string) *Index {
	x := &Index{dir: dir, terms: map[string]uint32{}, sonaIDs: map[string]uint32{}, pruneFrom: pruneFrom, logMin: 1 << 20}
	x.docs = base.NewKeyIndex(0, x.slotID)
	return x
}

const (
	snapshotFile = "index"
	logPrefix    = "log-"
	snapMagic    = "MTXI"
)

// Open opens the index in dir, creating it if dir does not exist.
func Open(dir string) (*Index, error) {
	x := newIndex(dir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("text: create %s: %w", dir, err)
		}
		x.pmu.Lock()
		defer x.pmu.Unlock()
		if err := x.snapshot(); err != nil {
			return nil, fmt.Errorf("text: create %s: %w", dir, err)
		}
		return x, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s holds no index of layout %s (one of an older layout, or one whose creation was cut short)", ErrStale, dir, Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := x.decodeSnapshot(b); err != nil {
		return nil, err
	}
	x.snapSize = int64(len(b))
	if err := x.openLog(); err != nil {
		return nil, err
	}
	return x, nil
}

// openLog replays the log of the snapshot's generation up to its first
// incomplete or damaged record, cuts it there, opens it for appending and
// removes what older generations left.
func (x *Index) openLog() error {
	path := filepath.Join(x.dir, logPrefix+strconv.FormatUint(x.gen, 10))
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	good := 0
	for good+8 <= len(b) {
		n := int(binary.BigEndian.Uint32(b[good:]))
		sum := binary.BigEndian.Uint32(b[good+4:])
		if n > len(b)-good-8 || crc32.Checksum(b[good+8:good+8+n], castagnoli) != sum {
			break
		}
		if err := x.replay(b[good+8 : good+8+n]); err != nil {
			break // a record that checks but does not decode: cut there too
		}
		good += 8 + n
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(int64(good)); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(int64(good), 0); err != nil {
		f.Close()
		return err
	}
	x.log, x.logSize = f, int64(good)
	names, _ := filepath.Glob(filepath.Join(x.dir, logPrefix+"*"))
	for _, n := range names {
		if n != path {
			os.Remove(n)
		}
	}
	// A snapshot whose write a crash cut short (durable.Write's temporary).
	parts, _ := filepath.Glob(filepath.Join(x.dir, "."+snapshotFile+".part-*"))
	for _, n := range parts {
		os.Remove(n)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Watermark is the insertion-log position of the last memory indexed.
func (x *Index) Watermark() (uint64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.watermark, nil
}

// Len is the number of documents.
func (x *Index) Len() (uint64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return uint64(x.docs.Len()), nil
}

// Apply indexes docs (again, for documents it holds: their sonas change)
// and moves the watermark to watermark, atomically. A batch that panics
// reports ErrCorrupt.
func (x *Index) Apply(docs []Doc, watermark uint64) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: indexing panicked: %v", ErrCorrupt, r)
		}
	}()
	as := make([]analysed, len(docs))
	for i, d := range docs {
		as[i] = analyseDoc(d)
	}
	x.change(watermark, encodeApply(as, watermark), func() {
		for _, a := range as {
			x.put(a)
		}
	})
	return nil
}

// Delete removes documents and sets the watermark (for tools and tests
// that repair an index).
func (x *Index) Delete(docs []Doc, watermark uint64) error {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	x.change(watermark, encodeDelete(ids, watermark), func() {
		for _, id := range ids {
			x.remove(id)
		}
	})
	return nil
}

// change applies a change to the index and moves the watermark under mu,
// then logs its record: both under pmu, so the log keeps the order of the
// changes.
func (x *Index) change(watermark uint64, record []byte, apply func()) {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	x.mu.Lock()
	apply()
	x.watermark = watermark
	x.compactSlots()
	x.mu.Unlock()
	x.append(record)
}

// put adds a document, or changes the sonas of one it holds. The caller
// holds mu.
func (x *Index) put(a analysed) {
	sonas := make([]uint32, len(a.sonas))
	for i, s := range a.sonas {
		id, ok := x.sonaIDs[s]
		if !ok {
			id = uint32(len(x.sonaNames))
			x.sonaIDs[s] = id
			x.sonaNames = append(x.sonaNames, s)
		}
		sonas[i] = id
	}
	slices.Sort(sonas)
	sonas = slices.Compact(sonas)
	if s, ok := x.docs.Get(a.id); ok {
		if sl := &x.slots[s]; x.sameTerms(sl, a) { // a CID's text does not change: its sonas do
			x.relistSlot(s, x.sonasOf(sl), sonas)
			x.setPostOwners(s, x.termsOf(sl))
			sl.sonas, sl.nSonas = x.sonaRuns.add(sonas), uint32(len(sonas))
			return
		}
		x.remove(a.id)
	}
	tids := make([]uint32, len(a.terms))
	n := uint32(len(x.slots))
	o := postOwner(ownerOf(sonas)) // as relistSlot makes it, below
	x.tokens += uint64(a.length)
	for i, t := range a.terms {
		id, ok := x.terms[t]
		if !ok {
			id = uint32(len(x.names))
			x.terms[t] = id
			x.names = append(x.names, t)
			x.df = append(x.df, 0)
			x.post = append(x.post, nil)
		}
		tids[i] = id
		x.df[id]++
		x.post[id] = append(x.post[id], posting{slot: n, freq: a.freqs[i], owner: o})
	}
	// Ids ascending, for the binary search of scoring.
	order := make([]int, len(tids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(tids[i], tids[j]) })
	ids, freqs := make([]uint32, len(order)), make([]uint16, len(order))
	for k, i := range order {
		ids[k], freqs[k] = tids[i], a.freqs[i]
	}
	x.slots = append(x.slots, x.newSlot(a.id, ids, freqs, a.length, sonas))
	x.docs.Put(a.id, n)
	x.relistSlot(n, nil, sonas)
}

// The owner of a slot is what a sona-scoped walk of the postings
// (accumulate) checks first: its one sona, else ownerMany (none or
// several: its sonas are read) or ownerDead. At 1M documents in 100 sonas,
// 99 of every 100 postings such a walk takes are of other sonas, and each
// read of its slot (96 bytes then) and then of its score was a read of
// memory the caches did not hold; the owners take 4 bytes a slot (README,
// stop 51).
const (
	ownerMany = math.MaxUint32
	ownerDead = math.MaxUint32 - 1
)

// A posting's owner is its slot's, as 16 bits (postOwner): a sona-scoped
// walk of a term's postings at 1M documents read each posting's slot's
// owner from the owners' array, a read of memory the caches did not
// hold for each of the 99 postings in 100 that are other sonas' (5% of a
// recall's CPU at 1M; README, stop 53). postMany is ownerMany's, and a
// sona's whose id takes more than 16 bits: the walk reads the slot's
// owner then.
const (
	postMany = math.MaxUint16 - 1
	postDead = math.MaxUint16
)

// postOwner is owner o (of a slot) as a posting holds it.
func postOwner(o uint32) uint16 {
	switch {
	case o == ownerDead:
		return postDead
	case o >= postMany:
		return postMany
	}
	return uint16(o)
}

// setPostOwners gives the postings of slot n, of its terms t, its
// owner, after the owner changed (a new slot's postings are made with
// it). The caller holds mu.
func (x *Index) setPostOwners(n uint32, t docTerms) {
	o := postOwner(x.owner[n])
	for i := range t.len() {
		ps := x.post[t.id(i)]
		if i, ok := slices.BinarySearchFunc(ps, n, func(p posting, n uint32) int { return cmp.Compare(p.slot, n) }); ok {
			ps[i].owner = o
		}
	}
}

// ownerOf is the owner of a live slot of sonas.
func ownerOf(sonas []uint32) uint32 {
	if len(sonas) == 1 {
		return sonas[0]
	}
	return ownerMany
}

// relistSlot moves slot n from the lists of the sonas was to those of
// now (both ascending), and makes its owner now's. The caller holds mu.
func (x *Index) relistSlot(n uint32, was, now []uint32) {
	for len(x.bySona) < len(x.sonaNames) {
		x.bySona = append(x.bySona, nil)
	}
	for uint32(len(x.owner)) <= n {
		x.owner = append(x.owner, ownerMany)
	}
	x.owner[n] = ownerOf(now)
	for _, s := range was {
		if _, kept := slices.BinarySearch(now, s); !kept {
			if i, ok := slices.BinarySearch(x.bySona[s], n); ok {
				x.bySona[s] = slices.Delete(x.bySona[s], i, i+1)
			}
		}
	}
	for _, s := range now {
		if i, ok := slices.BinarySearch(x.bySona[s], n); !ok {
			x.bySona[s] = slices.Insert(x.bySona[s], i, n)
		}
	}
}

// relist makes every sona's list of slots, and every slot's owner,
// again. The caller holds mu.
func (x *Index) relist() {
	x.bySona = make([][]uint32, len(x.sonaNames))
	x.owner = make([]uint32, len(x.slots))
	for n := range x.slots {
		sl := &x.slots[n]
		sonas := x.sonasOf(sl)
		x.owner[n] = ownerOf(sonas)
		if sl.dead {
			x.owner[n] = ownerDead
		}
		for _, s := range sonas {
			x.bySona[s] = append(x.bySona[s], uint32(n))
		}
	}
}

// sameTerms reports whether the slot holds exactly a's terms.
func (x *Index) sameTerms(s *slot, a analysed) bool {
	terms := x.termsOf(s)
	if terms.len() != len(a.terms) || s.length != a.length {
		return false
	}
	for i, t := range a.terms {
		id, ok := x.terms[t]
		if !ok {
			return false
		}
		k, found := terms.find(id)
		if !found || terms.freq(k) != a.freqs[i] {
			return false
		}
	}
	return true
}

// remove forgets a document, if held. The caller holds mu.
func (x *Index) remove(id string) {
	n, ok := x.docs.Get(id)
	if !ok {
		return
	}
	s := &x.slots[n]
	terms := x.termsOf(s)
	for i := range terms.len() {
		x.df[terms.id(i)]--
	}
	x.tokens -= uint64(s.length)
	x.owner[n] = ownerDead
	x.setPostOwners(n, terms)
	s.dead = true
	s.nTerms, s.nSonas = 0, 0 // their runs are left in the pools
	x.docs.Delete(id)         // its slot keeps the id
	x.dead++
}

// compactSlots drops dead slots from the postings once they are a
// quarter of all. The caller holds mu.
func (x *Index) compactSlots() {
	if x.dead < 1024 || x.dead*4 < len(x.slots) {
		return
	}
	renum := make([]uint32, len(x.slots))
	alive := make([]bool, len(x.slots))
	n := uint32(0)
	for i, s := range x.slots {
		if !s.dead {
			alive[i], renum[i] = true, n
			n++
		}
	}
	for t, ps := range x.post {
		out := ps[:0]
		for _, p := range ps {
			if alive[p.slot] {
				out = append(out, posting{slot: renum[p.slot], freq: p.freq, owner: p.owner})
			}
		}
		x.post[t] = out
	}
	// The live slots' runs into new pools, the dead ones' left behind.
	old := x.runs
	x.runs = runs{}
	kept := x.slots[:0]
	for i := range x.slots {
		if alive[i] {
			kept = append(kept, x.copySlot(&old, &x.slots[i]))
		}
	}
	clear(x.slots[len(kept):])
	x.slots, x.dead = kept, 0
	x.docs.Reset(len(kept)) // every live slot renumbered
	for i := range kept {
		x.docs.Put(x.idOf(&kept[i]), uint32(i))
	}
	x.relist()
}

// Has reports whether the index holds a document with this id.
func (x *Index) Has(id string) (bool, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	_, ok := x.docs.Get(id)
	return ok, nil
}

// HasTerm reports whether a document the index holds has term (analysed
// already: lower case, stemmed).
func (x *Index) HasTerm(term string) (bool, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	id, ok := x.terms[term]
	return ok && x.df[id] > 0, nil
}

// Compact writes a new snapshot and starts an empty log, so that no file
// of the index keeps what a deleted document said: a snapshot holds the
// live documents and their terms only, and the log that recorded the
// deleted ones is removed.
func (x *Index) Compact(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.pmu.Lock()
	defer x.pmu.Unlock()
	if x.logErr == errClosed {
		return errClosed
	}
	return x.snapshot()
}

// slotID is the id of the document of slot n (for docs).
func (x *Index) slotID(n uint32) string { return x.idOf(&x.slots[n]) }
