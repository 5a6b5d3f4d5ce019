package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/memoria-ai/memoria/internal/clock"

	"github.com/ipfs/go-cid"
	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/index"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/migrate"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/memory/vector"
)

// Options configure a Self.
type Options struct {
	Config   config.Config
	Embedder llm.Embedder
	// Reranker reorders recall's best candidates (recall.rerank; nil: off).
	Reranker llm.Reranker
	Clock    clock.Clock
	Logger   *slog.Logger
	// FreeSpace reports the bytes available on the data directory's file
	// system (default: statfs); tests inject it.
	FreeSpace func() (uint64, error)
	// AcceptLoss opens a store that lost acknowledged writes (see
	// base.ErrLostWrites): what is gone is logged, what remains is served.
	AcceptLoss bool
	// Progress, when set, is told how rebuilding derived state advances.
	Progress func(stage string, done, total uint64)
	// Normalize, when set, canonicalises a new memory's text before it is
	// compared with its nearest neighbour for dedup (Living Memory's
	// normalize_fn, e.g. an LLM call).
	Normalize func(ctx context.Context, text string) (string, error)
	// Summarize, when set, writes the text of a compression's centroid or
	// a cold branch's archive memory from its sources' texts (Living
	// Memory's LLM summary); when unset or when it fails, an extractive
	// summary is used.
	Summarize func(ctx context.Context, texts []string) (string, error)
	// Evaluator evaluates queries for recall's metric path (EUMAS), as
	// the evaluator actor evaluates memories; nil turns the path off.
	Evaluator eumas.Evaluator
	// Tracer, when set, traces the store's group commits (recall and
	// embedding spans follow the span of the context they are given).
	Tracer oteltrace.TracerProvider

	// Prewarm, once the self is open, reads the metadata and blocks of
	// the newest memories into their caches in the background
	// (store.prewarm; the server's, not the tools').
	Prewarm bool

	// noVecSnap: rebuild the vector index without its snapshot (Open's
	// second try when the snapshot disagreed with the store).
	noVecSnap bool
}

// Self is the aggregate of an agent's memories across all sonas: the store,
// the derived vector index, and the subsystems over them (its exported
// fields), wired here. It is safe for concurrent use. Writes to a sona's
// chain must come from that sona's one owner (its actor); everything else
// may be called from anywhere.
type Self struct {
	// Tiers keeps the MemoryOS tiers of every sona.
	Tiers *tiers.Store
	// Anchors is the anchor list (XmetaV's significant memories).
	Anchors *anchor.List
	// Consensus is the agents' consensus on what the backbone holds.
	Consensus *consensus.Ledger
	// Assoc reads the typed associations and co-access partners.
	Assoc *assoc.Graph
	// Evals keeps the EUMAS evaluations and the metric profiles.
	Evals *eumas.Store
	// Memories reads memories and their metadata (cached) and keeps
	// their importance.
	Memories *meta.Store
	// Sonas is the registry of sonas: records, centroids, members.
	Sonas *chain.Sonas
	// Chains prepares memories and writes the chains' appends.
	Chains *chain.Writer
	// Backbone writes and lists the backbone's chain.
	Backbone *chain.Backbone
	// Text is the full-text index, which follows the store's commits.
	Text *index.Text
	// Transfer exports the self and imports exports.
	Transfer *transfer.Transfer
	// Living is Living Memory's upkeep: sweep, compression, dream.
	Living *living.Living
	// Recaller answers recalls; the caller submits their traces.
	Recaller *recall.Recaller
	// Forget excises memories: tombstones, and everything derived gone.
	Forget *forget.Forgetter

	store *store.Store
	index *vector.Index
	emb   llm.Embedder
	cfg   config.Config
	clock clock.Clock
	log   *slog.Logger

	memories atomic.Int64 // count of memory metadata records
	// covered is the insertion-log position the vector index holds every
	// memory up to (the vector snapshot's position).
	covered atomic.Uint64
	// vecSnaps writes and restores the vector index's snapshot.
	vecSnaps *index.VectorSnapshots
	// metaSnapPath is the metadata snapshot's file ("": none kept), and
	// bodiesPath the body snapshot's (recall.Recaller.WriteBodies).
	metaSnapPath, bodiesPath string
	// bgWG counts the goroutines of the self's background work (the
	// metadata snapshot's writers, the caches' warming), which closing
	// stopping stops; warmed is closed once the caches are warmed.
	bgWG     sync.WaitGroup
	stopping chan struct{}
	warmed   chan struct{}
	// metaChanged counts the metadata records written since the
	// metadata snapshot's version (about: the commits' keys since the
	// open, plus those it read after the snapshot); metaSnapBusy is set
	// while one is written.
	metaChanged  atomic.Int64
	metaSnapBusy atomic.Bool
	// lastActivity is the unix second of the latest append that was not
	// the heartbeat's own (a merge or an insight); the clock at open.
	lastActivity atomic.Int64
}

