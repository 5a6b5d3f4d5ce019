package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/multiformats/go-multihash"
	"golang.org/x/sys/unix"
)

// valueThreshold is the size from which Badger keeps a value in its value
// log rather than in the LSM tree.
const valueThreshold = 64 << 10

// StoreOptions configure a Store.
type StoreOptions struct {
	// MaxBatch is the most operations acknowledged by one group commit.
	MaxBatch int
	// MaxBlockBytes caps one block.
	MaxBlockBytes int
	// CacheMB sizes Badger's block cache.
	CacheMB int
	// MemTableMB sizes each of Badger's memtables, its write buffers
	// (0: 64). A full one is flushed to a table file of about this size.
	MemTableMB int
	// Memtables bounds how many memtables are held (the one written and
	// those waiting for a flush); 0: 5, Badger's default.
	Memtables int
	// MinFreeBytes is the free space the committer keeps on the store's
	// file system: a batch that would leave less is refused with
	// ErrDiskFull. Badger writes through memory-mapped files, so running
	// out of space would kill the process (SIGBUS); the reserve must cover
	// what Badger writes on its own: memtable flushes and compactions.
	MinFreeBytes uint64
	// FreeSpace reports the bytes available on the store's file system
	// (default: statfs of its directory). Tests inject it.
	FreeSpace func() (uint64, error)
	// SkipTableCheck opens without verifying every table first (see
	// integrity.go).
	SkipTableCheck bool
	// AcceptLoss opens a store that lost acknowledged writes: it logs
	// what is gone and takes what remains as acknowledged from now on.
	AcceptLoss bool
	// InMemory keeps everything in RAM (tests and benchmarks of the logic only).
	InMemory bool
	Logger   *slog.Logger
}

// Store is the Badger-backed source of truth: content-addressed blocks and
// the mutable key spaces of doc.go. Reads go straight to Badger; every write
// passes one door, the committer, which runs operations in order, applies a
// batch of them in one Badger transaction and acknowledges them all after
// that transaction's single fsync (group commit).
type Store struct {
	db       *badger.DB
	dir      string
	maxBlock int
	maxBatch int
	log      *slog.Logger
	space    spaceGuard
	// unreadable is the last value Badger could not read from a value
	// log, and why (Badger logs it and returns no bytes, not an error).
	unreadable *atomic.Pointer[string]
	lost       string // the loss of acknowledged writes accepted at open

	// Owned by the committer once it runs:
	mark     ackMark    // commits made and the insertion log's end
	answered []*Pending // answered by the batch, to acknowledge in order
	acks     chan ackBatch
	// Owned by the acknowledger (ackLoop) once it runs:
	acked  *ackFile // the acknowledged mark (integrity.go); nil in memory
	ackErr error    // the mark's last write failure, logged once

	queue   chan *Pending
	mu      sync.RWMutex // guards closed against Submit racing Close
	closed  bool
	stopped chan struct{}
	watches []watch // set before the first write
}

type watch struct {
	prefix []byte
	fn     func(key []byte)
}

// Watch calls fn, after each commit, for every key under prefix that the
// commit wrote or deleted: caches of mutable state invalidate themselves
// with it. Register watches before the first write.
func (s *Store) Watch(prefix []byte, fn func(key []byte)) {
	s.watches = append(s.watches, watch{prefix, fn})
}

// Op is one atomic write: it reads and writes through tx, and either all of
// its writes are applied or none. An Op may be run more than once (when a
// batch must be split), so it must not have side effects outside tx; work
// to do after the write is durable goes into tx.OnCommit.
type Op func(tx *Tx) error

// Pending is a submitted Op. Done is closed once the Op's writes are durable
// or it failed.
type Pending struct {
	op   Op
	done chan struct{}
	err  error
}

// Done is closed when the operation is durable or has failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Err returns the operation's error; valid after Done is closed.
func (p *Pending) Err() error { return p.err }

