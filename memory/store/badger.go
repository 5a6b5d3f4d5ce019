package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"golang.org/x/sys/unix"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
)

// valueThreshold is the size from which Badger keeps a value in its value
// log rather than in the LSM tree; the values of valueLogSpaces go there
// whatever their size.
const valueThreshold = 64 << 10

// valueLogSpaces are the key spaces whose values Badger keeps in its
// value log whatever their size: the memories' embeddings (v/,
// meta.VectorPrefix), written once with their memory, never rewritten,
// deleted only when it is forgotten, read only off the hot paths (the
// vector index keeps them), and no smaller compressed. In the LSM tree
// they were two fifths of what an advance wrote, carried through every
// memtable flush and compaction; in the value log they are written
// once. Values that are rewritten (metadata, link lists) stay in the
// tree, where a rewrite leaves no garbage for the value log's collection
// (gc.go); so do the evaluations (e/), written once too but text, which
// the tree's tables compress and the value log would not.
var valueLogSpaces = [][]byte{[]byte("v/")}

// newEntry is the Badger entry that writes val at key, for the value
// log when key is in valueLogSpaces.
func newEntry(key, val []byte) *badger.Entry {
	e := badger.NewEntry(key, val)
	if entryThreshold != ^uintptr(0) && valueLogged(key, len(val)) {
		// Badger takes an entry's threshold from its options unless the
		// entry has one of its own; 1 sends any value to the value log.
		*(*int64)(unsafe.Add(unsafe.Pointer(e), entryThreshold)) = 1
	}
	return e
}

// valueLogged reports whether a value of size bytes at key goes to the
// value log: a large one, or any in valueLogSpaces.
func valueLogged(key []byte, size int) bool {
	if size >= valueThreshold {
		return true
	}
	return size > 0 && slices.ContainsFunc(valueLogSpaces, func(p []byte) bool { return bytes.HasPrefix(key, p) })
}

// entryThreshold is the offset of a Badger entry's own value threshold
// (the unexported Entry.valThreshold, an int64, of Badger v4.9), or
// ^0 when this Badger has none: every value then goes by its size, as
// before, and TestValueLogSpaces fails, so that an upgrade of Badger
// that drops the field is seen.
var entryThreshold = func() uintptr {
	f, ok := reflect.TypeFor[badger.Entry]().FieldByName("valThreshold")
	if !ok || f.Type.Kind() != reflect.Int64 {
		return ^uintptr(0)
	}
	return f.Offset
}()

// Open opens (creating if needed) the Badger store in dir. Before Badger
// opens it, its tables and write-ahead logs are checked (integrity.go);
// after, a store holding fewer commits than it acknowledged is refused
// with ErrLostWrites, unless o.AcceptLoss.
func Open(dir string, o Options) (*Store, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	notes := &badgerNotes{}
	bo := badgerOptions(dir, o, notes)
	wals, replay, tables, err := checkDir(dir, bo, o)
	if err != nil {
		return nil, err
	}
	bo = fitMemtable(bo, replay, o.Logger)
	old := compressedTables(dir, tables)
	bo = bo.WithBlockCacheSize(blockCacheSize(o, old))
	if old.tables > 0 && o.Compression == options.None {
		o.Logger.Info("store: tables compressed by an earlier build or setting, rewritten uncompressed as compactions replace them",
			"tables", old.tables, "share_of_bytes", fmt.Sprintf("%.3f", old.share), "block_cache", bo.BlockCacheSize > 0)
	}
	db, err := badger.OpenManaged(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (is `memoria serve` running? use --server)", base.ErrLocked, dir)
		}
		return nil, fmt.Errorf("memory: open %s: %w", dir, classifyBadger(err))
	}
	if n, err := releaseValueLogPages(dir, math.MaxUint64); err != nil {
		o.Logger.Warn("store: the value log's pages read at open stay mapped", "err", err)
	} else if n > 0 {
		o.Logger.Info("store: released the value log's pages read at open", "mib", n>>20)
	}
	eng := &badgerEngine{db: db, dir: dir, notes: notes, tombs: newTombFilter(), tables: tables, hash: base.NewKeyHasher()}
	eng.version.Store(db.MaxVersion())
	eng.last.Store(db.MaxVersion())
	eng.reads.n = map[uint64]int{}
	eng.settle()
	if err := eng.tombs.load(db); err != nil {
		eng.close()
		return nil, fmt.Errorf("memory: reading the tombstones of %s: %w", dir, classifyBadger(err))
	}
	s, err := newStore(eng, dir, o)
	if err != nil {
		eng.close()
		return nil, err
	}
	s.notes = notes
	if s.space.free == nil {
		s.space.free = func() (uint64, error) { return freeSpace(dir) }
	}
	if err := s.openAcked(wals, o.AcceptLoss); err != nil {
		eng.close()
		return nil, err
	}
	s.start()
	s.startGC(o)
	s.startTableChecks(o)
	return s, nil
}

