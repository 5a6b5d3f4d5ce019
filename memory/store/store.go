package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/memory/base"
)

// The store's own keys (the others belong to the packages that write them;
// package memory's doc lists every key space).
var (
	// PrefixBlock keys blocks by multihash.
	PrefixBlock = []byte("b/")
	// PrefixTombstone keys the tombstones of forgotten blocks by
	// multihash (memory/forget owns their records): a block with one is
	// read as ErrForgotten and is never written again.
	PrefixTombstone = []byte("z/")
	// KeyCommits counts the commits made (8 bytes BE): every group commit
	// counts itself.
	KeyCommits = []byte("x/commits")
	// KeyMemSeq is the insertion log's last position (8 bytes BE); the
	// acknowledged mark records it beside the commit count.
	KeyMemSeq = []byte("x/memseq")
)

// BlockKey is the key of block c: its multihash (the codec is not kept).
func BlockKey(c cid.Cid) []byte { return base.Join(PrefixBlock, c.Hash()) }

// TombstoneKey is the key of the tombstone of block c, forgotten.
func TombstoneKey(c cid.Cid) []byte { return base.Join(PrefixTombstone, c.Hash()) }

// Options configure a Store. OptionsOf makes them from the configuration,
// the one place their defaults live (config.Default); Open refuses
// options without a batch, block, cache or memtable size.
type Options struct {
	// MaxBatch is the most operations acknowledged by one group commit.
	MaxBatch int
	// DeferFor is the longest a deferred operation (Defer) waits for a
	// group commit.
	DeferFor time.Duration
	// CommitInterval is the least time from one group commit's start to
	// the next's while the last batch held gatherFrom submitted operations
	// or more (0: none); see config.Store.CommitInterval.
	CommitInterval time.Duration
	// MaxBlockBytes caps one block.
	MaxBlockBytes int
	// CacheMB sizes Badger's block cache, which holds the decompressed
	// blocks of compressed tables (blockCacheSize).
	CacheMB int
	// Compression is how the tables Badger writes compress their blocks
	// (options.None, the zero value: read in place, mapped).
	Compression options.CompressionType
	// MemTableMB sizes each of Badger's memtables, its write buffers. A
	// full one is flushed to a table file of about this size, and level
	// 0 is compacted once it holds about 320 MiB of them (5 to 20
	// tables: levelZeroTables). A batch over 15% of it is split
	// (Badger's limit of one transaction; the in-memory backend keeps
	// the same).
	MemTableMB int
	// Memtables bounds how many memtables are held (the one written and
	// those waiting for a flush).
	Memtables int
	// MinFreeBytes is the free space the committer keeps on the store's
	// file system: a batch that would leave less is refused with
	// ErrDiskFull. Badger writes through memory-mapped files, so running
	// out of space would kill the process (SIGBUS); the reserve must cover
	// what Badger writes on its own: memtable flushes and compactions.
	MinFreeBytes uint64
	// FreeSpace reports the bytes available on the store's file system
	// (default: statfs of its directory; the in-memory backend has none
	// unless it is set). Tests inject it.
	FreeSpace func() (uint64, error)
	// SkipTableCheck opens without verifying every table first (see
	// integrity.go).
	SkipTableCheck bool
	// AcceptLoss opens a store that lost acknowledged writes: it logs
	// what is gone and takes what remains as acknowledged from now on.
	AcceptLoss bool
	// ValueLogMB is the size of a value-log file (gc.go).
	ValueLogMB int
	// GC schedules the garbage collection in the background (gc.go).
	GC GCOptions
	// Clock times the passes of the garbage collection and the wait of
	// deferred operations (default: the wall clock).
	Clock  clock.Clock
	Logger *slog.Logger
	// Tracer, when set, traces every group commit (trace.go).
	Tracer oteltrace.TracerProvider
}

// OptionsOf are the store options of the configuration.
func OptionsOf(c config.Store) Options {
	return Options{
		MaxBatch:       c.MaxBatch,
		DeferFor:       c.DeferFor.D(),
		CommitInterval: c.CommitInterval.D(),
		MaxBlockBytes:  c.MaxBlockBytes,
		CacheMB:        c.CacheMB,
		Compression:    compressions[c.Compression],
		MemTableMB:     c.MemTableMB,
		Memtables:      c.Memtables,
		MinFreeBytes:   uint64(c.MinFreeMB) << 20,
		SkipTableCheck: !c.VerifyTables,
		ValueLogMB:     c.ValueLogMB,
		GC:             GCOptions{Interval: c.GC.Interval.D(), DiscardRatio: c.GC.DiscardRatio},
	}
}

// compressions are the Badger compressions by their names in the
// configuration (store.compression).
var compressions = map[string]options.CompressionType{"none": options.None, "snappy": options.Snappy, "zstd": options.ZSTD}