// Wait blocks until the operation is durable (nil) or failed.
func (p *Pending) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// OpenStore opens (creating if needed) the store in dir. Before Badger
// opens it, its tables and write-ahead logs are checked (integrity.go);
// after, a store holding fewer commits than it acknowledged is refused
// with ErrLostWrites, unless o.AcceptLoss.
func OpenStore(dir string, o StoreOptions) (*Store, error) {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1024
	}
	if o.MaxBlockBytes <= 0 {
		o.MaxBlockBytes = 1 << 20
	}
	if o.CacheMB <= 0 {
		o.CacheMB = 64
	}
	if o.MemTableMB <= 0 {
		o.MemTableMB = 64
	}
	if o.Memtables <= 0 {
		o.Memtables = 5
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	unreadable := &atomic.Pointer[string]{}
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(true).       // one fsync per transaction, and one transaction per batch
		WithDetectConflicts(false). // the committer is the only writer
		WithBlockCacheSize(int64(o.CacheMB) << 20).
		WithMemTableSize(int64(o.MemTableMB) << 20).
		WithNumMemtables(o.Memtables).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).      // a damaged value is an error, not other bytes
		WithValueThreshold(valueThreshold). // large blocks (files) live in the value log
		WithLogger(badgerLogger{o.Logger, unreadable})
	var wals []logDamage
	if o.InMemory {
		bo = bo.WithInMemory(true).WithDir("").WithValueDir("")
	} else {
		var err error
		if wals, err = checkDir(dir, bo, o); err != nil {
			return nil, err
		}
	}
	db, err := badger.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (is `memoria serve` running? use --server)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("memory: open %s: %w", dir, classifyBadger(err))
	}
	s := &Store{
		db:         db,
		dir:        dir,
		maxBlock:   o.MaxBlockBytes,
		maxBatch:   o.MaxBatch,
		log:        o.Logger,
		space:      spaceGuard{free: o.FreeSpace, reserve: o.MinFreeBytes, log: o.Logger},
		unreadable: unreadable,
		queue:      make(chan *Pending, o.MaxBatch),
		acks:       make(chan ackBatch, 4),
		stopped:    make(chan struct{}),
	}
	if err := db.View(func(txn *badger.Txn) error {
		var err error
		if s.mark.commits, err = readU64(badgerReader{txn}, keyCommits); err != nil {
			return err
		}
		s.mark.memSeq, err = readU64(badgerReader{txn}, keyMemSeq)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("memory: open %s: %w", dir, classifyBadger(err))
	}
	if !o.InMemory {
		if s.space.free == nil {
			s.space.free = func() (uint64, error) { return freeSpace(dir) }
		}
		if err := s.openAcked(wals, o.AcceptLoss); err != nil {
			db.Close()
			return nil, err
		}
	}
	go s.commitLoop()
	return s, nil
}

// checkDir makes sure dir is a writable directory and runs the checks of
// integrity.go on it, holding the directory's lock as Badger will.
func checkDir(dir string, bo badger.Options, o StoreOptions) ([]logDamage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory: cannot create the data directory: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return nil, fmt.Errorf("memory: the data directory %s is not writable: %w", dir, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close() // releases the lock for Badger to take
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, fmt.Errorf("%w: %s (is `memoria serve` running? use --server)", ErrLocked, dir)
	}
	if !o.SkipTableCheck {
		if err := verifyTables(dir, bo); err != nil {
			return nil, err
		}
	}
	return checkLogs(dir, o.Logger)
}