// badgerOptions are Badger's options for the store in dir.
func badgerOptions(dir string, o Options, notes *badgerNotes) badger.Options {
	return badger.DefaultOptions(dir).
		WithSyncWrites(true).       // one fsync per transaction, and one transaction per batch
		WithDetectConflicts(false). // the committer is the only writer
		WithBlockCacheSize(blockCacheSize(o, compressed{})).
		WithCompression(o.Compression).
		WithMemTableSize(int64(o.MemTableMB) << 20).
		WithNumMemtables(o.Memtables).
		WithNumLevelZeroTables(levelZeroTables(o.MemTableMB)).
		WithNumLevelZeroTablesStall(3 * levelZeroTables(o.MemTableMB)).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).      // a damaged value is an error, not other bytes
		WithValueThreshold(valueThreshold). // large blocks (files) live in the value log
		WithValueLogFileSize(int64(o.ValueLogMB) << 20).
		// Badger's metrics are process-wide expvar counters that every
		// read, write and Bloom filter check adds to (badger_get_num_user,
		// badger_get_num_lsm by level, …); nothing reads them — /metrics
		// has the store's own —, and their atomic adds on counters every
		// core shares and their maps' lookups were 0.3–0.8% of the CPU of
		// advances at 10,000 sonas (README, issue 15, stop 108).
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{o.Logger, notes})
}

// BadgerOptions are the Badger options a store of o opens a new
// directory dir with (block cache, compression, memtables, level 0,
// checksums, value threshold), logging to o.Logger, or nowhere: what a
// reference measured beside the store runs on (the bench's raw Badger).
func BadgerOptions(dir string, o Options) badger.Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return badgerOptions(dir, o, &badgerNotes{})
}

// blockCacheSize is the size of Badger's block cache for a store whose
// compressed tables are old: store.cache_mb when the tables it writes
// are compressed, or when compressed tables are at least
// oldCompressedShare of its tables' bytes — a store written by a build
// that compressed them (with Snappy, every build before stop 49 of issue
// 15) keeps them until compactions rewrite them —, else none. Badger
// reads a block of an uncompressed table in place, from the mapped file;
// it still asks the cache for it, and offers it to the cache, which never
// takes it (it weighs a mapped block by its bytes' capacity, there the
// rest of the file): for nothing, at every read. A compaction rewrites a
// table only where levels overlap, so a few old tables may stay for long
// in the last level (5 of a 1M-memory store's 262 after a GC pass).
func blockCacheSize(o Options, old compressed) int64 {
	if o.Compression == options.None && old.share < oldCompressedShare {
		return 0
	}
	return int64(o.CacheMB) << 20
}

// oldCompressedShare is the share of a store's table bytes in compressed
// tables from which, with compression none, Badger keeps a block cache.
const oldCompressedShare = 0.1

// compressed are the compressed ones of a store's tables.
type compressed struct {
	tables int
	share  float64 // of the tables' bytes
}

// compressedTables finds the compressed ones of the tables of the store
// in dir (by ID, how each is compressed), sized by their files.
func compressedTables(dir string, tables map[uint64]options.CompressionType) compressed {
	var c compressed
	var all, in int64
	for id, comp := range tables {
		fi, err := os.Stat(table.NewFilename(id, dir))
		if err != nil {
			continue // missing: the open will say
		}
		all += fi.Size()
		if comp != options.None {
			c.tables++
			in += fi.Size()
		}
	}
	if all > 0 {
		c.share = float64(in) / float64(all)
	}
	return c
}

// levelZeroTables is how many tables level 0 holds before it is
// compacted: as many memtables' bytes as Badger's defaults (five tables
// of 64 MiB), up to 20 tables. A compaction of level 0 rewrites what its
// tables overlap below whatever their size — with keys spread over the
// whole key space, most of the level below —, so smaller memtables must
// not mean more compactions; a read looks into each level-0 table (its
// Bloom filter first), hence the bound. Writes stall at three times as
// many, as at Badger's defaults.
func levelZeroTables(memtableMB int) int {
	return min(20, max(5, 5*64/max(1, memtableMB)))
}

// DB is the Badger database under the store, for size reports and
// checks; nil for the in-memory backend. Write behind the committer with
// WriteBehind: views would not see a write made here until the next
// commit.
func (s *Store) DB() *badger.DB {
	if e, ok := s.eng.(*badgerEngine); ok {
		return e.db
	}
	return nil
}

// BlockCacheStats are the reads of Badger's block cache (store.cache_mb:
// the tables' blocks, decompressed), none for the in-memory backend.
func (s *Store) BlockCacheStats() CacheStats {
	db := s.DB()
	if db == nil {
		return CacheStats{}
	}
	m := db.BlockCacheMetrics()
	if m == nil {
		return CacheStats{}
	}
	return CacheStats{Hits: m.Hits(), Misses: m.Misses(), Entries: int(m.KeysAdded() - m.KeysEvicted())}
}