// check refuses options with no sizes (not made by OptionsOf) and gives
// a store without a logger one that discards.
func (o *Options) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"max_batch", o.MaxBatch}, {"max_block_bytes", o.MaxBlockBytes}, {"cache_mb", o.CacheMB}, {"memtable_mb", o.MemTableMB}, {"memtables", o.Memtables}, {"value_log_mb", o.ValueLogMB}} {
		if f.v <= 0 {
			return fmt.Errorf("%w: store option %s is %d (make the options with store.OptionsOf)", base.ErrInvalid, f.name, f.v)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// engine is a backend: Badger (badger.go) or a sorted map (mem.go).
type engine interface {
	// view runs fn on a snapshot of what is committed.
	view(told uint64, fn func(Reader) error) error
	// begin starts a write transaction.
	begin() batch
	// check verifies the engine's files against their checksums (nil when
	// it has none).
	check() error
	// working tells the engine whether the committer has work.
	working(busy bool)
	// show makes the last commit readable by views (Store.tell): a
	// batch's commit is read by the next batch at once, by views only
	// once shown.
	show()
	close() error
}

// batch is a write transaction of an engine. set and delete return
// errTxnTooBig when the transaction cannot take the write; commit makes
// it durable (one fsync).
type batch interface {
	Reader
	set(key, val []byte) error
	delete(key []byte) error
	// wrote reports whether the transaction wrote or deleted key.
	wrote(key []byte) bool
	// fits reports whether the transaction surely takes the writes of w
	// too (false when it may not: the committer commits what it holds
	// first).
	fits(w *tx) bool
	commit() error
	discard()
}

// errTxnTooBig means a transaction is full: the committer splits it.
var errTxnTooBig = errors.New("store: transaction too big")

// Store is the source of truth: content-addressed blocks and the mutable
// key spaces, on one engine. Reads go straight to the engine; every write
// passes one door, the committer, which runs operations in order, applies
// a batch of them in one transaction and acknowledges them all after that
// transaction's single fsync (group commit) and, on disk, after the
// acknowledged mark moved (integrity.go).
type Store struct {
	eng      engine
	dir      string
	maxBlock int
	maxBatch int
	log      *slog.Logger
	space    spaceGuard
	// notes are what Badger reported only in its log: the last value it
	// could not read from a value log, and why (it returns no bytes, not
	// an error), and its stalls of writes (CommitStats); nil without
	// Badger.
	notes *badgerNotes
	lost  string // the loss of acknowledged writes accepted at open

	// Owned by the committer once it runs:
	mark     ackMark    // commits made and the insertion log's end
	logEnd   uint64     // x/memseq as committed, 0 while there is none (tx.Get)
	answered []*Pending // answered by the batch, to acknowledge in order
	acks     chan ackBatch
	// ackIdle is true while the acknowledger waits for a batch; the
	// committer that clears it waits on ackWoke until the acknowledger
	// has taken the batch (acknowledge).
	ackIdle atomic.Bool
	ackWoke chan struct{}
	// Owned by the acknowledger (ackLoop) once it runs:
	acked      *ackFile             // the acknowledged mark (integrity.go); nil in memory
	ackErr     error                // the mark's last write failure, logged once
	ackBatches []ackBatch           // the batches taken at once (reused)
	beforeMark func(commits uint64) // tests: called before each record of the mark

	queue    chan *Pending
	deferred chan *Pending // Defer's: committed with the next batch, or after deferFor
	deferFor time.Duration
	every    time.Duration       // Options.CommitInterval
	pause    func(time.Duration) // its wait: time.Sleep (tests watch it)
	clock    clock.Clock
	tracer   oteltrace.Tracer // nil: group commits are not traced
	mu       sync.RWMutex     // guards closed against Submit racing Close
	closed   bool
	stopped  chan struct{}
	subs     []func(Event) // set before the first write
	follows  []func(Event) // as subs, told once the views see a commit
	// told counts the commits told to the subscribers, from 1 (see
	// ToldBefore).
	told   atomic.Uint64
	gc     gcState     // the garbage collection (gc.go)
	tables tableChecks // the new tables checked in the background (tablecheck.go)
	idMu   sync.Mutex  // the identity's creation (backup.go)
	// The committer's work since the open (CommitStats).
	commits, committedOps, deferredOps, busyNanos, commitNanos atomic.Uint64
	batchTimes                                                 [len(BatchBounds) + 1]atomic.Uint64
	waits                                                      [WriteStages]waitCounter
}

// The stages of a submitted write's wait, as CommitStats counts them
// (Waits).
const (
	StageQueued      = iota // from its submission until its batch begins
	StageBatch              // its batch's operations and commit, until durable
	StageAcknowledge        // then until acknowledged: its acknowledged mark recorded
	WriteStages
)

// WaitBounds are the upper bounds of a write's wait in a stage that
// CommitStats counts (Waits): a wait over the last is counted past it.
var WaitBounds = [...]time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// waitCounter counts the waits of one stage by their time, and their sum.
type waitCounter struct {
	counts [len(WaitBounds) + 1]atomic.Uint64
	nanos  atomic.Uint64
}

func (w *waitCounter) add(d time.Duration) {
	w.counts[bucketOf(d, WaitBounds[:])].Add(1)
	w.nanos.Add(uint64(max(d, 0)))
}

// ready appends to out what ch holds now, until out holds limit items;
// open is false once ch is found closed.
func ready[T any](ch <-chan T, out []T, limit int) (_ []T, open bool) {
	for len(out) < limit {
		select {
		case v, ok := <-ch:
			if !ok {
				return out, false
			}
			out = append(out, v)
		default:
			return out, true
		}
	}
	return out, true
}

// bucketOf is the index of the first bound d is within, len(bounds) past
// the last.
func bucketOf(d time.Duration, bounds []time.Duration) int {
	i := 0
	for i < len(bounds) && d > bounds[i] {
		i++
	}
	return i
}

// countWaits counts the stages of p's wait, acknowledged now, if it was
// submitted (a deferred write, which has no waiter, has no submission
// time) and committed.
func (s *Store) countWaits(p *Pending, now time.Time) {
	if p.submitted.IsZero() || p.committed.IsZero() {
		return
	}
	s.waits[StageQueued].add(p.began.Sub(p.submitted))
	s.waits[StageBatch].add(p.committed.Sub(p.began))
	s.waits[StageAcknowledge].add(now.Sub(p.committed))
}

// BatchBounds are the upper bounds of the committer's batch times that
// CommitStats counts (Batches): a batch over the last is counted past it.
var BatchBounds = [...]time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second}

// slowBatch is how long a batch takes the committer before the store
// logs it (at warn).
const slowBatch = time.Second

// countBatch counts a batch that took d.
func (s *Store) countBatch(d time.Duration) { s.batchTimes[bucketOf(d, BatchBounds[:])].Add(1) }

// CommitStats is the committer's work since the store opened: the group
// commits it made (each one fsync) and the operations they committed;
// how long it was busy with batches (every write goes through this one
// goroutine: busy most of the time, writes queue for it) and how long of
// that it waited in Badger's commits (the value log, the fsync, the
// memtable); and how often and how long Badger held the writes back
// because level 0 of its tree was full — its compaction behind the
// writes (a commit waits for it).
type CommitStats struct {
	Commits, Ops uint64
	// Deferred are the Ops that waited for a commit to share (Defer,
	// UpdateDeferred).
	Deferred     uint64
	Busy, Commit time.Duration
	// Batches counts the batches by how long the committer took over each
	// (Busy is their sum): Batches[i] took at most BatchBounds[i] and more
	// than the bound before; the last, more than every bound. Every write
	// of a batch waited that long, besides its wait for the batch to begin.
	Batches [len(BatchBounds) + 1]uint64
	// Waits counts the submitted writes that were committed — not the
	// deferred ones, which nobody waits for — by how long each waited in
	// each stage (StageQueued, StageBatch, StageAcknowledge).
	Waits   [WriteStages]WaitCounts
	Stalls  uint64
	Stalled time.Duration
	// ReadsOpen are the read transactions open now (views share one while
	// the committer is busy), and OldestReadBehind how many commits the
	// oldest of them is behind the latest: Badger keeps every version it
	// may read, so a read held open for long keeps the garbage of every
	// write since. Zero for the in-memory backend.
	ReadsOpen        int
	OldestReadBehind uint64
	// Written is what the commits wrote into Badger by key space, the
	// most bytes first: every key and value of a batch once (its last
	// write of a key), a deletion its key. The values of valueLogSpaces
	// went to the value log, the rest into the tree, which its
	// compactions rewrite level by level. Nil for the in-memory backend.
	Written []SpaceWrites
}

// WaitCounts are the waits of a stage: Counts[i] took at most
// WaitBounds[i] and more than the bound before, the last more than every
// bound; Total is their sum.
type WaitCounts struct {
	Counts [len(WaitBounds) + 1]uint64
	Total  time.Duration
}

// CommitStats reports the committer's work since the open.
func (s *Store) CommitStats() CommitStats {
	c := CommitStats{Commits: s.commits.Load(), Ops: s.committedOps.Load(), Deferred: s.deferredOps.Load(),
		Busy: time.Duration(s.busyNanos.Load()), Commit: time.Duration(s.commitNanos.Load())}
	for i := range s.batchTimes {
		c.Batches[i] = s.batchTimes[i].Load()
	}
	for stage := range s.waits {
		w := &s.waits[stage]
		for i := range w.counts {
			c.Waits[stage].Counts[i] = w.counts[i].Load()
		}
		c.Waits[stage].Total = time.Duration(w.nanos.Load())
	}
	if s.notes != nil {
		c.Stalls, c.Stalled = s.notes.stalls.count.Load(), time.Duration(s.notes.stalls.nanos.Load())
	}
	if e, ok := s.eng.(*badgerEngine); ok {
		n, oldest, last := e.reads.open(&e.version)
		c.ReadsOpen, c.OldestReadBehind = n, last-oldest
		c.Written = e.written.stats()
	}
	return c
}

// Committer is the door of writes (what a subsystem that writes needs).
type Committer interface {
	// Submit queues op and returns at once.
	Submit(op Op) *Pending
	// Defer queues op, a write nobody waits for, for a later group
	// commit (Store.Defer), and returns at once.
	Defer(op Op) *Pending
	// Update runs op and waits until it is durable.
	Update(ctx context.Context, op Op) error
	// UpdateDeferred runs op with a later group commit, as Defer, and
	// waits until it is durable (Store.UpdateDeferred).
	UpdateDeferred(ctx context.Context, op Op) error
	// Barrier waits until everything submitted before it is durable or
	// failed.
	Barrier(ctx context.Context) error
}

// Viewer reads consistent snapshots (what a subsystem that reads needs).
type Viewer interface {
	View(fn func(r Reader) error) error
}

var (
	_ Committer = (*Store)(nil)
	_ Viewer    = (*Store)(nil)
	_ Tx        = (*tx)(nil)
)

// Event is one durable commit, told to subscribers (Subscribe) in commit
// order, after the commit is durable and before its operations are
// acknowledged: what a derived structure (a cache, an index) needs to
// follow the store.
type Event struct {
	// Commit is the commit's number (x/commits).
	Commit uint64
	// Told is its number among the commits told since the store was
	// opened: a view with a smaller ToldBefore does not see it.
	Told uint64
	// Keys are the keys the commit wrote or deleted, in the order its
	// operations wrote them (each once per operation). Strings, so that
	// subscribers share them safely and the committer copies nothing.
	Keys []string
	// Values are, for each of Keys, the value written, or nil where the
	// key was deleted (a value of no bytes is empty, not nil). Shared:
	// do not modify them.
	Values [][]byte
}

// Subscribe has fn told of every commit (see Event), before the views
// see it: a cache of what views read, kept current by the events, has
// made a commit's changes before any view reads the commit (View). fn
// runs on the committer's goroutine: keep it short. Subscribe before the
// first write.
func (s *Store) Subscribe(fn func(Event)) { s.subs = append(s.subs, fn) }

// Follow has fn told of every commit once the views see it, after every
// Subscribe's fn and before the commit's operations are acknowledged: for
// a follower that hands a commit's keys to another goroutine, which reads
// them in a view (a Subscribe's fn told them, that view could miss them).
// fn runs on the committer's goroutine. Follow before the first write.
func (s *Store) Follow(fn func(Event)) { s.follows = append(s.follows, fn) }

// Op is one atomic write: it reads and writes through tx, and either all of
// its writes are applied or none. An Op may be run more than once (when a
// batch must be split), so it must not have side effects outside tx; work
// to do after the write is durable goes into tx.OnCommit.
type Op func(tx Tx) error

// Tx is an Op's view of the store: reads see committed data, the batch's
// earlier operations and this op's own writes (iterators: not the op's
// own); writes are buffered and applied only if the op succeeds.
type Tx interface {
	Reader
	// Set buffers a write of key.
	Set(key, val []byte)
	// Delete buffers a deletion of key.
	Delete(key []byte)
	// PutBlock verifies that block hashes to c and buffers its write.
	// This is the only way a block enters the store.
	PutBlock(c cid.Cid, block []byte) error
	// OnCommit registers fn to run after the op's writes are durable,
	// before the op is acknowledged, on the committer's goroutine.
	OnCommit(fn func())
	// Committed reports whether key reads as the last commit left it:
	// neither this op nor an earlier one of its batch wrote or deleted
	// it. Every commit is told (Subscribe) before the committer runs the
	// next batch, so a cache the events keep current holds then what the
	// op would read (Cache.Latest) — false when unsure.
	Committed(key []byte) bool
}

// Pending is a submitted Op. Done is closed once the Op's writes are durable
// or it failed.
type Pending struct {
	op   Op
	done chan struct{}
	err  error
	link oteltrace.SpanContext // the submitter's span (SubmitTraced)
	by   *Store                // the store it is deferred on (Defer); nil: submitted

	mu   sync.Mutex
	then []func() // called once done (Then)

	// When it was submitted (zero if deferred), its batch began and its
	// commit returned (zero if it committed nothing), on the store's
	// clock: CommitStats' Waits.
	submitted, began, committed time.Time
}

// Done is closed when the operation is durable or has failed.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Then calls fn once the operation is durable or has failed (Done is
// closed then) — at once if it is — on the goroutine that acknowledges
// it: fn must not block. A waiter that would start a goroutine only to
// wait for Done saves that goroutine's wake-up, which on a busy machine
// waits for a core.
func (p *Pending) Then(fn func()) {
	p.mu.Lock()
	select {
	case <-p.done: // settled: closed under mu
		p.mu.Unlock()
		fn()
	default:
		p.then = append(p.then, fn)
		p.mu.Unlock()
	}
}

// settle closes Done and calls what Then registered.
func (p *Pending) settle() {
	p.mu.Lock()
	close(p.done)
	then := p.then
	p.then = nil
	p.mu.Unlock()
	for _, fn := range then {
		fn()
	}
}

// Err returns the operation's error; valid after Done is closed.
func (p *Pending) Err() error { return p.err }

// Wait blocks until the operation is durable (nil) or failed. A deferred
// operation (Defer) waited for is committed once twice Options.DeferFor
// has passed on the machine's clock, even on a store whose clock does not
// move (a test's): the committer's own timer, on the store's clock, has it
// committed before that everywhere else.
func (p *Pending) Wait(ctx context.Context) error {
	var late <-chan time.Time
	if p.by != nil {
		t := time.NewTimer(2 * p.by.deferFor)
		defer t.Stop()
		late = t.C
	}
	for {
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			return ctx.Err()
		case <-late:
			late = nil
			if err := p.by.Barrier(ctx); err != nil {
				select {
				case <-p.done: // settled meanwhile (a store closing commits what is deferred)
					return p.err
				default:
					return err
				}
			}
		}
	}
}