// Open opens the self stored under cfg.DataDir.
func Open(ctx context.Context, o Options) (*Self, error) {
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Embedder == nil {
		return nil, errors.New("memory: Open needs an embedder")
	}
	dir := o.Config.DataDir
	so := store.OptionsOf(o.Config.Store)
	so.FreeSpace, so.AcceptLoss, so.Logger, so.Clock, so.Tracer = o.FreeSpace, o.AcceptLoss, o.Logger, o.Clock, o.Tracer
	st, err := store.Open(filepath.Join(dir, "store"), so)
	if err != nil {
		return nil, err
	}
	heapVecs, spillDir := int64(o.Config.Index.HeapVectorsMB)<<20, ""
	if heapVecs == 0 {
		heapVecs = math.MaxInt64 // every vector in the heap
	} else if dir != "" {
		spillDir = filepath.Join(dir, "vector")
		if err := os.MkdirAll(spillDir, 0o755); err != nil {
			st.Close()
			return nil, err
		}
	}
	s := &Self{
		store: st,
		emb:   o.Embedder,
		cfg:   o.Config,
		clock: o.Clock,
		log:   o.Logger,
		index: vector.New(vector.Options{
			Dims:           o.Embedder.Dims(),
			M:              o.Config.Index.M,
			EfSearch:       o.Config.Index.EfSearch,
			EfConstruction: o.Config.Index.EfConstruction,
			Backlog:        o.Config.Index.Backlog,
			Seed:           o.Config.Index.Seed,
			HeapVectors:    heapVecs,
			PackBytes:      packBytes(o.Config.Index.PackMB),
			SpillDir:       spillDir,
			SpillRoom:      spillRoom(st),
			SpillStopped: func(err error) {
				o.Logger.Warn("vector index: vectors beyond index.heap_vectors_mb stay in the heap from now on", "err", err)
			},
			Clock: o.Clock,
			Lazy:  o.Config.LazyGraph(),
		}),
	}
	snapPath := index.VectorSnapshotPath(dir)
	s.metaSnapPath, s.bodiesPath, s.stopping = MetaSnapshotPath(dir), BodySnapshotPath(dir), make(chan struct{})
	if dir == "" {
		snapPath, s.metaSnapPath, s.bodiesPath = "", "", ""
	}
	s.vecSnaps = index.NewVectorSnapshots(st, s.index, index.SnapshotOptions{
		Path: snapPath, Embedder: o.Embedder.ID(), Covered: s.covered.Load, Clock: o.Clock, Logger: o.Logger,
		Members:       func() []byte { return s.Sonas.EncodeMembers() },
		MemberChanges: func() uint64 { return s.Sonas.Changes() },
		Runs:          func() []vector.Run { return s.Sonas.AllRuns() },
	})
	if s.metaSnapPath != "" {
		st.Subscribe(s.countMetaWrites)
	}
	s.Memories = meta.New(st, o.Config.Store.MemoryCache, o.Config.Recall)
	s.Sonas = chain.NewSonas(st, s.Embed, o.Clock, s.index.Dims())
	s.Chains = chain.NewWriter(st, s.Sonas, s.Memories, s.index, chain.Options{
		Config:        o.Config,
		Embed:         s.Embed,
		Normalize:     o.Normalize,
		Contributions: s.contributions(),
		OnAppended:    s.appended,
	})
	s.Backbone = chain.NewBackbone(st, s.Sonas, s.Chains, s.Embed, o.Clock)
	s.Text = index.New(st, s.Memories, s.Sonas, index.Options{
		Dir:      filepath.Join(dir, "text"),
		K1:       o.Config.Recall.BM25K1,
		B:        o.Config.Recall.BM25B,
		Backlog:  o.Config.Index.TextBacklog,
		Logger:   o.Logger,
		Clock:    o.Clock,
		Progress: o.Progress,
	})
	s.Anchors = anchor.NewList(st, o.Config.Anchoring)
	s.Assoc = assoc.NewGraph(st, max(1, o.Config.Store.MemoryCache))
	if every := o.Config.Recall.CoAccessFlush.D(); every > 0 {
		s.Assoc.Buffer(st, assoc.BufferOptions{Every: every, Clock: o.Clock, Logger: o.Logger})
	}
	s.Assoc.HoldLinksBack(st, assoc.HoldOptions{Hold: o.Config.Recall.LinksHold.D(), Log: chain.EachLogged, Clock: o.Clock, Logger: o.Logger})
	if every := o.Config.Recall.TouchFlush.D(); every > 0 {
		s.Memories.BufferTouches(st, meta.TouchOptions{Every: every, Clock: o.Clock, Logger: o.Logger})
	}
	s.Consensus = consensus.NewLedger(st, consensusEnv{s}, o.Config, o.Clock)
	s.Tiers = tiers.NewStore(st, tierEnv{s}, tiers.Options{Tiers: o.Config.Tiers, Thresholds: o.Config.Threshold, Clock: o.Clock})
	evo := eumas.Options{ImportanceSeed: o.Config.Evaluation.ImportanceSeed, Clock: o.Clock}
	if o.Config.Evaluation.Mode != "off" {
		evo.Evaluator = o.Evaluator
		evo.Metrics = eumas.Metrics(o.Config.Evaluation.Archetypes)
	}
	s.Evals = eumas.NewStore(st, eumas.StoreEnv{Memories: s.Memories, Vectors: s.index}, evo)
	env := selfState{s: s}
	s.Transfer = transfer.New(st, transferEnv{env}, transfer.Options{
		Config: o.Config, EmbedderID: o.Embedder.ID(), Dims: o.Embedder.Dims(), Clock: o.Clock,
	})
	s.Living = living.New(st, livingEnv{env}, living.Options{
		Config: o.Config, Clock: o.Clock, Logger: o.Logger, Summarize: o.Summarize,
	})
	s.Recaller = recall.New(st, recall.Env{
		Sonas: s.Sonas, Memories: s.Memories, Text: s.Text, Profiles: s.Evals, Vectors: s.index,
		BackboneSona: s.Backbone.Sona, Embed: s.Embed, Count: s.memories.Load, Reranker: o.Reranker, Links: s.Assoc,
	}, recall.Options{Config: o.Config, Clock: o.Clock, Logger: o.Logger})
	s.Forget = forget.New(st, forgetEnv{env}, o.Clock)
	s.lastActivity.Store(o.Clock.Now().Unix())
	if err := s.load(ctx, !o.noVecSnap); err != nil {
		s.close(false)
		if errors.Is(err, errVecSnapMismatch) {
			s.log.Warn("vector index: the snapshot disagrees with the store; opening again without it", "err", err)
			os.Remove(index.VectorSnapshotPath(dir))
			os.Remove(MetaSnapshotPath(dir)) // the count came from it, perhaps
			o.noVecSnap = true
			return Open(ctx, o)
		}
		return nil, err
	}
	if iv := o.Config.Index.SnapshotInterval.D(); iv > 0 {
		s.vecSnaps.Start(iv)
		if s.metaSnapPath != "" {
			s.bgWG.Add(1)
			go s.metaSnapLoop(iv)
		}
	}
	s.bgWG.Add(1)
	go s.loadKeys()
	if s.bodiesPath != "" {
		s.bgWG.Add(1)
		go s.loadBodies()
	}
	s.warmed = make(chan struct{})
	if o.Prewarm {
		s.bgWG.Add(1)
		go s.prewarm()
	} else {
		close(s.warmed)
	}
	return s, nil
}