// WriteBehind runs fn in a Badger transaction of its own, behind the
// committer's back (tests that damage or change the store under it); the
// views and operations after it read what it wrote.
func (s *Store) WriteBehind(fn func(*badger.Txn) error) error {
	e, ok := s.eng.(*badgerEngine)
	if !ok {
		return errors.New("memory: no Badger under the in-memory store")
	}
	err := e.update(fn)
	if lerr := e.tombs.load(e.db); err == nil {
		err = lerr // fn may have written tombstones
	}
	if err != nil {
		return err
	}
	e.done()
	// The committer's record of the insertion log's end (tx.Get) is read
	// again, by the committer: fn may have changed it.
	return s.Update(context.Background(), func(t Tx) error {
		end, err := ReadU64(t.(*tx).txn, KeyMemSeq)
		s.logEnd = end
		return err
	})
}

// badgerEngine is the Badger backend, in Badger's managed mode (version,
// below).
//
// While the committer is busy, views share a read transaction (snap):
// the first view after a commit begins one and offers it to the views
// after it, and a commit begins one as it starts when there is none, so
// that views during the commit read what was shown before. Once the
// commit is told and shown (show), it is replaced by one the committer
// begins then (renew), which sees the commit. While the
// committer is idle, or a GC pass runs (gc.go), views begin their own
// and none is held: a snapshot held in an idle store would keep Badger
// from dropping the versions it reads (settle).
type badgerEngine struct {
	db      *badger.DB
	dir     string
	snap    atomic.Pointer[snapshot] // the views', while the committer is busy
	commits atomic.Uint64            // commits done (each withdraws snap)
	busy    atomic.Bool              // the committer has work
	paused  atomic.Int32             // GC passes running: views offer no snapshot
	notes   *badgerNotes
	tombs   *tombFilter // the tombstone keys the store may hold
	// tables are the tables of the store when it was opened, each with
	// its compression; the tables Badger wrote since have the store's
	// (compressionOf).
	tables map[uint64]options.CompressionType

	// Badger runs in its managed mode: the store gives each commit its
	// version and each read the version it reads at. Badger's own mode
	// begins a transaction only once a goroutine of its own has counted
	// the last commit done, and counts each read begun and ended on
	// another, under a lock every transaction takes: with the cores busy,
	// the committer waited for that goroutine 4 ms a commit (a sixth of
	// its time at 10,000 sonas over two minutes), and readers queued on
	// the lock behind a send to the other — 24 goroutines at any moment
	// (README, issue 15). One writer needs neither: a commit is readable
	// once Commit returns, at its version.
	//
	// A commit is readable by the committer's next transaction as soon as
	// it is committed (last), and by the views only once it is shown
	// (version), after the subscribers were told it (Store.tell): a view
	// then never sees a commit whose changes the caches have not made.
	version atomic.Uint64 // the last shown commit's: a view begun now reads at it
	last    atomic.Uint64 // the last commit's: a write transaction begun now reads at it
	wmu     sync.Mutex    // commits one at a time: the committer's, and writes behind its back
	reads   readVersions  // the versions read now: Badger keeps what they see

	written spaceWrites    // what the commits wrote, by key space
	hash    base.KeyHasher // of the keys a batch wrote (badgerBatch.written)
}

// spaceWrites count the keys the commits wrote and their bytes (key and
// value; a deletion its key) by key space: indexed by a key's first byte
// when its second is '/', else 0. A key written twice in a batch counts
// once, its last value, as Badger writes it.
type spaceWrites [256]struct{ keys, bytes atomic.Uint64 }

// SpaceWrites are the writes of one key space (CommitStats.Written).
type SpaceWrites struct {
	Space       string // "a/", "t/", …; "other" for keys of no space
	Keys, Bytes uint64
}

func spaceOf(key []byte) byte {
	if len(key) >= 2 && key[1] == '/' && key[0] != 0 {
		return key[0]
	}
	return 0
}