// openAcked compares the store's commits with the acknowledged mark.
func (s *Store) openAcked(wals []logDamage, accept bool) error {
	const remedy = ". Run `memoria repair --accept-loss` to serve what remains (it logs what is gone), or restore the data directory from a backup"
	a, acked, ok, err := openAckFile(s.dir)
	if errors.Is(err, ErrLostWrites) {
		if !accept {
			return fmt.Errorf("%w%s", err, remedy)
		}
		s.log.Error("accepted an unreadable acknowledged mark: the store's state is taken as acknowledged", "err", err)
		s.lost = err.Error()
		os.Remove(filepath.Join(s.dir, ackFileName))
		a, acked, ok, err = openAckFile(s.dir)
	}
	if err != nil {
		return err
	}
	if ok && s.mark.commits < acked.commits {
		lost := lossReport(acked, s.mark, wals)
		if !accept {
			a.f.Close()
			return fmt.Errorf("%w: %s%s", ErrLostWrites, lost, remedy)
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

// spaceGuard refuses writes that would leave less than reserve bytes free.
type spaceGuard struct {
	free     func() (uint64, error) // nil: in memory
	reserve  uint64
	log      *slog.Logger
	refusing atomic.Bool
}

// check returns ErrDiskFull when writing need bytes would leave less than
// the reserve free, and logs when writes start and stop being refused.
func (g *spaceGuard) check(need uint64) error {
	if g.free == nil {
		return nil
	}
	free, err := g.free()
	if err == nil && free < g.reserve+need {
		err = fmt.Errorf("%w: %d MiB free on the data directory's file system, %d MiB are kept in reserve (store.min_free_mb); writes are refused until space is freed",
			ErrDiskFull, free>>20, g.reserve>>20)
	} else if err != nil {
		err = fmt.Errorf("%w: cannot read the free space of the data directory's file system: %v", ErrDiskFull, err)
	}
	if err != nil {
		if !g.refusing.Swap(true) {
			g.log.Error("refusing writes: the disk is nearly full; reads go on", "err", err)
		}
		return err
	}
	if g.refusing.Swap(false) {
		g.log.Warn("accepting writes again: space was freed", "free_mb", free>>20, "reserve_mb", g.reserve>>20)
	}
	return nil
}

// AcceptedLoss says what the store had lost when it was opened with
// AcceptLoss, or "" when it had lost nothing.
func (s *Store) AcceptedLoss() string { return s.lost }

// CheckSpace reports whether writes are accepted now: nil, or why not
// (ErrDiskFull).
func (s *Store) CheckSpace() error { return s.space.check(0) }

// DB exposes the underlying Badger database for read-only iteration in
// this package's tests and tools.
func (s *Store) DB() *badger.DB { return s.db }

// Close stops the committer after it has written everything submitted,
// then closes Badger.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.stopped
	err := s.db.Close()
	if s.acked != nil {
		if aerr := s.acked.close(); err == nil {
			err = aerr
		}
	}
	return err
}

// Submit queues op for the committer and returns at once.
func (s *Store) Submit(op Op) *Pending {
	p := &Pending{op: op, done: make(chan struct{})}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		p.err = ErrClosed
		close(p.done)
		return p
	}
	s.queue <- p
	return p
}

// Update runs op through the committer and waits until it is durable.
func (s *Store) Update(ctx context.Context, op Op) error {
	return s.Submit(op).Wait(ctx)
}

// Barrier waits until everything submitted before it is durable or failed.
func (s *Store) Barrier(ctx context.Context) error {
	return s.Update(ctx, func(*Tx) error { return nil })
}

// View runs fn on a consistent snapshot of what is committed.
func (s *Store) View(fn func(r Reader) error) error {
	return s.db.View(func(txn *badger.Txn) error { return fn(badgerReader{txn}) })
}

func (s *Store) commitLoop() {
	defer close(s.stopped)
	acked := make(chan struct{})
	go s.ackLoop(acked)
	defer func() {
		close(s.acks)
		<-acked
	}()
	batch := make([]*Pending, 0, s.maxBatch)
	for first := range s.queue {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < s.maxBatch {
			select {
			case p, ok := <-s.queue:
				if !ok {
					break fill
				}
				batch = append(batch, p)
			default:
				break fill
			}
		}
		s.commitBatch(batch)
	}
}

// commitBatch applies the batch in as few Badger transactions as fit, each
// committed with one fsync, and has every operation acknowledged once the
// acknowledged mark covers it (ackLoop). A transaction that would take the
// file system below its reserve is not committed: its operations that
// write fail with ErrDiskFull.
func (s *Store) commitBatch(batch []*Pending) {
	txn := s.newTxn()
	var applied []appliedOp

	commit := func() {
		var need uint64
		for _, a := range applied {
			need += a.bytes
		}
		var err error
		var mark *ackMark
		if need == 0 {
			txn.Discard() // nothing written: nothing to commit
		} else if err = s.space.check(need); err == nil {
			if err = txn.Commit(); err != nil {
				err = fmt.Errorf("memory: commit: %w", classifyBadger(err))
				s.log.Error("group commit failed", "ops", len(applied), "err", err)
			} else {
				s.mark.commits++
				for _, a := range applied {
					s.mark.memSeq = max(s.mark.memSeq, a.memSeq)
				}
				m := s.mark
				mark = &m
			}
		} else {
			txn.Discard()
		}
		for _, a := range applied {
			aerr := err
			if errors.Is(err, ErrDiskFull) && a.bytes == 0 {
				// It wrote nothing, but may have read what the refused
				// ops wrote: run it again alone, on what is committed.
				a, aerr = s.rerun(a, err)
			}
			if aerr == nil {
				for _, h := range a.hooks {
					h()
				}
			}
			s.answer(a.p, aerr)
		}
		s.acknowledge(mark)
		applied = applied[:0]
		txn = s.newTxn()
	}

	for _, p := range batch {
		a, partial, err := runOp(txn, s, p)
		if errors.Is(err, badger.ErrTxnTooBig) && len(applied) > 0 {
			// Commit the earlier ops without this one's partial writes,
			// then retry it alone in a fresh transaction.
			txn.Discard()
			txn = s.newTxn()
			applied = s.replay(txn, applied)
			commit()
			a, partial, err = runOp(txn, s, p)
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			err = fmt.Errorf("%w: one write exceeds a transaction", ErrTooLarge)
		}
		if partial {
			// Drop this op's partial writes: rebuild the batch without it.
			txn.Discard()
			txn = s.newTxn()
			applied = s.replay(txn, applied)
		}
		if err != nil {
			s.answer(p, err)
			continue
		}
		applied = append(applied, a)
	}
	if len(applied) > 0 {
		commit()
	}
	txn.Discard()
	s.acknowledge(nil)
}

// answer sets p's result, to be acknowledged with its batch's commit.
func (s *Store) answer(p *Pending, err error) {
	p.err = err
	s.answered = append(s.answered, p)
}

// ackBatch is answered operations to acknowledge once mark (if any) is
// recorded.
type ackBatch struct {
	mark *ackMark
	ops  []*Pending
}

// acknowledge hands what the batch answered so far to the acknowledger,
// with the mark of its commit (nil when nothing was committed).
func (s *Store) acknowledge(mark *ackMark) {
	if len(s.answered) > 0 || mark != nil {
		s.acks <- ackBatch{mark, s.answered}
		s.answered = nil
	}
}

// ackLoop records the acknowledged mark of each commit, durably, and then
// acknowledges its operations, in commit order. It runs beside the
// committer, so that the mark's fsync overlaps the next commit's.
func (s *Store) ackLoop(done chan<- struct{}) {
	defer close(done)
	for b := range s.acks {
		if b.mark != nil && s.acked != nil {
			err := s.acked.record(*b.mark)
			if err != nil && s.ackErr == nil {
				s.log.Error("cannot record the acknowledged mark: a loss of acknowledged writes may go unnoticed", "file", s.acked.path, "err", err)
			} else if err == nil && s.ackErr != nil {
				s.log.Warn("recording the acknowledged mark again", "file", s.acked.path)
			}
			s.ackErr = err
		}
		for _, p := range b.ops {
			close(p.done)
		}
	}
}

// rerun runs an op that wrote nothing, in a batch refused, again alone
// in a transaction that is discarded: its result stands if it still
// writes nothing; if it now writes, it is refused too.
func (s *Store) rerun(a appliedOp, refused error) (appliedOp, error) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	again, _, err := runOp(txn, s, a.p)
	if err == nil && again.bytes > 0 {
		err = refused
	}
	return again, err
}