// LastActivity is when a memory was last appended by anything but the
// heartbeat (or when the self was opened, if later): what dream mode's
// idle time counts from.
func (s *Self) LastActivity() time.Time { return time.Unix(s.lastActivity.Load(), 0) }

// Close closes the indexes and the store, after every submitted write,
// and writes the vector index's snapshot when it changed and the
// metadata snapshot when it is far behind.
func (s *Self) Close() error { return s.close(true) }

func (s *Self) close(snapshot bool) error {
	s.vecSnaps.Stop()
	select {
	case <-s.stopping:
	default:
		close(s.stopping)
	}
	s.bgWG.Wait()
	s.Recaller.Close()
	s.Text.Stop()
	s.index.Close()
	// What was submitted before Close commits, and the full-text index
	// takes it, before the store closes; then the co-access learning that
	// waits in memory.
	s.store.Barrier(context.Background())
	if err := s.Assoc.Close(context.Background()); err != nil {
		s.log.Warn("links: the links back held or the co-access strengthening buffered were not written at close", "err", err)
	}
	if err := s.Memories.CloseTouches(context.Background()); err != nil {
		s.log.Warn("touches: the buffered touches were not written at close", "err", err)
	}
	if snapshot {
		// A metadata snapshot far behind is written now, beside the
		// vector snapshot: else the next open reads every record written
		// since it, each at two to three times a full scan's cost a record
		// (350,000 of 1.65M in 2.4–3.1 s on a settled tree), and more
		// where the tree has not settled (a server that grew a store by
		// 300,000 memories in under an interval: 16.5 s at 1.3M).
		var metaSnap sync.WaitGroup
		if s.metaSnapBehind(s.memories.Load()) {
			metaSnap.Go(func() { s.writeMetaSnapNow(nil) })
		}
		if s.bodiesPath != "" && s.Recaller.BodiesChanged(false) {
			metaSnap.Go(s.writeBodies)
		}
		if err := s.SnapshotVectors(); err != nil {
			s.log.Warn("vector index: snapshot at close failed", "err", err)
		}
		metaSnap.Wait()
	}
	terr := s.Text.Close()
	err := s.store.Close()
	if err == nil {
		err = terr
	}
	if uerr := s.index.Unmap(); err == nil {
		err = uerr // the snapshot's file is free from here
	}
	return err
}