// stats lists the spaces written so far, in the order of their bytes.
func (w *spaceWrites) stats() []SpaceWrites {
	var out []SpaceWrites
	for i := range w {
		if k := w[i].keys.Load(); k > 0 {
			name := "other"
			if i > 0 {
				name = string([]byte{byte(i), '/'})
			}
			out = append(out, SpaceWrites{Space: name, Keys: k, Bytes: w[i].bytes.Load()})
		}
	}
	slices.SortFunc(out, func(a, b SpaceWrites) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

// readVersions counts the transactions open at each version. Badger
// keeps every version newer than the discard mark it is given (settle),
// and of those at or below it only the latest: the mark is the oldest
// version read, so that no read misses what it should see.
type readVersions struct {
	mu sync.Mutex
	n  map[uint64]int
}

// begin counts a read at the latest version, which it returns: taken
// under the lock that settle takes, so that a mark set meanwhile is not
// above it.
func (r *readVersions) begin(latest *atomic.Uint64) uint64 {
	r.mu.Lock()
	v := latest.Load()
	r.n[v]++
	r.mu.Unlock()
	return v
}

func (r *readVersions) end(v uint64) {
	r.mu.Lock()
	if r.n[v]--; r.n[v] <= 0 {
		delete(r.n, v)
	}
	r.mu.Unlock()
}

// open is how many reads are open now, the oldest version read (the
// latest when none is), and the latest, read together under the lock.
func (r *readVersions) open(latest *atomic.Uint64) (n int, oldest, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last = latest.Load()
	oldest = last
	for v, c := range r.n {
		n += c
		oldest = min(oldest, v)
	}
	return n, oldest, last
}

// read begins a transaction, a view's at the last shown commit's
// version, a write transaction's at the last commit's; done ends it.
func (e *badgerEngine) read(update bool) (txn *badger.Txn, done func()) {
	at := &e.version
	if update {
		at = &e.last
	}
	v := e.reads.begin(at)
	txn = e.db.NewTransactionAt(v, update)
	return txn, func() {
		txn.Discard()
		e.reads.end(v)
	}
}

// settle lets Badger drop the versions no read needs any more: its
// compactions and the value log's collection (gc.go) keep, at or below
// the oldest version read (or shown, which the next view reads), only
// the latest of each key.
func (e *badgerEngine) settle() {
	_, oldest, _ := e.reads.open(&e.version)
	e.db.SetDiscardTs(oldest)
}

// update runs fn in a write transaction of its own and commits it, behind
// the committer's back.
func (e *badgerEngine) update(fn func(*badger.Txn) error) error {
	txn, done := e.read(true)
	defer done()
	if err := fn(txn); err != nil {
		return err
	}
	return e.commitAt(txn, true)
}

// commitAt commits txn at the next version, after every commit before it.
// Badger applies a failed commit's writes to its tree in part or not at
// all, and counted it anyway in its own mode: so is its version here.
//
// When shown is set, the commit is shown to the views at once — unless a
// commit before it is not shown yet (the committer's, being told), whose
// showing then shows this one too: a write behind the committer's back
// is told to nobody, and must not show a commit that is not told yet.
func (e *badgerEngine) commitAt(txn *badger.Txn, shown bool) error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	last := e.last.Load()
	err := txn.CommitAt(last+1, nil)
	e.last.Store(last + 1)
	if shown && e.version.Load() == last {
		e.version.Store(last + 1)
	}
	return err
}

// show makes the last commit readable by the views, and offers them a
// snapshot that sees it (renew): the committer's, once it is told
// (Store.tell), or once it failed.
func (e *badgerEngine) show() {
	e.wmu.Lock()
	e.version.Store(e.last.Load())
	e.wmu.Unlock()
	e.renew()
	e.settle()
}

// snapshot is a read transaction shared by views; the last one to
// release it discards it (the engine holds one reference while it offers
// it).
type snapshot struct {
	txn     *badger.Txn
	done    func() // ends txn
	commits uint64 // the commits done before it began: it sees at least those
	refs    atomic.Int64
}

func (s *snapshot) release() {
	if s.refs.Add(-1) == 0 {
		s.done()
	}
}

// acquire takes a reference to the views' snapshot; nil when there is
// none, or it misses a commit done since it began (an offer raced that
// commit's withdrawal).
func (e *badgerEngine) acquire() *snapshot {
	for {
		s := e.snap.Load()
		if s == nil {
			return nil
		}
		// Never from zero: a snapshot released by all is discarded.
		if n := s.refs.Load(); n > 0 && s.refs.CompareAndSwap(n, n+1) {
			if s.commits != e.commits.Load() {
				s.release()
				return nil
			}
			return s
		}
	}
}

// snapshot begins a read transaction, holding refs references.
func (e *badgerEngine) snapshot(refs int64) *snapshot {
	s := &snapshot{commits: e.commits.Load()}
	s.txn, s.done = e.read(false)
	s.refs.Store(refs)
	return s
}

// offer makes s, holding a reference for the engine, the views' snapshot
// unless another as recent is (then it drops that reference). One that
// missed a commit is replaced.
func (e *badgerEngine) offer(s *snapshot) {
	for {
		old := e.snap.Load()
		if old != nil && old.commits >= s.commits {
			s.release()
			return
		}
		if e.snap.CompareAndSwap(old, s) {
			if old != nil {
				old.release()
			}
			return
		}
	}
}

func (e *badgerEngine) view(told uint64, fn func(Reader) error) error {
	s := e.acquire()
	if s == nil {
		if e.db.IsClosed() {
			return base.ErrClosed
		}
		s = e.snapshot(1)
		if e.sharing() && s.commits == e.commits.Load() {
			s.refs.Add(1)
			e.offer(s)
			// The committer went idle, or a pass began, meanwhile: their
			// withdrawal may have come before the offer.
			if !e.sharing() && e.snap.CompareAndSwap(s, nil) {
				s.release()
			}
		}
	}
	defer s.release()
	return fn(badgerReader{txn: s.txn, told: told, tombs: e.tombs})
}

// sharing reports whether views share a snapshot: the committer is busy
// and no GC pass runs.
func (e *badgerEngine) sharing() bool { return e.busy.Load() && e.paused.Load() == 0 }

// done withdraws the views' snapshot: a commit (or a write behind the
// committer) is done, which it misses.
func (e *badgerEngine) done() {
	e.commits.Add(1)
	e.withdraw()
}

// renew counts a commit done (shown) and, while views share a snapshot,
// offers them one that sees it, begun at once: withdrawn instead, the
// views that came next would each begin their own.
func (e *badgerEngine) renew() {
	if !e.sharing() {
		e.done()
		return
	}
	// Begun before the commit counts as done, so that until the new
	// snapshot is offered the views share the last one, which misses the
	// commit, as it may: the commit is counted told only once this
	// returns.
	s := e.snapshot(1)
	s.commits++
	e.commits.Add(1)
	e.offer(s)
	// The committer went idle, or a pass began, meanwhile (as in view).
	if !e.sharing() && e.snap.CompareAndSwap(s, nil) {
		s.release()
	}
}

// working is told whether the committer has work: while it has none,
// views share no snapshot.
func (e *badgerEngine) working(busy bool) {
	e.busy.Store(busy)
	if !busy {
		e.withdraw()
	}
}

// pause has views offer no snapshot while a GC pass runs (on), and
// withdraws the one offered; resume with on false.
func (e *badgerEngine) pause(on bool) {
	if !on {
		e.paused.Add(-1)
		return
	}
	e.paused.Add(1)
	e.withdraw()
}

// withdraw leaves the views without a snapshot.
func (e *badgerEngine) withdraw() {
	if s := e.snap.Swap(nil); s != nil {
		s.release()
	}
}

func (e *badgerEngine) begin() batch {
	txn, done := e.read(true)
	return &badgerBatch{badgerReader: badgerReader{txn: txn, tombs: e.tombs}, e: e, done: done}
}

func (e *badgerEngine) close() error {
	e.withdraw()
	return e.db.Close()
}

// compressionOf is how table id of the store is compressed.
func (e *badgerEngine) compressionOf(id uint64) options.CompressionType {
	if c, ok := e.tables[id]; ok {
		return c
	}
	return e.db.Opts().Compression
}

// check checks every table of the open store against its checksums, as
// at open, each held in the tree's files while it is read (holdTables).
func (e *badgerEngine) check() error {
	bo := e.db.Opts()
	held, release := holdTables(e.db)
	defer release()
	tables := map[uint64]options.CompressionType{}
	for id := range held {
		tables[id] = e.compressionOf(id)
	}
	_, err := verifyTableFiles(e.dir, tables, bo.BlockSize, true, nil)
	return err
}

// badgerBatch is a write transaction of Badger, which counts its writes
// as Badger does (Txn.checkSize) or more, so that fits can tell before
// Badger refuses one.
type badgerBatch struct {
	badgerReader
	e           *badgerEngine
	done        func() // ends the transaction (discarded, or committed)
	count, size int64
	// written are the keys written, by hash, each with its bytes (key
	// and value): a batch writes a thousand keys or more, and a map of
	// strings allocated each one's (issue 15, stop 85). Keys that share
	// a hash (2⁻¹²⁸ a pair, base.KeyHash) would read as written: a read
	// through the batch then skips the caches, for the same value.
	written map[base.KeyHash]int
	spaces  [256][2]int64 // the keys and bytes written, by space (spaceOf)
}

// Get reads key's value, copied: a write transaction gives the values
// of its own pending writes as they were set, which the caller must not
// share.
func (b *badgerBatch) Get(key []byte) ([]byte, error) {
	item, err := b.item(key)
	if err != nil {
		return nil, err
	}
	return badgerItem{item}.ValueCopy(nil)
}

func (b *badgerBatch) set(key, val []byte) error {
	if bytes.HasPrefix(key, PrefixTombstone) {
		b.e.tombs.add(key) // before the commit that makes it visible
	}
	b.add(key, val)
	return tooBig(b.txn.SetEntry(newEntry(key, val)))
}

func (b *badgerBatch) delete(key []byte) error {
	b.add(key, nil)
	return tooBig(b.txn.Delete(key))
}

func (b *badgerBatch) add(key, val []byte) {
	b.count++
	b.size += entrySize(len(key), len(val))
	if b.written == nil {
		b.written = map[base.KeyHash]int{}
	}
	sp, n, h := &b.spaces[spaceOf(key)], len(key)+len(val), b.e.hash.OfBytes(key)
	if old, ok := b.written[h]; ok {
		sp[0]--
		sp[1] -= int64(old)
	}
	sp[0]++
	sp[1] += int64(n)
	b.written[h] = n
}

func (b *badgerBatch) wrote(key []byte) bool {
	_, ok := b.written[b.e.hash.OfBytes(key)]
	return ok
}

// entrySize is at least what Badger counts of an entry (lengths of its
// key and value) against a transaction's limit: the key, the value (a pointer to the value log
// when it is larger, which counts less), two bytes of meta and ten of
// version.
func entrySize(key, val int) int64 { return int64(key+val) + 2 + 10 }

func (b *badgerBatch) fits(w *tx) bool {
	count, size := b.count, b.size
	for _, k := range w.order {
		count++
		size += entrySize(len(k), len(w.writes[k].val))
	}
	return count < b.e.db.MaxBatchCount() && size < b.e.db.MaxBatchSize()
}

func (b *badgerBatch) discard() { b.done() }

// commit commits, views reading a snapshot of what was shown before
// meanwhile (theirs, or one begun now), which is replaced once the
// commit is told and shown (show). A failed commit is shown at once: it
// is told to nobody.
func (b *badgerBatch) commit() error {
	if s := b.e.snap.Load(); s == nil || s.commits != b.e.commits.Load() {
		b.e.offer(b.e.snapshot(1))
	}
	err := b.e.commitAt(b.txn, false)
	b.done()
	if err != nil {
		b.e.show()
		return classifyBadger(err)
	}
	for i, sp := range &b.spaces {
		if sp[0] != 0 {
			b.e.written[i].keys.Add(uint64(sp[0]))
			b.e.written[i].bytes.Add(uint64(sp[1]))
		}
	}
	// Badger logs a failed sync of its value log rather than failing the
	// commit (valueLog.write): the values there may not be durable, so the
	// commit is not acknowledged.
	if why := b.e.notes.unsynced.Swap(nil); why != nil {
		b.e.show()
		return fmt.Errorf("memory: the value log was not synced: %s", *why)
	}
	return nil
}

func tooBig(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return errTxnTooBig
	}
	return err
}