// newTxn starts a transaction that counts itself as the next commit
// (x/commits) — first, so that it is never what makes it too big.
func (s *Store) newTxn() *badger.Txn {
	txn := s.db.NewTransaction(true)
	if err := txn.Set(keyCommits, base.U64(s.mark.commits+1)); err != nil {
		panic(fmt.Sprintf("memory: counting a commit in an empty transaction: %v", err))
	}
	return txn
}

type appliedOp struct {
	p      *Pending
	hooks  []func()
	bytes  uint64 // what its writes take on disk, about
	memSeq uint64 // the insertion-log end it wrote, if any
}

// runOp runs p's op against txn. An op that fails leaves nothing in txn,
// except when applying its buffered writes fails part way (partial).
func runOp(txn *badger.Txn, s *Store, p *Pending) (a appliedOp, partial bool, err error) {
	tx := &Tx{txn: txn, store: s, writes: map[string]*write{}}
	if err := p.op(tx); err != nil {
		return a, false, err
	}
	if err := tx.apply(); err != nil {
		return a, true, err
	}
	return appliedOp{p: p, hooks: tx.hooks, bytes: tx.bytes, memSeq: tx.memSeq}, false, nil
}

// replay re-runs already applied ops into a fresh transaction after the
// previous one had to be discarded. Ops are functions of the store's state,
// which has not changed, so they write the same again; one that now fails
// is acknowledged with its error.
func (s *Store) replay(txn *badger.Txn, ops []appliedOp) []appliedOp {
	kept := ops[:0]
	for _, a := range ops {
		again, _, err := runOp(txn, s, a.p)
		if err != nil {
			s.answer(a.p, fmt.Errorf("memory: replay after split: %w", err))
			continue
		}
		kept = append(kept, again)
	}
	return kept
}