// newStore starts the committer of eng, whose commit count and insertion
// log end are read first.
func newStore(eng engine, dir string, o Options) (*Store, error) {
	s := &Store{
		eng:      eng,
		dir:      dir,
		maxBlock: o.MaxBlockBytes,
		maxBatch: o.MaxBatch,
		log:      o.Logger,
		space:    spaceGuard{free: o.FreeSpace, reserve: o.MinFreeBytes, log: o.Logger},
		queue:    make(chan *Pending, o.MaxBatch),
		deferred: make(chan *Pending, deferredQueue*o.MaxBatch),
		deferFor: o.DeferFor,
		every:    o.CommitInterval,
		pause:    time.Sleep,
		clock:    clock.Or(o.Clock),
		acks:     make(chan ackBatch, 4),
		ackWoke:  make(chan struct{}, 1),
		stopped:  make(chan struct{}),
	}
	if o.Tracer != nil {
		s.tracer = o.Tracer.Tracer(trace.Scope)
	}
	s.told.Store(1)
	if err := eng.view(0, func(r Reader) error {
		var err error
		if s.mark.commits, err = ReadU64(r, KeyCommits); err != nil {
			return err
		}
		s.mark.memSeq, err = ReadU64(r, KeyMemSeq)
		s.logEnd = s.mark.memSeq
		return err
	}); err != nil {
		return nil, fmt.Errorf("memory: open %s: %w", dir, err)
	}
	return s, nil
}