// badgerReader reads a Badger transaction; told is the view's (see
// Store.View), 0 in a write transaction; tombs, when set, answers for the
// tombstones the store does not hold.
type badgerReader struct {
	txn   *badger.Txn
	told  uint64
	tombs *tombFilter
}

// Get reads key's value into a slice of the caller's. Badger copies a
// value of its tree three times on the way to a read — out of its
// table, into the item, and into the item's buffer Item.Value gives —,
// and that buffer is the caller's already: an Item is new at each read
// and nothing else holds it. So a view (whose transaction writes
// nothing) gives it as it is, where ValueCopy copied it a fourth time
// (1–5% of what an advance or a recall at 1M allocated, issue 15, stop
// 109). A value in the value log is read from its mapped file, valid
// only within Value's call, and copied; so is every value a batch reads
// (badgerBatch.Get).
func (r badgerReader) Get(key []byte) ([]byte, error) {
	item, err := r.item(key)
	if err != nil {
		return nil, err
	}
	if InValueLog(item) {
		return badgerItem{item}.ValueCopy(nil)
	}
	var v []byte
	err = item.Value(func(b []byte) error {
		v = b
		return nil
	})
	return v, classifyBadger(err)
}

func (r badgerReader) Item(key []byte) (Item, error) {
	item, err := r.item(key)
	if err != nil {
		return nil, err
	}
	return badgerItem{item}, nil
}