// Tx is an Op's view of the store: reads see committed data, the batch's
// earlier operations and this op's own writes; writes are buffered and
// applied only if the op succeeds.
type Tx struct {
	txn    *badger.Txn
	store  *Store
	writes map[string]*write
	order  []string
	hooks  []func()
	bytes  uint64 // of its applied writes, with Badger's overhead
	memSeq uint64 // the insertion-log end it wrote
}

// entryOverhead is, about, what Badger adds to a key and value on disk
// (entry header, version, checksum).
const entryOverhead = 64

type write struct {
	val    []byte
	delete bool
}

// Get returns a copy of the value of key, or ErrNotFound.
func (t *Tx) Get(key []byte) ([]byte, error) {
	if w, ok := t.writes[string(key)]; ok {
		if w.delete {
			return nil, ErrNotFound
		}
		return w.val, nil
	}
	return badgerReader{t.txn}.Get(key)
}

// Item returns key's entry, or ErrNotFound.
func (t *Tx) Item(key []byte) (Item, error) {
	if w, ok := t.writes[string(key)]; ok {
		if w.delete {
			return nil, ErrNotFound
		}
		return valueItem{key, w.val}, nil
	}
	return badgerReader{t.txn}.Item(key)
}

// Has reports whether key exists.
func (t *Tx) Has(key []byte) (bool, error) {
	_, err := t.Item(key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// NewIterator iterates over what is committed and what the earlier
// operations of the batch wrote, not over the op's own buffered writes.
func (t *Tx) NewIterator(o IterOptions) Iterator { return badgerReader{t.txn}.NewIterator(o) }

// Set buffers a write of key.
func (t *Tx) Set(key, val []byte) {
	k := string(key)
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.writes[k] = &write{val: val}
}

// Delete buffers a deletion of key.
func (t *Tx) Delete(key []byte) {
	k := string(key)
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.writes[k] = &write{delete: true}
}

// PutBlock verifies that block hashes to c and buffers its write. This is
// the only way a block enters the store.
func (t *Tx) PutBlock(c cid.Cid, block []byte) error {
	if len(block) > t.store.maxBlock {
		return fmt.Errorf("%w: block of %d bytes exceeds %d", ErrTooLarge, len(block), t.store.maxBlock)
	}
	if err := verifyBlock(c, block); err != nil {
		return err
	}
	t.Set(blockKey(c), block)
	return nil
}

// OnCommit registers fn to run after the op's writes are durable, before
// the op is acknowledged. Hooks run on the committer goroutine: keep them short.
func (t *Tx) OnCommit(fn func()) { t.hooks = append(t.hooks, fn) }

func (t *Tx) apply() error {
	for _, k := range t.order {
		for _, wt := range t.store.watches {
			if strings.HasPrefix(k, string(wt.prefix)) {
				key := []byte(k)
				t.hooks = append(t.hooks, func() { wt.fn(key) })
			}
		}
		w := t.writes[k]
		t.bytes += uint64(len(k)+len(w.val)) + entryOverhead
		if k == string(keyMemSeq) && len(w.val) == 8 {
			t.memSeq = decodeU64(w.val)
		}
		var err error
		if w.delete {
			err = t.txn.Delete([]byte(k))
		} else {
			err = t.txn.Set([]byte(k), w.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// verifyBlock checks that block hashes to c's multihash.
func verifyBlock(c cid.Cid, block []byte) error {
	dec, err := multihash.Decode(c.Hash())
	if err != nil {
		return fmt.Errorf("%w: bad multihash in %s: %v", ErrInvalid, c, err)
	}
	sum, err := multihash.Sum(block, dec.Code, dec.Length)
	if err != nil {
		return fmt.Errorf("%w: cannot hash with %s: %v", ErrInvalid, multihash.Codes[dec.Code], err)
	}
	if string(sum) != string(c.Hash()) {
		return fmt.Errorf("%w: %s: bytes do not match the CID", ErrCorrupt, c)
	}
	return nil
}

// Block returns the bytes of block c after verifying them against c.
// A stored block whose bytes do not match is ErrCorrupt, never served.
func (s *Store) Block(c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		b, err := readBlock(badgerReader{txn}, c)
		out = b
		return err
	})
	if why := s.unreadable.Load(); errors.Is(err, errValueUnreadable) && why != nil {
		err = fmt.Errorf("%w store: %s (block %s)", ErrCorrupt, *why, c)
	}
	return out, err
}

// HasBlock reports whether block c is stored.
func (s *Store) HasBlock(c cid.Cid) (bool, error) {
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(blockKey(c))
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// BlockSize returns the size of block c without reading its bytes.
func (s *Store) BlockSize(c cid.Cid) (int, error) {
	var n int64
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(blockKey(c))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("%w: block %s", ErrNotFound, c)
		}
		if err != nil {
			return classifyBadger(err)
		}
		n = item.ValueSize()
		return nil
	})
	return int(n), err
}

// BlockHashes calls fn with the multihash of every stored block, in key
// order, from one snapshot. Blocks are keyed by multihash alone: the
// codec of the CIDs they were stored under is not kept.
func (s *Store) BlockHashes(ctx context.Context, fn func(multihash.Multihash) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixBlock})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().KeyCopy(nil)
			if err := fn(multihash.Multihash(k[len(prefixBlock):])); err != nil {
				return err
			}
		}
		return nil
	})
}