// errVecSnapMismatch makes Open start again without the vector snapshot:
// the index it gave does not agree with the store.
var errVecSnapMismatch = errors.New("memory: the vector snapshot does not agree with the store")

// SnapshotVectors writes the vector index's snapshot when the index
// changed since the last one (index.VectorSnapshots). It is safe to call
// at any time the self is open; Close calls it last.
func (s *Self) SnapshotVectors() error { return s.vecSnaps.Write() }

// Store returns the underlying store.
func (s *Self) Store() *store.Store { return s.store }

// Index returns the vector index.
func (s *Self) Index() *vector.Index { return s.index }

// Config returns the configuration the self was opened with.
func (s *Self) Config() config.Config { return s.cfg }

// Embedder returns the embedder of the store's embedding space.
func (s *Self) Embedder() llm.Embedder { return s.emb }

// Clock returns the self's clock.
func (s *Self) Clock() clock.Clock { return s.clock }

// Counts returns the number of sonas and memories.
func (s *Self) Counts() (sonas, memories int64) {
	return s.Sonas.Count(), s.memories.Load()
}

// load checks the store's version and embedder, then loads the sona
// records and the vector index: from its snapshot and what the store
// added since (when snap and the snapshot is usable), else rebuilt from
// the stored embeddings.
func (s *Self) load(ctx context.Context, snap bool) error {
	if err := migrate.Check(ctx, s.store, s.emb.ID(), s.Embed, s.log); err != nil {
		return err
	}
	start := s.clock.Now()
	var vectors int
	var restored bool
	err := s.store.View(func(txn store.Reader) error {
		if err := s.Sonas.Load(txn); err != nil {
			return err
		}
		if err := s.Backbone.Load(txn); err != nil {
			return err
		}
		// The full-text index loads meanwhile (its searches wait for it).
		s.Text.Open()
		if err := s.loadVectors(txn, snap, &restored); err != nil {
			return err
		}
		// Then every memory's metadata, once: counted (the index is
		// checked against the count below), and what recall keeps of it
		// and its metric profile taken (both need the vector ids).
		n, err := s.scanMeta(txn)
		if err != nil {
			return err
		}
		s.memories.Store(n)
		if restored && int64(s.index.Len()) != n {
			return fmt.Errorf("%w: it gives %d vectors, the store has %d memories", errVecSnapMismatch, s.index.Len(), n)
		}
		vectors = s.index.Len()
		return nil
	})
	if err != nil {
		return err
	}
	// The links back a crash may have lost (held in memory: assoc's
	// backlinks.go) are read again from their memories' own lists.
	again, err := s.Assoc.Recover(ctx, s.store)
	if err != nil {
		return fmt.Errorf("links: reading again the links back not written: %w", err)
	}
	if again > 0 {
		s.log.Info("links: the links back of memories after the last written read again", "memories", again)
	}
	s.log.Info("self loaded", "sonas", s.Sonas.Count(), "memories", s.memories.Load(),
		"vectors", vectors, "vector_snapshot", restored, "took", s.clock.Now().Sub(start))
	// The HNSW graph is built in the background (dense searches are exact
	// meanwhile): its end is the last readiness signal (memoria bench's
	// restart reads it). WaitBuilt returns at Close too. A lazy graph no
	// search has needed yet is not waited for (index.graph).
	if !s.index.GraphWanted() {
		s.log.Info("vector graph deferred until a search needs it", "vectors", vectors, "pending", s.index.Pending())
		return nil
	}
	go func() {
		s.index.WaitBuilt()
		if s.index.Pending() == 0 {
			s.log.Info("vector graph built", "vectors", vectors, "took", s.clock.Now().Sub(start))
		}
	}()
	return nil
}