func (r badgerReader) item(key []byte) (*badger.Item, error) {
	if r.tombs.absent(key) {
		return nil, base.ErrNotFound
	}
	item, err := r.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, base.ErrNotFound
	}
	return item, classifyBadger(err)
}

func (r badgerReader) Has(key []byte) (bool, error) { return hasItem(r, key) }

func (r badgerReader) NewIterator(o IterOptions) Iterator {
	return badgerIterator{r.txn.NewIterator(badger.IteratorOptions{
		Prefix:         o.Prefix,
		Reverse:        o.Reverse,
		PrefetchValues: o.PrefetchValues,
		PrefetchSize:   o.PrefetchSize,
		SinceTs:        o.Since,
	})}
}

func (r badgerReader) readVersion() uint64 { return r.txn.ReadTs() }

func (r badgerReader) toldBefore() uint64 { return r.told }

// badgerItem classifies Badger's read errors (classifyBadger). Being one
// pointer, it is boxed in an Item without an allocation.
type badgerItem struct{ *badger.Item }

func (i badgerItem) Value(fn func(v []byte) error) error {
	var ferr error
	err := i.Item.Value(func(v []byte) error {
		ferr = fn(v)
		return ferr
	})
	if ferr != nil {
		return ferr
	}
	return classifyBadger(err)
}