// start runs the committer, its samples labelled memoria=committer in a
// CPU profile (`go tool pprof -tagfocus memoria=committer`), as the
// acknowledger's memoria=acknowledger: one goroutine runs every
// operation, and a profile says what holds it.
func (s *Store) start() {
	go pprof.Do(context.Background(), pprof.Labels("memoria", "committer"), func(context.Context) { s.commitLoop() })
}

// AcceptedLoss says what the store had lost when it was opened with
// AcceptLoss, or "" when it had lost nothing.
func (s *Store) AcceptedLoss() string { return s.lost }

// CheckSpace reports whether writes are accepted now: nil, or why not
// (ErrDiskFull).
func (s *Store) CheckSpace() error { return s.space.check(0) }

// Explain adds to a broken invariant of the stored data (err) the damaged
// table behind it, when the tables say.
func (s *Store) Explain(err error) error {
	if verr := s.eng.check(); verr != nil {
		return fmt.Errorf("%w (found because %v)", verr, err)
	}
	return err
}

// Close stops the committer after it has written everything submitted,
// then closes the engine.
func (s *Store) Close() error {
	s.stopGC() // first: a pass writes through the committer
	s.stopTableChecks()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.stopped
	err := s.eng.close()
	if s.acked != nil {
		if aerr := s.acked.close(); err == nil {
			err = aerr
		}
	}
	return err
}

// Submit queues op for the committer and returns at once.
func (s *Store) Submit(op Op) *Pending { return s.submit(op, oteltrace.SpanContext{}) }

// SubmitTraced is Submit, with the span ctx carries (if any) linked from
// the span of the group commit that writes op. ctx does not cancel op.
func (s *Store) SubmitTraced(ctx context.Context, op Op) *Pending {
	return s.submit(op, oteltrace.SpanContextFromContext(ctx))
}