// loadVectors loads the vector index — from its snapshot and what the
// store added since (when snap and the snapshot is usable, which it
// reports in restored), else from the stored embeddings — and then the
// sonas' members and centroids.
func (s *Self) loadVectors(txn store.Reader, snap bool, restored *bool) error {
	end, err := chain.LogEnd(txn)
	if err != nil {
		return err
	}
	s.covered.Store(end)
	if snap {
		if *restored, err = s.vecSnaps.Restore(txn, end); err != nil {
			return err
		}
	}
	if !*restored {
		if _, err = index.RebuildVectors(txn, s.index); err != nil {
			return err
		}
	}
	if err := s.checkEnds(txn); err != nil {
		return err
	}
	if !*restored {
		return s.Sonas.LoadMembers(txn, s.index)
	}
	start := s.clock.Now()
	_, why, err := s.Sonas.LoadMembersFrom(txn, s.index, s.vecSnaps.Members())
	if why != nil {
		s.log.Info("sonas: the snapshot's state not used; read every chain", "why", why)
		s.vecSnaps.Outdated() // the next snapshot holds it
	} else if err == nil {
		s.log.Info("sonas: members from the snapshot, the chains read after it", "took", s.clock.Now().Sub(start))
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errVecSnapMismatch, err)
	}
	return nil
}

// scanMeta takes every memory's metadata, once, and returns their count.
// From each it keeps what recall's context evidence needs
// (Recaller.KnowPlain: a restarted server then reads no neighbour's
// metadata) and the EUMAS metric profile of its evaluation. It takes them
// from the metadata snapshot and the records written after it when the
// snapshot fits the store (see metasnap.go), else from every record — the
// two halves of the key space (memory CIDs are hashes) read side by side —
// and then writes the snapshot in the background. (These were three
// passes: a count of the keys in the open, and a scan of the values after
// it, in the background, which recall's metric path waited for; at 1M
// memories each pass was seconds of Badger's iteration.) A record whose
// evaluation does not decode turns the metric path off until the next
// start (eumas.Store.BeginLoad), as the log says; the count and the rest
// go on.
func (s *Self) scanMeta(txn store.Reader) (int64, error) {
	start := s.clock.Now()
	t := &metaTaker{s: s, gen: s.Recaller.PlainGeneration()}
	s.Recaller.ReserveKnown(s.index.IDs())
	if s.Evals.Loads() {
		t.done = s.Evals.BeginLoad()
	}
	now, versioned, err := s.metaSnapHeadOf(txn)
	if err != nil {
		return 0, t.end(err, start)
	}
	snap := versioned && s.metaSnapPath != ""
	if snap {
		head, entries, why := readMetaSnap(s.metaSnapPath)
		if why == nil {
			var n int64
			var changed int
			n, changed, why, err = s.loadMetaSnap(txn, t, head, entries, now)
			if err != nil {
				return 0, t.end(err, start)
			}
			if why == nil {
				s.log.Info("metadata: from its snapshot and the records written after it", "memories", n, "changed", changed, "took", s.clock.Now().Sub(start))
				s.metaChanged.Add(int64(changed))
				s.maybeRewriteMetaSnap(n)
				return n, t.end(nil, start)
			}
		}
		if errors.Is(why, os.ErrNotExist) {
			s.log.Info("metadata: no snapshot; every record read")
		} else {
			s.log.Info("metadata: the snapshot not used; every record read", "why", why)
		}
	}
	n, parts, err := s.scanAllMeta(txn, t, snap, nil)
	if err != nil {
		return 0, t.end(err, start)
	}
	if snap {
		s.writeMetaSnapLater(now, parts)
	}
	return n, t.end(nil, start)
}