func (i badgerItem) ValueCopy(dst []byte) ([]byte, error) {
	v, err := i.Item.ValueCopy(dst)
	return v, classifyBadger(err)
}

// InValueLog reports whether Badger keeps item's value in its value log.
// For a value there, Badger's EstimatedSize is the length of its entry
// in the log (header, key, version, value and checksum), and its
// ValueSize an estimate made from it: the two differ by the key and
// more, where for a value in the tree they differ by the key alone.
func InValueLog(item *badger.Item) bool {
	return item.EstimatedSize() != item.KeySize()+item.ValueSize()
}

// loggedSize is the length of item's entry in the value log, 0 when its
// value is not there: where Badger keeps it (InValueLog), or where the
// in-memory backend counts it.
func loggedSize(item Item) int64 {
	if b, ok := item.(badgerItem); ok {
		if InValueLog(b.Item) {
			return b.EstimatedSize()
		}
		return 0
	}
	v := item.ValueSize()
	if valueLogged(item.Key(), int(v)) {
		return int64(len(item.Key())) + v + logEntryOverhead
	}
	return 0
}

// logEntryOverhead is what a value-log entry adds to its key and value:
// the version (8 bytes), a header of about 6 and a CRC-32 (4).
const logEntryOverhead = 18

type badgerIterator struct{ *badger.Iterator }

func (it badgerIterator) Item() Item { return badgerItem{it.Iterator.Item()} }

// checkDir makes sure dir is a writable directory and runs the checks of
// integrity.go on it, holding the directory's lock as Badger will; tables
// are those its manifest lists, with their compressions.
func checkDir(dir string, bo badger.Options, o Options) (_ []logDamage, replay int64, tables map[uint64]options.CompressionType, _ error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, nil, fmt.Errorf("memory: cannot create the data directory: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return nil, 0, nil, fmt.Errorf("memory: the data directory %s is not writable: %w", dir, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	d, err := os.Open(dir)
	if err != nil {
		return nil, 0, nil, err
	}
	defer d.Close() // releases the lock for Badger to take
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, 0, nil, fmt.Errorf("%w: %s (is `memoria serve` running? use --server)", base.ErrLocked, dir)
	}
	if tables, err = manifestTables(dir, bo); err != nil {
		return nil, 0, nil, err
	}
	if !o.SkipTableCheck {
		c := clock.Or(o.Clock)
		start := c.Now()
		full, unchanged, err := verifyTables(dir, bo, tables)
		if err != nil {
			return nil, 0, nil, err
		}
		o.Logger.Info("store: tables checked", "in_full", full, "unchanged", unchanged, "took", c.Since(start))
	}
	wals, replay, err := checkLogs(dir, o.Logger)
	return wals, replay, tables, err
}