func readBlock(r Reader, c cid.Cid) ([]byte, error) {
	item, err := r.Item(blockKey(c))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: block %s", ErrNotFound, c)
	}
	if err != nil {
		return nil, err
	}
	b, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 && item.ValueSize() > 0 {
		return nil, fmt.Errorf("%w: block %s: %w", ErrCorrupt, c, errValueUnreadable)
	}
	if err := verifyBlock(c, b); err != nil {
		return nil, err
	}
	return b, nil
}

// classifyBadger marks Badger's failures to read damaged files — a
// checksum that does not match, a block that does not decode, a value
// pointer past the end of its log — as corruption (ErrCorrupt), naming
// the file when Badger's error does. Badger flattens the errors it wraps
// into text, so they are recognised by it.
func classifyBadger(err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) || !isCorruption(err) {
		return err
	}
	if f := badgerFile(err); f != "" {
		return corruptFile(f, err)
	}
	return fmt.Errorf("%w store: %v", ErrCorrupt, err)
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

// errValueUnreadable: Badger could not read a value from its value log.
var errValueUnreadable = errors.New("its value cannot be read from the value log")

// badgerLogger passes Badger's log to the store's, and keeps the last
// value Badger could not read, with the file it names.
type badgerLogger struct {
	l          *slog.Logger
	unreadable *atomic.Pointer[string]
}

func (b badgerLogger) Errorf(f string, a ...any) {
	msg := fmt.Sprintf(f, a...)
	if _, why, ok := strings.Cut(msg, " Error: "); ok && strings.HasPrefix(msg, "Unable to read") {
		if file := badgerFile(errors.New(why)); file != "" {
			why = file + ": " + why
			b.unreadable.Store(&why)
		}
	}
	b.l.Error(msg, "component", "badger")
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Infof(f string, a ...any) {
	b.l.Debug(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Debugf(f string, a ...any) {}