// metaTaker takes what the open keeps of each memory's metadata.
type metaTaker struct {
	s       *Self
	gen     uint64      // the plain memories' generation before the view
	done    func(error) // the profiles' load's end; nil: none kept
	profErr atomic.Pointer[error]
}

// take takes what is kept of memory c from its encoded metadata raw, and
// returns its vector id (ok false: the vector index does not hold it).
func (t *metaTaker) take(c cid.Cid, raw []byte) (uint64, bool) {
	id, ok := t.s.Recaller.KnowPlainKey(c.KeyString(), raw, t.gen)
	t.profile(c, raw)
	return id, ok
}

// profile takes memory c's metric profile from raw (a record or a
// snapshot's trimmed one); the first failure is kept.
func (t *metaTaker) profile(c cid.Cid, raw []byte) {
	if t.done != nil && t.profErr.Load() == nil {
		if err := t.s.Evals.LoadProfile(c, raw); err != nil {
			t.profErr.CompareAndSwap(nil, &err)
		}
	}
}

// end ends the profiles' load with err, or with the first profile that
// failed; it returns err.
func (t *metaTaker) end(err error, start time.Time) error {
	if t.done == nil {
		return err
	}
	s := t.s
	if err != nil {
		t.done(err)
		return err
	}
	if perr := t.profErr.Load(); perr != nil {
		err := s.store.Explain(*perr)
		s.log.Error("metric profiles: load failed; recall goes on without the metric path until a restart", "err", err)
		t.done(err)
	} else {
		t.done(nil)
		s.log.Info("metric profiles loaded", "profiles", s.Evals.Profiles(), "took", s.clock.Now().Sub(start))
	}
	return nil
}

// scanAllMeta reads every memory's metadata record in txn, in two halves
// side by side, has t take each (unless t is nil) and returns their
// count — and, with entries, the snapshot's entries of them (two parts,
// in key order). It stops with errStop when stop is closed.
func (s *Self) scanAllMeta(txn store.Reader, t *metaTaker, entries bool, stop <-chan struct{}) (int64, [2][]byte, error) {
	// Keys below mid and from mid on: CIDv1 dag-cbor sha2-256 keys split
	// at the digest's first bit (any other key falls in one or the other).
	mid := base.Join(meta.Prefix, []byte{0x01, 0x71, 0x12, 0x20, 0x80})
	var (
		n     atomic.Int64
		parts [2][]byte
	)
	scan := func(from, to []byte, part *[]byte) error {
		var count int64
		err := store.ScanFrom(txn, meta.Prefix, from, func(k, v []byte) error {
			if to != nil && bytes.Compare(k, to) >= 0 {
				return errStop
			}
			if count%4096 == 0 && stop != nil {
				select {
				case <-stop:
					return errClosing
				default:
				}
			}
			count++
			key := k[len(meta.Prefix):]
			var (
				id   uint64
				isID bool
			)
			if t != nil {
				c, err := cid.Cast(key)
				if err != nil {
					return fmt.Errorf("%w: metadata key: %v", base.ErrCorrupt, err)
				}
				id, isID = t.take(c, v)
			} else if entries {
				id, isID = s.index.ID(unsafe.String(unsafe.SliceData(key), len(key)))
			}
			if entries {
				var err error
				if *part, err = s.metaSnapEntry(*part, key, v, id, isID); err != nil {
					return fmt.Errorf("%w: metadata of %x: %v", base.ErrCorrupt, key, err)
				}
			}
			return nil
		})
		n.Add(count)
		if errors.Is(err, errStop) {
			err = nil
		}
		return err
	}
	lower := make(chan error, 1)
	go func() { lower <- scan(meta.Prefix, mid, &parts[0]) }()
	err := scan(mid, nil, &parts[1])
	if lerr := <-lower; err == nil {
		err = lerr
	}
	return n.Load(), parts, err
}