// fitMemtable gives Badger memtables large enough to replay replay bytes
// of a write-ahead log into: a log written with a larger memtable_mb (the
// setting lowered, or its default, after a crash or a kill) does not fit
// the configured one, where Badger's replay would end the process. A
// skiplist takes more room than the log for the same entries (each node),
// hence twice the log. The store runs with that size until its next start.
func fitMemtable(bo badger.Options, replay int64, log *slog.Logger) badger.Options {
	if replay <= bo.MemTableSize {
		return bo
	}
	fit := (2*replay + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB
	log.Warn("store: a write-ahead log holds more than a memtable of memtable_mb: memtables of its size until the next start",
		"log_bytes", replay, "memtable_mb", bo.MemTableSize>>20, "now_mb", fit>>20)
	return bo.WithMemTableSize(fit)
}

// openAcked compares the store's commits with the acknowledged mark.
func (s *Store) openAcked(wals []logDamage, accept bool) error {
	const remedy = ". Run `memoria repair --accept-loss` to serve what remains (it logs what is gone), or restore the data directory from a backup"
	a, acked, ok, err := openAckFile(s.dir)
	if errors.Is(err, base.ErrLostWrites) {
		if !accept {
			return fmt.Errorf("%w%s", err, remedy)
		}
		s.log.Error("accepted an unreadable acknowledged mark: the store's state is taken as acknowledged", "err", err)
		s.lost = err.Error()
		os.Remove(filepath.Join(s.dir, AckFileName))
		a, acked, ok, err = openAckFile(s.dir)
	}
	if err != nil {
		return err
	}
	if ok && s.mark.commits < acked.commits {
		lost := lossReport(acked, s.mark, wals)
		if !accept {
			a.f.Close()
			return fmt.Errorf("%w: %s%s", base.ErrLostWrites, lost, remedy)
		}
		s.log.Error("accepted the loss of acknowledged writes", "lost", lost)
		s.lost = lost
	} else {
		for _, d := range wals {
			if d.followed {
				s.log.Warn("a write-ahead log was damaged past its acknowledged writes: Badger cut it there (a copy is kept)",
					"damage", d.String(), "copy", damagedDir(s.dir))
			}
		}
	}
	s.acked = a
	return a.record(s.mark)
}

// lossReport says what a store that lost acknowledged writes lost.
func lossReport(acked, now ackMark, wals []logDamage) string {
	msg := fmt.Sprintf("the store holds %d commits, the last acknowledged was %d", now.commits, acked.commits)
	if now.memSeq < acked.memSeq {
		msg += fmt.Sprintf("; the insertion log ends at %d, the last acknowledged memory was %d (%d memories lost)",
			now.memSeq, acked.memSeq, acked.memSeq-now.memSeq)
	}
	if len(wals) == 0 {
		return msg + "; no damaged write-ahead log remains (a restart already replayed it)"
	}
	for _, d := range wals {
		msg += "; the write-ahead log " + d.String()
		if d.followed {
			msg += " (a copy is kept in " + damagedDir(filepath.Dir(d.path)) + ")"
		}
	}
	return msg
}

// freeSpace is the space available to unprivileged users on the file
// system of dir.
func freeSpace(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// classifyBadger marks Badger's failures to read damaged files — a
// checksum that does not match, a block that does not decode, a value
// pointer past the end of its log — as corruption (ErrCorrupt), naming
// the file when Badger's error does. Badger flattens the errors it wraps
// into text, so they are recognised by it.
func classifyBadger(err error) error {
	if err == nil || errors.Is(err, base.ErrCorrupt) || !isCorruption(err) {
		return err
	}
	if f := badgerFile(err); f != "" {
		return corruptFile(f, err)
	}
	return fmt.Errorf("%w store: %v", base.ErrCorrupt, err)
}

var corruptionSigns = []string{
	y.ErrChecksumMismatch.Error(), // a table block, a table index, a value
	"failed to decompress",        // a table block
	"invalid checksum length",     // a table block
	"Data corrupted",              // a table index
	y.ErrEOF.Error(),              // a value pointer past the end of its log
	"Invalid read",                // a value shorter than its pointer says
	"Invalid value pointer offset",
}

func isCorruption(err error) bool {
	if errors.Is(err, y.ErrChecksumMismatch) || errors.Is(err, y.ErrEOF) {
		return true
	}
	msg := err.Error()
	return slices.ContainsFunc(corruptionSigns, func(s string) bool { return strings.Contains(msg, s) })
}

// badgerLogger passes Badger's log to the store's, and notes what Badger
// only logs.
type badgerLogger struct {
	l     *slog.Logger
	notes *badgerNotes
}

// badgerNotes are what Badger reported only in its log.
type badgerNotes struct {
	// unreadable is the last value Badger could not read, with the file
	// it names.
	unreadable atomic.Pointer[string]
	// unsynced is a failed sync of the value log since the last commit.
	unsynced atomic.Pointer[string]
	// stalls are the times Badger held writes back until compaction made
	// room in level 0 of its tree (its log's "L0 was stalled for …").
	stalls writeStalls
}

// writeStalls count Badger's stalls of writes and how long they lasted.
type writeStalls struct {
	count atomic.Uint64
	nanos atomic.Int64
}

// stalledFor reads how long a stall of Badger's log line ("L0 was stalled
// for 1.5s") lasted.
func stalledFor(msg string) (time.Duration, bool) {
	rest, ok := strings.CutPrefix(msg, "L0 was stalled for ")
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(rest))
	return d, err == nil
}

func (b badgerLogger) Errorf(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	if _, why, ok := strings.Cut(msg, " Error: "); ok && strings.HasPrefix(msg, "Unable to read") {
		if file := badgerFile(errors.New(why)); file != "" {
			why = file + ": " + why
			b.notes.unreadable.Store(&why)
		}
	}
	if why, ok := strings.CutPrefix(msg, "Error while curlf sync: "); ok {
		why = strings.TrimSpace(why)
		b.notes.unsynced.Store(&why)
	}
	b.l.Error(msg, "component", "badger")
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Infof(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	if d, ok := stalledFor(msg); ok {
		b.notes.stalls.count.Add(1)
		b.notes.stalls.nanos.Add(int64(d))
		b.l.Warn("writes stalled: level 0 of the store's tree was full until its compaction made room", "stalled", d, "component", "badger")
		return
	}
	b.l.Debug(msg, "component", "badger")
}
func (b badgerLogger) Debugf(f string, a ...any) {}
