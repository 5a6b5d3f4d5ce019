package recall

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/text"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// Sonas is what recall reads of the sona registry (chain.Sonas).
type Sonas interface {
	// Snapshot is a sona's centroid and committed chain length.
	Snapshot(id string) (centroid []float32, length int64, ok bool)
	// Activity is a sona's committed chain length.
	Activity(id string) (int64, bool)
	// Members are the vector ids of a sona's memories (and the
	// backbone's, withBackbone).
	Members(sona, backbone string, withBackbone bool) []uint64
	// Runs are Members as the vector index searches them, by sona.
	Runs(sona, backbone string, withBackbone bool) []vector.Run
	// Chain is a page of a sona's chain from seq from.
	Chain(id string, from int64, limit int) (base.Page[chain.Entry], error)
}

// Memories reads memories and their metadata through their caches
// (meta.Store). Results are shared: do not modify them.
type Memories interface {
	MetaIn(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error)
	MemoryIn(r store.Reader, c cid.Cid) (*model.Memory, error)
	// TouchedTick is the latest activity tick of c's touches not yet
	// written (0: none), which MetaIn in a view adds.
	TouchedTick(c cid.Cid) int64
	// HotAbsent reports whether view r certainly holds no record of c's
	// hot state: its record's importance and access tick are its own.
	HotAbsent(r store.Reader, c cid.Cid) bool
	// Touch is the op that records that memories were recalled (meta.Touch).
	Touch(cids []cid.Cid, sonas []string, activity func(sona string) (int64, bool)) store.Op
}

// Text is the full-text index (index.Text): index.ErrUnavailable while it
// is being rebuilt.
type Text interface {
	Search(ctx context.Context, sona string, q string, opts text.SearchOptions) ([]text.Hit, error)
}

// Profiles are the EUMAS metric profiles (eumas.Store), kept under their
// memories' vector ids.
type Profiles interface {
	QueryProfile(ctx context.Context, q string) ([]float32, error)
	Nearest(prof []float32, ids []uint64, k int) []eumas.ProfileHit
	ProfileOf(id uint64) []float32
}

// Vectors is the vector index (vector.Index).
type Vectors interface {
	Dims() int
	Len() int
	IDs() int // ids given out: a vector added later has an id of at least this
	ID(key string) (uint64, bool)
	Key(id uint64) (string, bool)
	RecordInto(id uint64, buf []int8) (vector.Quantized, bool)
	Dot(key string, q []float32) (float32, bool)
	Quantize(q []float32) vector.Quantized
	ApproxDotID(id uint64, q vector.Quantized) (float32, bool)
	Search(q []float32, k int) []vector.Hit
	SearchAmong(q []float32, in []vector.Run, k int) []vector.Hit
	SearchIn(q []float32, in []vector.Run, k, exactMax int) []vector.Hit
}

// Env is what recall reads besides the store, by role; the self wires
// its subsystems in (memory/env.go).
type Env struct {
	Sonas    Sonas
	Memories Memories
	Text     Text
	Profiles Profiles
	Vectors  Vectors
	// BackboneSona is the backbone's sona uuid ("" when there is none).
	BackboneSona func() string
	// Embed embeds texts in the store's embedding space (unit length).
	Embed func(ctx context.Context, texts ...string) ([][]float32, error)
	// Count is the number of memories stored (the emergent threshold's
	// node count).
	Count func() int64
	// Reranker, when set, reorders the best fused candidates
	// (recall.rerank; nil: off).
	Reranker llm.Reranker
	// Links reads link lists in a view (assoc.Graph, cached); nil:
	// assoc.Read.
	Links Links
}

// Links reads the link list under key in r (assoc.Graph.In; the result
// is shared: do not modify it), or walks it without decoding it
// (assoc.Graph.Walk), and makes the op of a trace that strengthens
// co-access (assoc.Graph.Strengthen).
type Links interface {
	In(r store.Reader, key []byte) ([]assoc.Link, error)
	Walk(r store.Reader, key []byte, fn func(assoc.Entry) bool) error
	Strengthen(agent string, together []cid.Cid, rate float64, now int64) store.Op
}

// uncachedLinks reads every list from the store and writes every
// strengthening with its trace.
type uncachedLinks struct{}

func (uncachedLinks) In(r store.Reader, key []byte) ([]assoc.Link, error) { return assoc.Read(r, key) }