// errClosing stops a background scan at Close.
var errClosing = errors.New("memory: closing")

// writeMetaSnapLater writes the metadata snapshot of head and parts in
// the background (Close waits for it).
func (s *Self) writeMetaSnapLater(head metaSnapHead, parts [2][]byte) {
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		s.writeMetaSnap(head, parts)
	}()
}

// writeMetaSnap writes the metadata snapshot of head and parts, and logs
// how it went.
func (s *Self) writeMetaSnap(head metaSnapHead, parts [2][]byte) error {
	start := s.clock.Now()
	if err := writeMetaSnap(s.metaSnapPath, head, parts[0], parts[1]); err != nil {
		s.log.Warn("metadata: snapshot not written", "err", err)
		return err
	}
	s.log.Info("metadata: snapshot written", "version", head.version, "log_seq", head.logEnd, "took", s.clock.Now().Sub(start))
	return nil
}

// countMetaWrites counts a commit's metadata records (store events).
func (s *Self) countMetaWrites(e store.Event) {
	var n int64
	for _, k := range e.Keys {
		if strings.HasPrefix(k, string(meta.Prefix)) {
			n++
		}
	}
	if n > 0 {
		s.metaChanged.Add(n)
	}
}

// metaSnapLoop writes the metadata snapshot again every interval when
// it is far behind the store (maybeRewriteMetaSnap), until Close.
func (s *Self) metaSnapLoop(interval time.Duration) {
	defer s.bgWG.Done()
	for {
		t := s.clock.NewTimer(interval)
		select {
		case <-s.stopping:
			t.Stop()
			return
		case <-t.C():
		}
		s.maybeRewriteMetaSnap(s.memories.Load())
		if s.Recaller.BodiesChanged(true) {
			s.writeBodies()
		}
	}
}

// maybeRewriteMetaSnap writes the metadata snapshot again, after a scan
// of every record in the background, when more records were written
// since its version than metaSnapRewrite or a tenth of the n memories:
// the next open would read them all, and Badger every table newer than
// the snapshot.
func (s *Self) maybeRewriteMetaSnap(n int64) {
	if !s.metaSnapBehind(n) {
		return
	}
	if !s.metaSnapBusy.CompareAndSwap(false, true) {
		return
	}
	s.rewriteMetaSnap()
}

// metaSnapBehind reports whether the metadata snapshot is far enough
// behind a store of n memories to be written again: more records written
// since its version than metaSnapRewrite or a tenth of them.
func (s *Self) metaSnapBehind(n int64) bool {
	return s.metaSnapPath != "" && s.metaChanged.Load() > min(metaSnapRewrite, n/10)
}

// rewriteMetaSnap scans every metadata record again, in the background,
// and writes the snapshot of them (metaSnapBusy set: it clears it).
func (s *Self) rewriteMetaSnap() {
	s.bgWG.Add(1)
	go func() {
		defer s.bgWG.Done()
		defer s.metaSnapBusy.Store(false)
		s.writeMetaSnapNow(s.stopping)
	}()
}

// writeMetaSnapNow scans every metadata record and writes the snapshot of
// them, unless stop closes first.
func (s *Self) writeMetaSnapNow(stop <-chan struct{}) {
	// The writes counted so far are in the scan's view, or after it.
	before := s.metaChanged.Load()
	var (
		head  metaSnapHead
		parts [2][]byte
	)
	err := s.store.View(func(txn store.Reader) error {
		var err error
		if head, _, err = s.metaSnapHeadOf(txn); err != nil {
			return err
		}
		_, parts, err = s.scanAllMeta(txn, nil, true, stop)
		return err
	})
	if errors.Is(err, errClosing) {
		return
	}
	if err != nil {
		s.log.Warn("metadata: snapshot not written", "err", err)
		return
	}
	if s.writeMetaSnap(head, parts) == nil {
		s.metaChanged.Add(-before)
	}
}

// errStop ends a scan early.
var errStop = errors.New("memory: stop")