func (s *Store) submit(op Op, link oteltrace.SpanContext) *Pending {
	return s.enqueue(s.queue, &Pending{op: op, done: make(chan struct{}), link: link, submitted: s.clock.Now()})
}

// gatherFrom is how many submitted operations the last batch held when
// the next commit waits out the commit interval (Options.CommitInterval):
// several writers at work. One request's own writes come a few at a time,
// and a lone client waiting on itself gathers nothing: its inserts come
// one a batch (gathering from two, a scratch build made one client's
// inserts 395 → 236 /s), its chats two or three, so a lone chatting client
// waits now and then (about a millisecond a chat, README stop 60).
const gatherFrom = 3

// deferredQueue is how many batches of deferred operations may queue
// (Defer) before a caller waits: the committer, one goroutine among the
// requests' on two cores, falls behind in bursts, and with one batch of
// room recalls waited to queue their traces (with 16 clients: p99 264 →
// 230 ms, 329 → 367 recalls/s with sixteen batches).
const deferredQueue = 16

// Defer queues op, a write nobody waits for, to be committed with the
// next group commit or after Options.DeferFor, whichever comes first —
// in one commit (one fsync) with the others deferred meanwhile. An
// operation submitted after it is not committed before it; a Barrier
// after it waits for it. It returns at once.
func (s *Store) Defer(op Op) *Pending {
	p := &Pending{op: op, done: make(chan struct{})}
	if s.deferFor <= 0 {
		return s.enqueue(s.queue, p)
	}
	p.by = s
	return s.enqueue(s.deferred, p)
}

func (s *Store) enqueue(q chan *Pending, p *Pending) *Pending {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		p.err = base.ErrClosed
		p.settle()
		return p
	}
	q <- p
	return p
}

// Update runs op through the committer and waits until it is durable.
func (s *Store) Update(ctx context.Context, op Op) error {
	return s.Submit(op).Wait(ctx)
}

// UpdateDeferred runs op with the next group commit or after
// Options.DeferFor, whichever comes first (Defer), and waits until it is
// durable: for the writes of the background's work — a tier's step, an
// evaluation — whose worker waits for them and no client does. They then
// share the fsync of the requests' writes around them instead of each
// making a commit of its own, whose syncs cost the cores the same
// whatever it carries: below the machine's most an advance's background
// writes made half its commits (README, stop 61).
func (s *Store) UpdateDeferred(ctx context.Context, op Op) error {
	return s.Defer(op).Wait(ctx)
}

// Barrier waits until everything submitted before it is durable or failed.
func (s *Store) Barrier(ctx context.Context) error {
	return s.Update(ctx, func(Tx) error { return nil })
}

// View runs fn on a consistent snapshot of what is committed.
//
// The reader knows how many commits had been told to the subscribers
// when its snapshot was taken (ToldBefore): it sees at least those, and
// any commit it sees beyond them was told to them already (tell). So a
// cache a subscriber keeps serves it no entry that a commit it sees
// replaced: the entries that commit changed are newer than its count.
func (s *Store) View(fn func(r Reader) error) error { return s.eng.view(s.told.Load(), fn) }

func (s *Store) commitLoop() {
	defer close(s.stopped)
	acked := make(chan struct{})
	go pprof.Do(context.Background(), pprof.Labels("memoria", "acknowledger"), func(context.Context) { s.ackLoop(acked) })
	defer func() {
		close(s.acks)
		<-acked
	}()
	batch := make([]*Pending, 0, s.maxBatch)
	var (
		held []*Pending // deferred operations waiting for a batch
		due  clock.Timer
		dueC <-chan time.Time
		// The last batch: when its commit began (on the machine's clock:
		// the interval only gathers writes, it decides nothing), and how
		// many of its operations were submitted, not deferred.
		lastStart     time.Time
		lastSubmitted int
	)
	// take moves the deferred operations queued so far into held: a batch
	// begins with them, so that none is committed after an operation
	// submitted after it (Defer).
	take := func() { held, _ = ready(s.deferred, held, math.MaxInt) }
	for open := true; open; {
		var first *Pending
		if len(s.queue) == 0 {
			s.eng.working(false)
		}
		select {
		case first, open = <-s.queue:
		case p := <-s.deferred:
			held = append(held, p)
			if len(held) < s.maxBatch {
				if due == nil {
					due = s.clock.NewTimer(s.deferFor)
					dueC = due.C()
				}
				continue
			}
		case <-dueC:
		}
		if due != nil {
			due.Stop()
			due, dueC = nil, nil
		}
		// Several writers at work: the ones that come until the interval
		// since the last commit began has passed share this commit.
		if s.every > 0 && first != nil && lastSubmitted >= gatherFrom {
			if wait := s.every - time.Since(lastStart); wait > 0 {
				s.pause(wait)
			}
		}
		batch = batch[:0]
		if first != nil {
			batch = append(batch, first)
		}
		if open {
			batch, open = ready(s.queue, batch, s.maxBatch-len(held))
		}
		// Taken after the fill: every operation deferred before one the
		// batch holds is in its channel by now.
		take()
		submitted := len(batch)
		batch = slices.Insert(batch, 0, held...)
		held = held[:0]
		if len(batch) > 0 {
			if lastSubmitted = submitted; s.every > 0 {
				lastStart = time.Now()
			}
			s.eng.working(true)
			start, inBadger := s.clock.Now(), s.commitNanos.Load()
			for _, p := range batch {
				p.began = start
			}
			s.commitBatch(batch)
			took := s.clock.Since(start)
			s.busyNanos.Add(uint64(took))
			s.countBatch(took)
			if took >= slowBatch {
				s.log.Warn("slow batch: every write in it waited as long", "took", took.Round(time.Millisecond),
					"ops", len(batch), "in_badger", time.Duration(s.commitNanos.Load()-inBadger).Round(time.Millisecond))
			}
		}
	}
	// Closed: no more is deferred (Defer checks under s.mu).
	take()
	if len(held) > 0 {
		s.commitBatch(held)
	}
}