func (uncachedLinks) Walk(r store.Reader, key []byte, fn func(assoc.Entry) bool) error {
	return assoc.Walk(r, key, fn)
}

func (uncachedLinks) Strengthen(agent string, together []cid.Cid, rate float64, now int64) store.Op {
	return assoc.Strengthen(agent, together, rate, now)
}

// Options configure recall.
type Options struct {
	// Config: recall.*, thresholds.*, heartbeat.insight_confidence, kinds.
	Config config.Config
	Clock  clock.Clock
	Logger *slog.Logger // nil: discard
}

// Recaller answers recalls (Recall) over the self kept in a store.
type Recaller struct {
	store    store.Viewer
	sonas    Sonas
	memories Memories
	text     Text
	profiles Profiles
	index    Vectors
	backbone func() string
	embed    func(ctx context.Context, texts ...string) ([][]float32, error)
	count    func() int64
	cfg      config.Config
	clock    clock.Clock
	chains   *chainPositions // where memories sit in their sonas' chains (the context evidence)
	bodies   *bodyFacts      // what the evidence reads of memories' bodies
	words    *wordSets       // the word sets of the memories folded lately (collapser)
	plain    *plainMemories  // memories known visible without a read (the context evidence); nil: not kept
	log      *slog.Logger
	// reranker (nil: off); rerankFallbacks counts its failures,
	// rerankWarned is when one was last logged at warn level (unix ns).
	reranker        llm.Reranker
	links           Links
	rerankFallbacks atomic.Int64
	rerankWarned    atomic.Int64
	queries         *queryLogKeeper // nil: the query log is not bounded
	workers         *workers        // the recalls computing at once (recall.workers)
}

// New is recall over the self kept in st. When st reports its commits
// (store.Store), New subscribes to them — call it before st's first
// write — and recall keeps which memories are plain (plainMemories).
func New(st store.Viewer, env Env, o Options) *Recaller {
	r := &Recaller{
		store: st, sonas: env.Sonas, memories: env.Memories, text: env.Text, profiles: env.Profiles, index: env.Vectors,
		backbone: env.BackboneSona, embed: env.Embed, count: env.Count, cfg: o.Config, clock: clock.Or(o.Clock),
		chains: newChainPositions(), bodies: newBodyFacts(), words: newWordSets(wordSetSlots), log: o.Logger, reranker: env.Reranker, links: env.Links,
	}
	r.workers = newWorkers(o.Config.Recall.Workers, r.clock)
	if r.links == nil {
		r.links = uncachedLinks{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if sub, ok := st.(interface{ Subscribe(func(store.Event)) }); ok {
		r.plain = newPlainMemories()
		sub.Subscribe(r.Committed)
	}
	r.queries = newQueryLogKeeper(st, o.Config.Recall.QueryLogKeep, r.log)
	return r
}

// Close stops what the recaller runs in the background (the query log's
// count at the start); call it before the store closes.
func (s *Recaller) Close() {
	if s.queries != nil {
		s.queries.Close()
	}
}

// PruneQueryLog deletes the oldest logged recalls until
// recall.query_log_keep are left (what a committed recall starts in the
// background once they are a hundredth over).
func (s *Recaller) PruneQueryLog(ctx context.Context) error {
	if s.queries == nil {
		return nil
	}
	return s.queries.Prune(ctx)
}

// Trace is what a recall leaves behind unless it peeks (Query.Peek): the
// writes that record the access of the memories it returned (meta.Touch),
// strengthen the co-access of its hits (assoc.Strengthen) and log the
// query (recall.query_log). Recall only plans them; the caller submits
// them (Submit), and a caller that drops them leaves no trace.
type Trace []store.Op

// Submit queues the trace's writes, deferred (store.Committer.Defer: they
// share a group commit with those of the recalls around it); it does not
// wait for them.
func (t Trace) Submit(c store.Committer) {
	for _, op := range t {
		c.Defer(op)
	}
}

// touchOp is the record that memories were recalled (meta.Touch): the
// activity tick is their first sona's length.
func (s *Recaller) touchOp(rs []*Recalled) store.Op {
	cids := make([]cid.Cid, len(rs))
	sonas := make([]string, len(rs))
	for i, r := range rs {
		cids[i] = r.CID
		if r.Meta != nil && len(r.Meta.Sonas) > 0 {
			sonas[i] = r.Meta.Sonas[0]
		}
	}
	return s.memories.Touch(cids, sonas, s.sonas.Activity)
}