// checkEnds checks that what the store wrote last is readable: every
// sona's head ACT block and the memory at the end of the insertion log.
// (A store that lost its last writes whole is caught by the acknowledged
// mark; this catches damage to the tables that hold them.)
func (s *Self) checkEnds(txn store.Reader) error {
	if err := s.Sonas.CheckHeads(txn); err != nil {
		return err
	}
	end, err := chain.LogEnd(txn)
	if err != nil || end == 0 {
		return err
	}
	item, err := txn.Item(chain.LogKey(end))
	if err != nil {
		return s.store.Explain(fmt.Errorf("%w: the insertion log's last entry (%d) is unreadable: %v", base.ErrCorrupt, end, err))
	}
	_, c, err := chain.LogEntry(item)
	if err == nil {
		_, err = store.ReadBlock(txn, c)
	}
	if errors.Is(err, base.ErrForgotten) {
		return nil // its tombstone is what the last write left
	}
	if err != nil {
		return s.store.Explain(fmt.Errorf("%w: the memory at the end of the insertion log (%d) is unreadable: %v", base.ErrCorrupt, end, err))
	}
	return nil
}

// Embed returns unit-length embeddings of texts in the store's space.
func (s *Self) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	ctx, span := trace.Start(ctx, "embed", attribute.Int("memoria.embed.texts", len(texts)))
	defer span.End()
	vecs, err := s.emb.Embed(ctx, texts)
	if err != nil {
		trace.Fail(span, err)
		return nil, fmt.Errorf("memory: embed: %w", err)
	}
	if len(vecs) != len(texts) {
		return nil, fmt.Errorf("memory: embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	for i, v := range vecs {
		if len(v) != s.index.Dims() {
			return nil, fmt.Errorf("memory: embedder returned %d dims, the store uses %d", len(v), s.index.Dims())
		}
		if !llm.Normalize(v) {
			return nil, fmt.Errorf("memory: embedder returned a zero or non-finite vector for text %d", i)
		}
	}
	return vecs, nil
}

// Block returns a verified block.
func (s *Self) Block(c cid.Cid) ([]byte, error) { return s.store.Block(c) }

// IndexSizes reports the derived indexes' sizes: the vectors in the HNSW
// index and the documents in the full-text index.
func (s *Self) IndexSizes() map[string]int64 {
	out := map[string]int64{"vector": int64(s.index.Len())}
	if n, err := s.Text.Len(); err == nil {
		out["text"] = int64(n)
	}
	return out
}

// CacheStats are the reads of the caches a recall and an advance read
// through, by name: decoded memories, metadata records, link lists
// (store.memory_cache), Badger's blocks (store.cache_mb), the tiers'
// records (states, pages of the STM, personas, counters) and their
// document frequencies, and the sonas' records.
func (s *Self) CacheStats() map[string]store.CacheStats {
	mems, metas, hot := s.Memories.CacheStats()
	return map[string]store.CacheStats{"memories": mems, "metadata": metas, "hot": hot, "links": s.Assoc.CacheStats(), "blocks": s.store.BlockCacheStats(),
		"tiers": s.Tiers.CacheStats(), "terms": s.Tiers.TermCacheStats(), "sonas": s.Chains.CacheStats()}
}

// Reembed opens the store under cfg.DataDir, which nothing else may hold,
// and moves it into emb's embedding space (transfer.Reembed).
func Reembed(ctx context.Context, cfg config.Config, emb llm.Embedder, progress func(done, total int)) (transfer.ReembedReport, error) {
	// The vector snapshot holds the old vectors (its tag names the old
	// embedder too; this also covers going back to it).
	if err := os.Remove(index.VectorSnapshotPath(cfg.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return transfer.ReembedReport{}, err
	}
	st, err := store.Open(filepath.Join(cfg.DataDir, "store"), store.OptionsOf(cfg.Store))
	if err != nil {
		return transfer.ReembedReport{}, err
	}
	defer st.Close()
	return transfer.Reembed(ctx, st, records{}, emb, progress)
}

// packBytes is the vector index's budget of packs for index.pack_mb (0:
// none, which the index spells -1).
func packBytes(mb int) int64 {
	if mb == 0 {
		return -1
	}
	return int64(mb) << 20
}

// spillRoom lets the vector index write n bytes of the vectors it moves
// out of the heap beside the store while twice the store's free-space
// reserve stays free: they give way long before the store refuses writes.
func spillRoom(st *store.Store) func(n int64) bool {
	return func(n int64) bool {
		free, reserve, ok := st.FreeSpace()
		return ok && free >= 2*reserve+uint64(n)
	}
}