// commitBatch applies the batch in as few transactions as fit, each
// committed with one fsync, and has every operation acknowledged once the
// acknowledged mark covers it (ackLoop). A transaction that would take the
// file system below its reserve is not committed: its operations that
// write fail with ErrDiskFull.
func (s *Store) commitBatch(ops []*Pending) {
	var txn batch // begun when an op needs it
	var applied []appliedOp
	began := s.traceBegin()

	commit := func() {
		var need uint64
		for _, a := range applied {
			need += a.bytes
		}
		span := s.traceCommit(began, applied, need)
		var err error
		var mark *ackMark
		if need == 0 {
			txn.discard() // nothing written: nothing to commit
		} else if err = s.space.check(need); err == nil {
			fsync := span.fsync()
			start := s.clock.Now()
			err = txn.commit()
			committed := s.clock.Now()
			s.commitNanos.Add(uint64(committed.Sub(start)))
			fsync.End()
			if err != nil {
				err = fmt.Errorf("memory: commit: %w", err)
				s.log.Error("group commit failed", "ops", len(applied), "err", err)
			} else {
				s.commits.Add(1)
				s.committedOps.Add(uint64(len(applied)))
				s.mark.commits++
				deferred := 0
				for _, a := range applied {
					s.mark.memSeq = max(s.mark.memSeq, a.memSeq)
					if a.memSeq != 0 {
						s.logEnd = a.memSeq
					}
					if a.p.by != nil {
						deferred++
					}
					a.p.committed = committed
				}
				s.deferredOps.Add(uint64(deferred))
				m := s.mark
				mark = &m
				s.tell(m.commits, applied)
			}
		} else {
			txn.discard()
		}
		for _, a := range applied {
			aerr := err
			if errors.Is(err, base.ErrDiskFull) && a.bytes == 0 {
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
		span.end(mark, err)
		s.acknowledge(mark)
		applied = applied[:0]
		// The next transaction begins when an op needs it: most batches
		// fit one, and one begun here would be discarded.
		txn = nil
		began = s.traceBegin()
	}

	for _, p := range ops {
		if txn == nil {
			txn = s.newTxn()
		}
		a, partial, err := runOp(txn, s, p, func(t *tx) {
			if len(applied) > 0 && !txn.fits(t) {
				// Commit the earlier ops first: this one's writes were
				// computed on what they wrote, which is then committed.
				commit()
				txn = s.newTxn()
				t.txn = txn
			}
		})
		if errors.Is(err, errTxnTooBig) && len(applied) > 0 {
			// fits misjudged it: commit the earlier ops without this
			// one's partial writes, then retry it alone in a fresh
			// transaction.
			txn.discard()
			txn = s.newTxn()
			applied = s.replay(txn, applied)
			commit()
			txn = s.newTxn()
			a, partial, err = runOp(txn, s, p, nil)
		}
		if errors.Is(err, errTxnTooBig) {
			err = fmt.Errorf("%w: one write exceeds a transaction", base.ErrTooLarge)
		}
		if partial {
			// Drop this op's partial writes: rebuild the batch without it.
			txn.discard()
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
	if txn != nil {
		txn.discard()
	}
	s.acknowledge(nil)
}

// tell gives the subscribers the event of a durable commit, then shows
// the commit to the views, then counts it told, then gives the followers
// the event: a view loads the count before it takes its snapshot (View),
// and must neither see a commit the subscribers' caches have not made,
// nor count one it does not see.
func (s *Store) tell(commit uint64, applied []appliedOp) {
	told := s.told.Load() + 1 // the committer alone counts
	var e Event
	if len(s.subs)+len(s.follows) > 0 {
		n := 0
		for _, a := range applied {
			n += len(a.keys)
		}
		e = Event{Commit: commit, Told: told, Keys: make([]string, 0, n), Values: make([][]byte, 0, n)}
		for _, a := range applied {
			e.Keys = append(e.Keys, a.keys...)
			e.Values = append(e.Values, a.values...)
		}
	}
	for _, fn := range s.subs {
		fn(e)
	}
	s.eng.show()
	s.told.Store(told)
	for _, fn := range s.follows {
		fn(e)
	}
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
//
// An idle acknowledger is handed the core too: Go runs a goroutine a
// channel send wakes next on the sender's processor, but only once the
// sender blocks, and the committer goes on with its next batch for
// milliseconds, so the acknowledger — and every write of the batch —
// waited that long (issue 15, stop 64: 5 ms at the median, 17–23 ms at
// the 90th percentile, of a write's wait for its acknowledgement with 64
// clients chatting). The committer waits until the acknowledger has taken
// the batch; the acknowledger then records the mark in a system call,
// which gives the processor back to the committer.
func (s *Store) acknowledge(mark *ackMark) {
	if len(s.answered) == 0 && mark == nil {
		return
	}
	handOver := s.ackIdle.CompareAndSwap(true, false)
	s.acks <- ackBatch{mark, s.answered}
	s.answered = nil
	if handOver {
		<-s.ackWoke
	}
}

// ackLoop records the acknowledged mark, durably, and then acknowledges
// the operations it covers, in commit order. It runs beside the
// committer, so that the mark's fsync overlaps the next commit's; the
// batches that queued meanwhile share one record of the latest mark.
func (s *Store) ackLoop(done chan<- struct{}) {
	defer close(done)
	for open := true; open; {
		s.ackIdle.Store(true)
		b, ok := <-s.acks
		if !s.ackIdle.CompareAndSwap(true, false) {
			s.ackWoke <- struct{}{} // the committer handed this batch over (acknowledge)
		}
		if !ok {
			return
		}
		var batches []ackBatch
		batches, open = ready(s.acks, append(s.ackBatches[:0], b), math.MaxInt)
		var mark *ackMark
		for _, b := range batches {
			if b.mark != nil {
				mark = b.mark // the latest covers the earlier
			}
		}
		if mark != nil && s.acked != nil {
			if s.beforeMark != nil {
				s.beforeMark(mark.commits)
			}
			err := s.acked.record(*mark)
			if err != nil && s.ackErr == nil {
				s.log.Error("cannot record the acknowledged mark: a loss of acknowledged writes may go unnoticed", "file", s.acked.path, "err", err)
			} else if err == nil && s.ackErr != nil {
				s.log.Warn("recording the acknowledged mark again", "file", s.acked.path)
			}
			s.ackErr = err
		}
		now := s.clock.Now()
		for i, b := range batches {
			for _, p := range b.ops {
				s.countWaits(p, now)
				p.settle()
			}
			batches[i] = ackBatch{}
		}
		s.ackBatches = batches[:0]
	}
}

// rerun runs an op that wrote nothing, in a batch refused, again alone
// in a transaction that is discarded: its result stands if it still
// writes nothing; if it now writes, it is refused too.
func (s *Store) rerun(a appliedOp, refused error) (appliedOp, error) {
	txn := s.eng.begin()
	defer txn.discard()
	again, _, err := runOp(txn, s, a.p, nil)
	if err == nil && again.bytes > 0 {
		err = refused
	}
	return again, err
}

// newTxn starts a transaction that counts itself as the next commit
// (x/commits) — first, so that it is never what makes it too big.
func (s *Store) newTxn() batch {
	txn := s.eng.begin()
	if err := txn.set(KeyCommits, base.U64(s.mark.commits+1)); err != nil {
		panic(fmt.Sprintf("memory: counting a commit in an empty transaction: %v", err))
	}
	return txn
}

type appliedOp struct {
	p      *Pending
	hooks  []func()
	keys   []string // written or deleted, for the commit's event
	values [][]byte // written (nil: deleted), for the commit's event
	bytes  uint64   // what its writes take on disk, about
	memSeq uint64   // the insertion-log end it wrote, if any
}

// runOp runs p's op against txn. An op that fails leaves nothing in txn,
// except when applying its buffered writes fails part way (partial).
// beforeApply, when given, sees the op's writes before they are applied,
// and may hand them to another transaction (tx.txn).
func runOp(txn batch, s *Store, p *Pending, beforeApply func(*tx)) (a appliedOp, partial bool, err error) {
	t := &tx{txn: txn, store: s, writes: map[string]write{}}
	if err := p.op(t); err != nil {
		return a, false, err
	}
	if beforeApply != nil {
		beforeApply(t)
	}
	if err := t.apply(); err != nil {
		return a, true, err
	}
	keys, values := t.keys()
	return appliedOp{p: p, hooks: t.hooks, keys: keys, values: values, bytes: t.bytes, memSeq: t.memSeq}, false, nil
}

// replay re-runs already applied ops into a fresh transaction after the
// previous one had to be discarded. Ops are functions of the store's state,
// which has not changed, so they write the same again; one that now fails
// is acknowledged with its error.
func (s *Store) replay(txn batch, ops []appliedOp) []appliedOp {
	kept := ops[:0]
	for _, a := range ops {
		again, _, err := runOp(txn, s, a.p, nil)
		if err != nil {
			s.answer(a.p, fmt.Errorf("memory: replay after split: %w", err))
			continue
		}
		kept = append(kept, again)
	}
	return kept
}

// tx is the Tx of an Op: its writes are buffered until the op returns.
type tx struct {
	txn    batch
	store  *Store
	writes map[string]write
	order  []string
	hooks  []func()
	bytes  uint64 // of its applied writes, with the engine's overhead
	memSeq uint64 // the insertion-log end it wrote
}

// entryOverhead is, about, what Badger adds to a key and value on disk
// (entry header, version, checksum).
const entryOverhead = 64

type write struct {
	val    []byte
	delete bool
}

func (t *tx) Get(key []byte) ([]byte, error) {
	if w, ok := t.writes[string(key)]; ok {
		if w.delete {
			return nil, base.ErrNotFound
		}
		return w.val, nil
	}
	if v, ok := t.logEnd(key); ok {
		return v, nil
	}
	return t.txn.Get(key)
}

// logEnd is key's value if key is the insertion log's end, which every
// new memory's operation reads and writes, and the batch has not written
// it: as the last commit left it, without Badger, which looks for a key
// in every memtable and level until it finds the version read — and this
// one has a version in most of them.
func (t *tx) logEnd(key []byte) ([]byte, bool) {
	if t.store.logEnd == 0 || string(key) != string(KeyMemSeq) || t.txn.wrote(key) {
		return nil, false
	}
	return base.U64(t.store.logEnd), true
}

func (t *tx) Item(key []byte) (Item, error) {
	if w, ok := t.writes[string(key)]; ok {
		if w.delete {
			return nil, base.ErrNotFound
		}
		return valueItem{key, w.val}, nil
	}
	if v, ok := t.logEnd(key); ok {
		return valueItem{key, v}, nil
	}
	return t.txn.Item(key)
}

func (t *tx) Has(key []byte) (bool, error) { return hasItem(t, key) }

func (t *tx) NewIterator(o IterOptions) Iterator { return t.txn.NewIterator(o) }

func (t *tx) Set(key, val []byte) {
	if val == nil {
		val = []byte{} // nil is a deletion's, in the commit's event
	}
	k := string(key)
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.writes[k] = write{val: val}
}

func (t *tx) Delete(key []byte) {
	k := string(key)
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.writes[k] = write{delete: true}
}

func (t *tx) PutBlock(c cid.Cid, block []byte) error {
	if len(block) > t.store.maxBlock {
		return fmt.Errorf("%w: block of %d bytes exceeds %d", base.ErrTooLarge, len(block), t.store.maxBlock)
	}
	if err := VerifyBlock(c, block); err != nil {
		return err
	}
	if gone, err := t.Has(TombstoneKey(c)); err != nil {
		return err
	} else if gone {
		return fmt.Errorf("%w: %s was forgotten and is not stored again", base.ErrForgotten, c)
	}
	if len(block) >= valueThreshold && t.holdsBlock(c, block) {
		return nil // a second copy would only be garbage in the value log (gc.go)
	}
	t.Set(BlockKey(c), block)
	return nil
}

// holdsBlock reports whether block c is stored already, intact (a damaged
// copy is written again).
func (t *tx) holdsBlock(c cid.Cid, block []byte) bool {
	item, err := t.Item(BlockKey(c))
	if err != nil {
		return false
	}
	stored, err := item.ValueCopy(nil)
	return err == nil && VerifyBlock(c, stored) == nil
}

func (t *tx) OnCommit(fn func()) { t.hooks = append(t.hooks, fn) }

func (t *tx) Committed(key []byte) bool {
	_, own := t.writes[string(key)]
	return !own && !t.txn.wrote(key)
}

// keys are the keys the op wrote and their values (nil: deleted), for
// the commit's event.
func (t *tx) keys() ([]string, [][]byte) {
	if len(t.store.subs) == 0 {
		return nil, nil
	}
	values := make([][]byte, len(t.order))
	for i, k := range t.order {
		if w := t.writes[k]; !w.delete {
			values[i] = w.val
		}
	}
	return t.order, values
}

func (t *tx) apply() error {
	for _, k := range t.order {
		w := t.writes[k]
		t.bytes += uint64(len(k)+len(w.val)) + entryOverhead
		if k == string(KeyMemSeq) && len(w.val) == 8 {
			t.memSeq = base.DecodeU64(w.val)
		}
		// The batch and Badger read the key and keep copies of their own
		// (Badger's pending writes, its versioned key): k's bytes, not a
		// copy of them, one allocation fewer a key.
		key := unsafe.Slice(unsafe.StringData(k), len(k))
		var err error
		if w.delete {
			err = t.txn.delete(key)
		} else {
			err = t.txn.set(key, w.val)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// VerifyBlock checks that block hashes to c's multihash.
func VerifyBlock(c cid.Cid, block []byte) error {
	dec, err := multihash.Decode(c.Hash())
	if err != nil {
		return fmt.Errorf("%w: bad multihash in %s: %v", base.ErrInvalid, c, err)
	}
	sum, err := multihash.Sum(block, dec.Code, dec.Length)
	if err != nil {
		return fmt.Errorf("%w: cannot hash with %s: %v", base.ErrInvalid, multihash.Codes[dec.Code], err)
	}
	if string(sum) != string(c.Hash()) {
		return fmt.Errorf("%w: %s: bytes do not match the CID", base.ErrCorrupt, c)
	}
	return nil
}

// Block returns the bytes of block c after verifying them against c.
// A stored block whose bytes do not match is ErrCorrupt, never served.
func (s *Store) Block(c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.View(func(r Reader) error {
		b, err := ReadBlock(r, c)
		out = b
		return err
	})
	if errors.Is(err, errValueUnreadable) && s.notes != nil {
		if why := s.notes.unreadable.Load(); why != nil {
			err = fmt.Errorf("%w store: %s (block %s)", base.ErrCorrupt, *why, c)
		}
	}
	return out, err
}

// HasBlock reports whether block c is stored.
func (s *Store) HasBlock(c cid.Cid) (bool, error) {
	var ok bool
	err := s.View(func(r Reader) error {
		var err error
		ok, err = r.Has(BlockKey(c))
		return err
	})
	return ok, err
}

// Forgotten reports whether block c was forgotten (has a tombstone).
func (s *Store) Forgotten(c cid.Cid) (bool, error) {
	var ok bool
	err := s.View(func(r Reader) error {
		var err error
		ok, err = r.Has(TombstoneKey(c))
		return err
	})
	return ok, err
}

// BlockSize returns the size of block c without reading its bytes.
func (s *Store) BlockSize(c cid.Cid) (int, error) {
	var n int64
	err := s.View(func(r Reader) error {
		item, err := r.Item(BlockKey(c))
		if errors.Is(err, base.ErrNotFound) {
			if gone, herr := r.Has(TombstoneKey(c)); herr == nil && gone {
				return fmt.Errorf("%w: block %s", base.ErrForgotten, c)
			}
			return fmt.Errorf("%w: block %s", base.ErrNotFound, c)
		}
		if err != nil {
			return err
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
	return s.View(func(r Reader) error {
		it := r.NewIterator(IterOptions{Prefix: PrefixBlock})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k := it.Item().KeyCopy(nil)
			if err := fn(multihash.Multihash(k[len(PrefixBlock):])); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadBlock reads block c through r and verifies it.
func ReadBlock(r Reader, c cid.Cid) ([]byte, error) {
	item, err := r.Item(BlockKey(c))
	if errors.Is(err, base.ErrNotFound) {
		if gone, herr := r.Has(TombstoneKey(c)); herr == nil && gone {
			return nil, fmt.Errorf("%w: block %s", base.ErrForgotten, c)
		}
		return nil, fmt.Errorf("%w: block %s", base.ErrNotFound, c)
	}
	if err != nil {
		return nil, err
	}
	b, err := item.ValueCopy(nil)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 && item.ValueSize() > 0 {
		return nil, fmt.Errorf("%w: block %s: %w", base.ErrCorrupt, c, errValueUnreadable)
	}
	if err := VerifyBlock(c, b); err != nil {
		return nil, err
	}
	return b, nil
}

// errValueUnreadable: Badger could not read a value from its value log.
var errValueUnreadable = errors.New("its value cannot be read from the value log")

// ReadU64 reads an 8-byte big-endian counter; 0 when absent.
func ReadU64(r Reader, key []byte) (uint64, error) {
	item, err := r.Item(key)
	if errors.Is(err, base.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: counter %s", base.ErrCorrupt, key)
		}
		n = base.DecodeU64(v)
		return nil
	})
	return n, err
}

// spaceGuard refuses writes that would leave less than reserve bytes free.
type spaceGuard struct {
	free     func() (uint64, error) // nil: no limit
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
			base.ErrDiskFull, free>>20, g.reserve>>20)
	} else if err != nil {
		err = fmt.Errorf("%w: cannot read the free space of the data directory's file system: %v", base.ErrDiskFull, err)
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
