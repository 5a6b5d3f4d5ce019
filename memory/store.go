package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// Store errors.
var (
	ErrNotFound = errors.New("memory: not found")
	ErrClosed   = errors.New("memory: store closed")
	// ErrTooLarge marks a block or a write over the store's limits.
	ErrTooLarge = errors.New("memory: too large")
	// ErrLocked means another process has the data directory open.
	ErrLocked = errors.New("memory: data directory in use by another process")
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
	// MemTableMB sizes each of Badger's memtables, and Memtables bounds
	// how many are held (the one written and those waiting for a flush).
	// 0: Badger's defaults (64 MiB, 5).
	MemTableMB, Memtables int
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
	maxBlock int
	maxBatch int
	log      *slog.Logger

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

// OpenStore opens (creating if needed) the store in dir.
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
	bo := badger.DefaultOptions(dir).
		WithSyncWrites(true).       // one fsync per transaction, and one transaction per batch
		WithDetectConflicts(false). // the committer is the only writer
		WithBlockCacheSize(int64(o.CacheMB) << 20).
		WithMemTableSize(int64(o.MemTableMB) << 20).
		WithNumMemtables(o.Memtables).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithValueThreshold(valueThreshold). // large blocks (files) live in the value log

		WithLogger(badgerLogger{o.Logger}).
		WithLoggingLevel(badger.WARNING)
	if o.InMemory {
		bo = bo.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := badger.Open(bo)
	if err != nil {
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return nil, fmt.Errorf("%w: %s (is `memoria serve` running? use --server)", ErrLocked, dir)
		}
		return nil, fmt.Errorf("memory: open %s: %w", dir, err)
	}
	s := &Store{
		db:       db,
		maxBlock: o.MaxBlockBytes,
		maxBatch: o.MaxBatch,
		log:      o.Logger,
		queue:    make(chan *Pending, o.MaxBatch),
		stopped:  make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

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
	return s.db.Close()
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

// View runs a read-only transaction.
func (s *Store) View(fn func(txn *badger.Txn) error) error {
	return s.db.View(fn)
}

func (s *Store) commitLoop() {
	defer close(s.stopped)
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
// committed with one fsync, and then acknowledges every operation.
func (s *Store) commitBatch(batch []*Pending) {
	txn := s.db.NewTransaction(true)
	var applied []appliedOp

	commit := func() {
		err := txn.Commit()
		if err != nil {
			err = fmt.Errorf("memory: commit: %w", err)
			s.log.Error("group commit failed", "ops", len(applied), "err", err)
		}
		for _, a := range applied {
			if err == nil {
				for _, h := range a.hooks {
					h()
				}
			}
			a.p.err = err
			close(a.p.done)
		}
		applied = applied[:0]
		txn = s.db.NewTransaction(true)
	}

	for _, p := range batch {
		hooks, partial, err := runOp(txn, s, p.op)
		if errors.Is(err, badger.ErrTxnTooBig) && len(applied) > 0 {
			// Commit the earlier ops without this one's partial writes,
			// then retry it alone in a fresh transaction.
			txn.Discard()
			txn = s.db.NewTransaction(true)
			applied = s.replay(txn, applied)
			commit()
			hooks, partial, err = runOp(txn, s, p.op)
		}
		if errors.Is(err, badger.ErrTxnTooBig) {
			err = fmt.Errorf("%w: one write exceeds a transaction", ErrTooLarge)
		}
		if partial {
			// Drop this op's partial writes: rebuild the batch without it.
			txn.Discard()
			txn = s.db.NewTransaction(true)
			applied = s.replay(txn, applied)
		}
		if err != nil {
			p.err = err
			close(p.done)
			continue
		}
		applied = append(applied, appliedOp{p, hooks})
	}
	if len(applied) > 0 {
		commit()
	} else {
		txn.Discard()
	}
}

type appliedOp struct {
	p     *Pending
	hooks []func()
}

// runOp runs op against txn. An op that fails leaves nothing in txn,
// except when applying its buffered writes fails part way (partial).
func runOp(txn *badger.Txn, s *Store, op Op) (hooks []func(), partial bool, err error) {
	tx := &Tx{txn: txn, store: s, writes: map[string]*write{}}
	if err := op(tx); err != nil {
		return nil, false, err
	}
	if err := tx.apply(); err != nil {
		return nil, true, err
	}
	return tx.hooks, false, nil
}

// replay re-runs already applied ops into a fresh transaction after the
// previous one had to be discarded. Ops are functions of the store's state,
// which has not changed, so they write the same again; one that now fails
// is acknowledged with its error.
func (s *Store) replay(txn *badger.Txn, ops []appliedOp) []appliedOp {
	kept := ops[:0]
	for _, a := range ops {
		hooks, _, err := runOp(txn, s, a.p.op)
		if err != nil {
			a.p.err = fmt.Errorf("memory: replay after split: %w", err)
			close(a.p.done)
			continue
		}
		kept = append(kept, appliedOp{a.p, hooks})
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
}

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
	item, err := t.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return item.ValueCopy(nil)
}

// Has reports whether key exists.
func (t *Tx) Has(key []byte) (bool, error) {
	_, err := t.Get(key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

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
		b, err := readBlock(txn, c)
		out = b
		return err
	})
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

func readBlock(txn *badger.Txn, c cid.Cid) ([]byte, error) {
	item, err := txn.Get(blockKey(c))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: block %s", ErrNotFound, c)
	}
	if err != nil {
		return nil, classifyBadger(err)
	}
	b, err := item.ValueCopy(nil)
	if err != nil {
		return nil, classifyBadger(err)
	}
	if err := verifyBlock(c, b); err != nil {
		return nil, err
	}
	return b, nil
}

// classifyBadger marks Badger's checksum failures as corruption.
func classifyBadger(err error) error {
	if errors.Is(err, y.ErrChecksumMismatch) || strings.Contains(err.Error(), "checksum") {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return err
}

type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Infof(f string, a ...any) {
	b.l.Debug(fmt.Sprintf(f, a...), "component", "badger")
}
func (b badgerLogger) Debugf(f string, a ...any) {}
