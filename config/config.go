// Package config is Memoria's one typed configuration. Every default of the
// design (DESIGN.md §8) lives here with the seed it comes from. A Config is
// built by Default, overlaid by a YAML file (unknown keys rejected), then by
// MEMORIA_* environment variables, then by command-line flags, and checked by
// Validate before anything starts.
//
// Environment variables name a leaf by its YAML path joined with "_" and
// upper-cased: recall.top_k is MEMORIA_RECALL_TOP_K, server.listen is
// MEMORIA_SERVER_LISTEN. Lists and maps (kinds, tiers.traits,
// tiers.agent_profile) are set in the file only.
package config

import (
	_ "embed"

	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole configuration of a Memoria process.
type Config struct {
	// DataDir holds the Badger store and derived indexes.
	DataDir string `yaml:"data_dir"`

	Server    Server          `yaml:"server"`
	Store     Store           `yaml:"store"`
	Index     Index           `yaml:"index"`
	Recall    Recall          `yaml:"recall"`
	Threshold Thresholds      `yaml:"thresholds"`
	Kinds     map[string]Kind `yaml:"kinds"`
	// DefaultKind is the XmetaV kind given to memories stored without one.
	DefaultKind string     `yaml:"default_kind"`
	Tiers       Tiers      `yaml:"tiers"`
	Living      Living     `yaml:"living"`
	Heartbeat   Heartbeat  `yaml:"heartbeat"`
	Evaluation  Evaluation `yaml:"evaluation"`
	Anchoring   Anchoring  `yaml:"anchoring"`
	LLM         LLM        `yaml:"llm"`
	Embedder    Embedder   `yaml:"embedder"`
	Actors      Actors     `yaml:"actors"`
	Log         Log        `yaml:"log"`
	Cluster     Cluster    `yaml:"cluster"`
}

// Server configures the HTTP listener (REST, later MCP and the gateway).
type Server struct {
	Listen string `yaml:"listen"`
	// MaxBodyBytes caps request bodies; larger ones get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// RequestTimeout bounds one request, LLM call included.
	RequestTimeout Duration `yaml:"request_timeout"`
	// MaxK caps the k of a recall request.
	MaxK int `yaml:"max_k"`
	// MaxBudgetChars caps the character budget of a recall request.
	MaxBudgetChars int `yaml:"max_budget_chars"`
	// MaxListLimit caps the page size of list routes.
	MaxListLimit int `yaml:"max_list_limit"`
	// GCPercent is the Go garbage collector's target (GOGC), unless the
	// GOGC environment variable sets it. 100, Go's own default: a higher
	// target collects less often, but lets the heap grow to (1 + target/100)
	// times the live heap — Badger's memtables (store.memtable_mb each)
	// count in it — and every page the heap grows into is a page fault
	// and a zeroing by the kernel. Measured over HTTP (README, issue 15),
	// 400 cost a durable insert 15–35% more server CPU than 100.
	GCPercent int `yaml:"gc_percent"`
	// MaxImportBytes caps the body of POST /import (the export is read
	// whole and validated before anything is written).
	MaxImportBytes int64 `yaml:"max_import_bytes"`
	// TransferTimeout bounds GET /export and POST /import, instead of
	// request_timeout.
	TransferTimeout Duration `yaml:"transfer_timeout"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds reading a request, headers and body, from its
	// first byte: a client that sends slower is cut (408). The transfer
	// routes (export, import, the gateway) get transfer_timeout instead
	// once their handler starts reading the body (after authentication).
	ReadTimeout Duration `yaml:"read_timeout"`
	// IdleTimeout closes a kept-alive connection that has waited this long
	// for its next request.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes caps a request's headers (431 beyond).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections bounds the open connections: more wait in the listen
	// queue until one closes. 0: no limit.
	MaxConnections int `yaml:"max_connections"`
	// MemoryLimit is the Go runtime's soft memory limit, unless the
	// GOMEMLIMIT environment variable sets it: "auto" (3/4 of the cgroup's
	// memory limit, or 1/2 of the machine's memory without one), a share
	// such as "40%" of the same, a size such as "2GiB" or "1500MB", or
	// "off". Near the limit the collector runs more often and returns
	// freed memory to the system sooner.
	MemoryLimit MemoryLimit `yaml:"memory_limit"`
	// GCHeadroom bounds how far the heap may grow past its live part
	// between two collections, unless the GOGC environment variable is
	// set: gc_percent% of the live heap, but no more than this — a size
	// such as "512MiB", or "off" for gc_percent alone. A large store's
	// live heap (the vector graph, the full-text index, Badger's caches
	// and memtables: 1.4 GB at a million memories) would otherwise be
	// doubled by the collector's target; with a headroom the target falls
	// as the heap grows (not below 10%), and a small heap's is gc_percent.
	GCHeadroom GCHeadroom `yaml:"gc_headroom"`
	// MaxPathSegments caps the path after the CID of a gateway request
	// (/ipfs/{cid}/prev/prev/…): a longer one is a 400 before any block is
	// read. Walking a path costs a block read a link.
	MaxPathSegments int `yaml:"max_path_segments"`
	// Auth holds the bearer tokens. With none, every request is allowed,
	// and serve refuses to listen on anything but a loopback address.
	Auth Auth `yaml:"auth"`
	// AllowedHosts are host names (or IPs) the server answers to besides
	// loopback ones (localhost, *.localhost, 127.0.0.1, ::1) and the
	// listen address's host: a request whose Host header names another is
	// refused (403), so that a web page cannot reach a tokenless server by
	// DNS rebinding. With tokens and no list, any Host is accepted.
	AllowedHosts []string `yaml:"allowed_hosts,omitempty"`
	// AllowedOrigins are web origins (scheme://host[:port]) whose pages may
	// write to the server; any other page's cross-origin POST is refused
	// (403), whatever the token.
	AllowedOrigins []string `yaml:"allowed_origins,omitempty"`
}

// Auth is the server's bearer-token authentication (REST, /mcp, /ipfs/).
type Auth struct {
	// Tokens that may call the server. Stored hashed: `memoria token new`
	// makes a token and its entry, `memoria token hash` hashes one.
	Tokens []Token `yaml:"tokens,omitempty"`
}

// Token is one bearer token: a name for logs, the SHA-256 of the secret,
// its scopes and optionally the sonas it is limited to.
type Token struct {
	// Name identifies the token in logs and errors (never the secret).
	Name string `yaml:"name"`
	// Hash is "sha256:" and the hex SHA-256 of the token (api.HashToken).
	Hash string `yaml:"hash"`
	// Scopes: read, write, admin; each includes the ones before it.
	Scopes []string `yaml:"scopes"`
	// Sonas, when set, limits the token to these sona uuids: it cannot
	// read, recall from or list any other sona's memories, nor use the
	// routes that are not tied to a sona (see README, Auth).
	Sonas []string `yaml:"sonas,omitempty"`
}

// TokenHashPrefix starts every stored token hash.
const TokenHashPrefix = "sha256:"

// Scopes a token may carry, weakest first.
var Scopes = []string{"read", "write", "admin"}

// IsLoopback reports whether a listen address (host:port) only accepts
// connections from this machine: a loopback IP or "localhost". An empty
// host, 0.0.0.0, :: or any other name listens beyond the machine.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckExposure refuses a listen address beyond this machine unless
// tokens are configured.
func (s Server) CheckExposure(listen string) error {
	if len(s.Auth.Tokens) == 0 && !IsLoopback(listen) {
		return fmt.Errorf("config: server.auth.tokens: refusing to listen on %s (not a loopback address) without tokens: add one with `memoria token new`, or listen on 127.0.0.1", listen)
	}
	return nil
}

// Store configures the Badger store and its group commit.
type Store struct {
	// MaxBatch is the most writes one group commit (one fsync) acknowledges.
	MaxBatch int `yaml:"max_batch"`
	// DeferFor is how long a write no client waits for — what a recall
	// leaves behind (its memories' access counts, its hits' co-access,
	// its query log), a response's reinforcement, the tiers' steps, the
	// evaluator's records — may wait for a group commit: it joins the next
	// one (any write, a barrier), or gets one of its own after this long,
	// with those deferred meanwhile. A crash loses at most this much of
	// the first two; the others are done again from their inboxes and
	// watermarks; never a memory. 0 commits them as they come. Default
	// 50ms; at most 1s.
	DeferFor Duration `yaml:"defer_for"`
	// CommitInterval is the least time from the start of one group commit
	// to the start of the next while several writers keep the committer
	// busy (its last batch held three writes or more): the writes that
	// come meanwhile share the next commit and its fsync, which costs the
	// cores about the same for one write as for a hundred. A lone client's
	// inserts, and a store whose commits take longer than this (one at its
	// busiest), never wait for it. 0, the default, commits as soon as the
	// last commit ended: with 5ms recalls at 100k memories seemed to lose
	// a tenth of their rate (README, stop 60), and since the background's
	// writes wait to share the requests' commits (store.defer_for) it
	// saves advances nothing measurable (stop 61). At most 100ms.
	CommitInterval Duration `yaml:"commit_interval"`
	// MaxBlockBytes caps one block (a memory or a file).
	MaxBlockBytes int `yaml:"max_block_bytes"`
	// CacheMB is Badger's block cache size: the decompressed blocks of
	// compressed tables. With compression none there is none unless the
	// tables an earlier build or setting compressed are still a tenth of
	// the tables' bytes: Badger reads an uncompressed block where it lies
	// in the table file, mapped.
	CacheMB int `yaml:"cache_mb"`
	// Compression is how the tables Badger writes compress their blocks:
	// none (the default), snappy or zstd. A compressed block is copied
	// into the heap and decompressed at each read the block cache
	// misses, which was a quarter of what a recall at 100,000 memories
	// allocated; none costs about half as much disk again for the tables
	// (README, issue 15). Tables already written keep theirs until a
	// compaction rewrites them (a GC pass rewrites most, not all).
	Compression string `yaml:"compression"`
	// MemTableMB is the size of each of Badger's memtables (the write
	// buffer before a flush to disk; a transaction may use 15% of one),
	// and Memtables how many it holds at most: the one written and those
	// waiting to be flushed. Each is allocated whole on the Go heap.
	// 64 by default; 16 holds many sonas' advances in less RSS and a
	// lower tail, but level 0 then holds twenty tables and every read
	// looks into each (README, issue 15, stop 108).
	MemTableMB int `yaml:"memtable_mb"`
	Memtables  int `yaml:"memtables"`
	// MemoryCache is how many decoded memories are kept in RAM, and as
	// many metadata records and link lists (the lists as stored, 768
	// bytes each at most on average): the records a recall scores and
	// enriches. 100,000 (~0.15 GB more RSS than 50,000 once full): a
	// recall over a store of 100,000 memories cost a sixth to a quarter
	// more CPU at 50,000 (README, issue 15).
	MemoryCache int `yaml:"memory_cache"`
	// Prewarm has the server, once the store is open, read the metadata
	// and blocks of the newest memories — as many as memory_cache — into
	// their caches in the background, so that the recalls
	// after a restart do not each read them from the disk. Default true.
	Prewarm bool `yaml:"prewarm"`
	// MinFreeMB is the free space kept on the data directory's file
	// system: a write that would leave less is refused (507
	// insufficient_storage) while reads go on, and writes resume once
	// space is freed. Badger writes through memory-mapped files, where a
	// full disk kills the process, so the reserve must also cover what
	// Badger writes on its own after the last accepted write: a memtable
	// flush and the compactions that follow. Default 256; at least
	// 2 × memtable_mb, and more for large stores (see the README).
	MinFreeMB int `yaml:"min_free_mb"`
	// VerifyTables checks every Badger table against its checksums before
	// the store opens (about 0.3 s per 100,000 memories), so that a
	// damaged table is named at once rather than read past, and the tables
	// written while the server runs in the background (so that a restart
	// need not). Default true.
	VerifyTables bool `yaml:"verify_tables"`
	// ValueLogMB is the size from which Badger starts a new value-log
	// file (the log of values from 64 KiB: the large blocks, files). The
	// garbage collection rewrites whole files and never the one being
	// written, so smaller files free space sooner. Default 256; within
	// 16..2047.
	ValueLogMB int `yaml:"value_log_mb"`
	// GC is the store's garbage collection in the background.
	GC StoreGC `yaml:"gc"`
}

// StoreGC schedules the store's garbage collection (memory/store/gc.go):
// value-log files rewritten without their garbage, and the size of each
// key space measured. It also runs on demand (`memoria gc`, POST
// /admin/gc).
type StoreGC struct {
	// Interval between two passes in the background; 0 runs none (on
	// demand only). Default 10m. A pass compacts the tables when the value
	// log holds new garbage, or when the store has been quiet since the
	// last pass (a commit every 10 s or fewer) and its tables are not in
	// one level.
	Interval Duration `yaml:"interval"`
	// DiscardRatio is the share of a value-log file that must be garbage
	// for the file to be rewritten. Lower frees more space for more
	// rewriting. Default 0.5; within 0.05..0.95.
	DiscardRatio float64 `yaml:"discard_ratio"`
}

// Index configures the HNSW vector index (derived state, rebuilt at start).
type Index struct {
	// M: links per node on the graph's upper layers, twice as many on
	// layer 0 (32). EfSearch: candidates a search keeps (128).
	// EfConstruction: candidates an insertion keeps (64). The defaults
	// give recall@10 0.96 against exact search on `memoria bench ann`'s
	// 100,000 vectors (0.73 with the earlier 16 / 64 / 32).
	M              int `yaml:"m"`
	EfSearch       int `yaml:"ef_search"`
	EfConstruction int `yaml:"ef_construction"`
	// Backlog: while at most this many new vectors wait to join the graph
	// (every search scans them exactly meanwhile), the graph builder runs
	// at a fifth of its pace so bursts of writes keep the CPU; above it,
	// at full pace. Small, so that the exact scan stays cheap (256).
	Backlog int `yaml:"backlog"`
	// TextBacklog: likewise for documents waiting for the full-text index.
	// A recall waiting for its sona's latest documents speeds it up.
	TextBacklog int `yaml:"text_backlog"`
	// HeapVectorsMB: the most MiB of float32 vectors (1.5 KB a memory at
	// 384 dimensions) kept in the heap (64). Beyond it, a restore leaves a
	// snapshot's in its file, and vectors added since go, oldest first once
	// in the graph, to a scratch file beside the snapshot until the next
	// snapshot holds them: each read of one (a search's few exact
	// re-scores, a small sona's exact scan) is then a read of the file,
	// which the page cache serves. 0: the heap keeps every one.
	HeapVectorsMB int `yaml:"heap_vectors_mb"`
	// PackMB: the most MiB of packs (256): copies of large sonas' int8
	// vector records (388 bytes a memory at 384 dimensions) side by side,
	// in chain order. A sona of 512 memories and more, in a store of
	// several such, has its records one or a few to a page; a search
	// among them (a new memory's neighbours, a sona-scoped recall) reads
	// its pack in sequence instead, several times faster. A pack unused
	// for a minute makes room for the pack of a sona searched twice
	// within a minute. 0: none.
	PackMB int `yaml:"pack_mb"`
	// Seed makes HNSW level assignment reproducible.
	Seed int64 `yaml:"seed"`
	// Graph: when the HNSW graph is built. "eager": every vector joins it
	// as it is added. "lazy": only once a search needs it — a recall in
	// self scope, or in a sona of more than recall.exact_scan_max memories
	// and an eighth of the store — until which every search is an exact
	// scan (of a sona's memories, or of all the vectors while the graph
	// catches up at full pace); a store whose recalls are all in sona
	// scope never builds it, and saves its CPU (a seventh of an advance's,
	// a quarter of an insert's) and memory. "auto" (the default): eager
	// when recall.scope is self, else lazy.
	Graph string `yaml:"graph"`
	// SnapshotInterval: how often the vector index (its vectors and HNSW
	// graph) is written to data_dir/vector/index.snap when it changed, so
	// that a restart loads it instead of rebuilding the graph (5m); it is
	// also written at a clean shutdown. 0: only at shutdown.
	SnapshotInterval Duration `yaml:"snapshot_interval"`
}

// The values of index.graph.
const (
	GraphAuto  = "auto"
	GraphEager = "eager"
	GraphLazy  = "lazy"
)

// LazyGraph reports whether the HNSW graph waits for a search that needs
// it (index.graph).
func (c *Config) LazyGraph() bool {
	return c.Index.Graph == GraphLazy || c.Index.Graph == GraphAuto && c.Recall.Scope != "self"
}

// Recall configures scoring and injection (DESIGN.md §5).
type Recall struct {
	// TopK is how many ranked hits a recall returns (Living Memory
	// injection.top_n = 10); what expansion adds is counted apart
	// (ExpandPerHit).
	TopK int `yaml:"top_k"`
	// ExpandPerHit bounds what co-access and edge expansion add to the
	// hits, within the budget: at most this many memories per hit (0:
	// none). A request's expand replaces the bound.
	ExpandPerHit int `yaml:"expand_per_hit"`
	// MMRLambda trades relevance against novelty when the hits are chosen
	// (maximal marginal relevance: λ·score − (1−λ)·the highest cosine to a
	// hit already chosen); 1 ranks by score alone. Not recall.lambda, the
	// decay rate.
	MMRLambda float64 `yaml:"mmr_lambda"`
	// Collapse folds a memory into a better one already injected when
	// both have the same speaker and the Jaccard similarity of their word
	// sets is at least this (near-identical texts), so the budget holds
	// different memories; 0 turns it off.
	Collapse float64 `yaml:"collapse"`
	// BudgetChars is the hard character cap of the injected context (Living Memory injection.budget_chars = 4000).
	BudgetChars int `yaml:"budget_chars"`
	// Candidates is how many dense neighbours are scored per recall (at least TopK).
	Candidates int `yaml:"candidates"`
	// Lambda is the Ebbinghaus decay rate over activity-relative inactivity (Living Memory decay.lambda = 0.5).
	Lambda float64 `yaml:"lambda"`
	// Weights of the additive score components (Memoria: recency, relevance, importance, sona similarity).
	Weights Weights `yaml:"weights"`
	// ExpandDecay multiplies a memory's score along each edge hop during expansion.
	ExpandDecay float64 `yaml:"expand_decay"`
	// ExpandDepth bounds how many hops expansion follows.
	ExpandDepth int `yaml:"expand_depth"`
	// ImportanceAlpha is the EWMA rate of importance updates.
	ImportanceAlpha float64 `yaml:"importance_alpha"`
	// ImportanceHopDecay scales the importance signal per edge hop of back-propagation.
	ImportanceHopDecay float64 `yaml:"importance_hop_decay"`
	// ImportanceDepth bounds back-propagation of importance along edges.
	ImportanceDepth int `yaml:"importance_depth"`
	// ImportanceFloor stops back-propagation where the signal falls below it.
	ImportanceFloor float64 `yaml:"importance_floor"`
	// Fusion of the retrieval paths: "rrf" (reciprocal rank fusion) or
	// "weighted" (calibrated sum: cosine, BM25 over the best BM25, affinity).
	Fusion string `yaml:"fusion"`
	// RRFK is reciprocal rank fusion's k.
	RRFK float64 `yaml:"rrf_k"`
	// Paths weighs the retrieval paths in the fusion; 0 turns a path off.
	Paths PathWeights `yaml:"paths"`
	// Scope: "sona" recalls from the recalling sona and the backbone (seed
	// 000: sonas isolate perspectives), "self" from every sona weighted by
	// sona similarity (inter-sona recall, when asked for).
	Scope string `yaml:"scope"`
	// AffinitySeeds is how many of the best dense/BM25 candidates lend
	// their associations and co-access partners to the affinity path.
	AffinitySeeds int `yaml:"affinity_seeds"`
	// AffinityDepth is how many association hops the affinity path follows.
	AffinityDepth int `yaml:"affinity_depth"`
	// AffinityLinks weigh the association types on the affinity path: a
	// link's strength counts times its type's weight (0: not followed).
	AffinityLinks LinkWeights `yaml:"affinity_links"`
	// BM25K1 and BM25B are BM25's term-saturation and length-normalisation
	// parameters. They apply to the whole process (memory/text keeps them
	// in package variables).
	BM25K1 float64 `yaml:"bm25_k1"`
	BM25B  float64 `yaml:"bm25_b"`
	// CoAccessRate is the Hebbian learning rate: memories returned together
	// move their co-access weight this far toward 1.
	CoAccessRate float64 `yaml:"coaccess_rate"`
	// CoAccessPartners is how many co-access partners of each hit are
	// pulled in after the hits, within the remaining budget (0 = off).
	CoAccessPartners int `yaml:"coaccess_partners"`
	// CoAccessFlush is how often the recalls' co-access strengthening,
	// kept in memory (read back into every recall meanwhile), is written:
	// one write of each of the 2,048 lists that have waited longest, for
	// all the recalls that strengthened it; at once when 262,144 lists
	// wait. A crash loses what waits (learning, never a memory). 0 writes
	// each recall's with its trace.
	CoAccessFlush Duration `yaml:"coaccess_flush"`
	// LinksHold is how long the links back of a new memory — to the
	// sona's previous memory, to what a response drew on, to its similar
	// neighbours — wait in memory (read back into every list given
	// meanwhile) before the list they go to is written, once for all
	// that reached it meanwhile. Nothing is lost to a crash: each is in
	// its new memory's own list too, read again at the next open. 0
	// writes them with their memory.
	LinksHold Duration `yaml:"links_hold"`
	// TouchFlush is how long what recalls change of the memories they
	// return (one more access, the tick their decay counts from) waits in
	// memory (read back into every read meanwhile) before one write of
	// each memory's hot state for all the recalls that returned it; a
	// crash loses at most that much of the memories' use. 0 writes each
	// recall's with its trace.
	TouchFlush Duration `yaml:"touch_flush"`
	// Dedup makes inserts of near-duplicates reinforce the existing memory.
	Dedup bool `yaml:"dedup"`
	// SimilarNeighbors is how many strong neighbours a new memory is
	// associated with as "similar".
	SimilarNeighbors int `yaml:"similar_neighbors"`
	// QueryLog records every recall (XmetaV memory_queries).
	QueryLog bool `yaml:"query_log"`
	// QueryLogKeep is how many of the latest logged recalls the query log
	// keeps (10,000, about 1.6 KB each); older ones are deleted in the
	// background. 0: every one, for ever.
	QueryLogKeep int `yaml:"query_log_keep"`
	// ExactScanMax: in sona scope (and for a new memory's neighbours), a
	// sona of up to this many memories is searched exactly among its own
	// memories instead of through the graph; a larger one through the
	// graph when it is at least an eighth of the store and the graph's
	// nearest hold enough of its own, else exactly too.
	ExactScanMax int `yaml:"exact_scan_max"`
	// Workers bounds the recalls that compute at once — REST, MCP and a
	// chat's own —; more wait their turn, in order (memoria_recall_waiting).
	// The query's embedding and a reranker's call are not counted: they
	// wait on other machines. 0: the cores the Go runtime uses
	// (GOMAXPROCS). More at once than the cores can run left the store's
	// committer, which every write goes through, waiting its turn behind
	// them, and the clients' next requests behind the server's goroutines
	// (README, "Recalls take turns").
	Workers int `yaml:"workers"`
	// ContextWindow is how many memories on each side of a candidate in
	// its sona's chain lend it their evidence (recall.paths.context).
	ContextWindow int `yaml:"context_window"`
	// ContextGap ends a session: a neighbour further in time than this
	// from the memory next to it on the candidate's side is not context.
	ContextGap Duration `yaml:"context_gap"`
	// Rerank is the optional reranker after fusion (config/rerank.go).
	Rerank Rerank `yaml:"rerank"`
}

// LinkWeights weigh the association types (and co-access partnerships).
type LinkWeights struct {
	Causal     float64 `yaml:"causal"`
	Similar    float64 `yaml:"similar"`
	Sequential float64 `yaml:"sequential"`
	Related    float64 `yaml:"related"`
	CoAccess   float64 `yaml:"coaccess"`
}

// PathWeights weigh the retrieval paths.
type PathWeights struct {
	Dense    float64 `yaml:"dense"`
	BM25     float64 `yaml:"bm25"`
	Affinity float64 `yaml:"affinity"`
	// Metric is EUMAS's metric path: memories whose evaluation metrics
	// are near the query's.
	Metric float64 `yaml:"metric"`
	// Context is a memory's neighbours' evidence: the mean dense and
	// full-text relevance of the memories around it in its sona's chain
	// within the same session (recall.context_window, recall.context_gap).
	// (Off by default until issue 17 found the neighbours without reading
	// the store: README, "LoCoMo evaluation".)
	Context float64 `yaml:"context"`
	// Session is a memory's session's evidence: how relevant the other
	// candidates of its sona within recall.context_gap of it in time are,
	// summed, relative to the best session's. Off by default, like
	// Feedback: measured (README, "LoCoMo evaluation"), not affordable yet.
	Session float64 `yaml:"session"`
	// Feedback is pseudo-relevance feedback (RM3): a full-text search with
	// the words most typical of the best candidates so far.
	Feedback float64 `yaml:"feedback"`
	// Time is how near a memory's time is to the times the query speaks
	// of ("in June", "last week"), resolved against the time it is asked.
	Time float64 `yaml:"time"`
	// Speaker is whether the memory's speaker (an `other` memory's name) is
	// named in the query.
	Speaker float64 `yaml:"speaker"`
	// Reply is a memory's question's evidence: when the memory before it
	// in its sona's chain (within recall.context_gap) asks a question —
	// its text holds a question mark — and another speaker said it, the
	// question's own dense and full-text relevance. The replies to the
	// best candidates that ask a question join the candidates (a path).
	Reply float64 `yaml:"reply"`
}

// Weights of the recall score (DESIGN.md §5): the kind weight × (the
// relevance, recency (Living Memory's activity-relative decay), importance
// and sona similarity, each with its weight). The priors' weights are
// fractions of the evidence's resolution for the query: the mean distance
// between neighbouring candidates' relevance, at most a perfect match's
// (1; recall.ScoreHit, recall.PriorUnit).
type Weights struct {
	Relevance  float64 `yaml:"relevance"`
	Recency    float64 `yaml:"recency"`
	Importance float64 `yaml:"importance"`
	Sona       float64 `yaml:"sona"`
}

// Thresholds are Living Memory's SDT parameters: threshold = mean_sim +
// log(β)·std_sim over the live similarity distribution.
type Thresholds struct {
	RetrievalBeta float64 `yaml:"retrieval_beta"` // 0.3: a miss is 3x worse than a false alarm
	DedupBeta     float64 `yaml:"dedup_beta"`     // 3.0: losing distinct info is 3x worse
	ConsensusBeta float64 `yaml:"consensus_beta"` // 5.0: a bad permanent memory is 5x worse
	// Below BootstrapMin nodes the bootstrap distribution is used.
	BootstrapMin  int     `yaml:"bootstrap_min"`  // 10
	BootstrapMean float64 `yaml:"bootstrap_mean"` // 0.60
	BootstrapStd  float64 `yaml:"bootstrap_std"`  // 0.10
}

// Kind is one row of XmetaV's kind table.
type Kind struct {
	Weight float64 `yaml:"weight"`
	// TTL hides the memory from recall after this long; 0 = permanent.
	TTL Duration `yaml:"ttl"`
}

// Tiers are MemoryOS's STM/MTM/LPM parameters (seed 003).
type Tiers struct {
	STMPages    int      `yaml:"stm_pages"`    // 7
	MTMSegments int      `yaml:"mtm_segments"` // 200
	Theta       float64  `yaml:"theta"`        // 0.6 Fscore merge threshold
	Alpha       float64  `yaml:"alpha"`        // 1 heat weight of N_visit
	Beta        float64  `yaml:"beta"`         // 1 heat weight of L_interaction
	Gamma       float64  `yaml:"gamma"`        // 1 heat weight of recency
	Mu          Duration `yaml:"mu"`           // 1e7 s recency time constant
	Tau         float64  `yaml:"tau"`          // 5 promotion heat
	TopM        int      `yaml:"top_m"`        // 5 segments
	TopK        int      `yaml:"top_k"`        // 5 pages (10 in the LoCoMo setting)
	// SegmentPages bounds the pages of a selected segment that a retrieval
	// ranks for top_k: its newest 256. A segment grows without bound (a
	// topic the conversation keeps coming back to), and each retrieval
	// would rank all of its pages.
	SegmentPages int `yaml:"segment_pages"`
	KBSize       int `yaml:"kb_size"`      // 100 user KB entries
	AgentTraits  int `yaml:"agent_traits"` // 100 agent traits
	LPMTopK      int `yaml:"lpm_top_k"`    // 10 KB entries and traits recalled
	// Traits are the user trait dimensions (90 in three groups by
	// default, from traits.yaml).
	Traits []TraitDimension `yaml:"traits"`
	// AgentProfile is the agent persona's fixed settings.
	AgentProfile map[string]string `yaml:"agent_profile"`
}

// TraitDimension is one user trait dimension of the persona.
type TraitDimension struct {
	Name  string `yaml:"name"`
	Group string `yaml:"group"`
	// Cues are words whose presence in a first-person statement shows the
	// trait to the offline extractor.
	Cues []string `yaml:"cues"`
}

// Living holds Living Memory's compression and consensus parameters (seed 001).
type Living struct {
	Phi              float64 `yaml:"phi"`                // 1.618 branch compression trigger
	MinCompressNodes int     `yaml:"min_compress_nodes"` // 3
	ColdBranchRatio  float64 `yaml:"cold_branch_ratio"`  // 0.1
	StakesHigh       float64 `yaml:"stakes_high"`        // 1.25 consensus threshold multiplier
}

// Heartbeat configures XmetaV's heartbeat and dream mode (seed 002).
type Heartbeat struct {
	Interval  Duration `yaml:"interval"`   // 30 s
	DreamIdle Duration `yaml:"dream_idle"` // 6 h
	// SweepBatch bounds a tick's work: the memories whose metadata and
	// associations it examines (a pass over every memory spans ticks).
	SweepBatch int `yaml:"sweep_batch"` // 2000
	// MaxCompressions bounds the branches compressed per tick.
	MaxCompressions int `yaml:"max_compressions"` // 4
	// DreamRecent is how many of a sona's latest memories a dream consolidates.
	DreamRecent int `yaml:"dream_recent"` // 50
	// InsightConfidence is the confidence from which recall brings an
	// insight into context (XmetaV: 0.4).
	InsightConfidence float64 `yaml:"insight_confidence"` // 0.4
}

// Evaluation configures EUMAS's per-memory evaluation (seed 004).
type Evaluation struct {
	// Mode: llm (the configured model with a JSON schema per archetype,
	// the heuristic when it has no structured output), heuristic, or off.
	Mode string `yaml:"mode"`
	// Batch is how many memories the evaluator takes per step (32).
	Batch int `yaml:"batch"`
	// ImportanceSeed: a memory's importance is raised to at least
	// importance_seed × its priority when it is evaluated (0.5).
	ImportanceSeed float64 `yaml:"importance_seed"`
	// Archetypes evaluate every memory (default from archetypes.yaml).
	Archetypes []Archetype `yaml:"archetypes"`
}

// Archetype is an evaluating personality: EUMAS asks each archetype for
// its metrics, annotations and priority.
type Archetype struct {
	Name        string `yaml:"name"`
	Personality string `yaml:"personality"`
	// Focus names the metrics that weigh in the archetype's priority.
	Focus   []string `yaml:"focus"`
	Metrics []Metric `yaml:"metrics"`
}

// Metric is one scalar (0..1) an archetype measures.
type Metric struct {
	Name       string `yaml:"name"`
	Definition string `yaml:"definition"`
	// Cues are the words by which the offline heuristic measures the
	// metric (compared after stemming).
	Cues []string `yaml:"cues"`
}

// Anchoring is XmetaV's significance check (seed 002): a memory that a
// rule matches when it is appended is recorded as an anchor of the rule's
// category, in the same transaction. Rules are tried in order; the first
// that matches gives the category. No rules: nothing is anchored.
type Anchoring struct {
	Rules []AnchorRule `yaml:"rules"`
}

// AnchorRule matches a memory when every condition it sets holds: one of
// Words occurs in the memory's text (case-insensitive, whole words or
// phrases), its XmetaV kind is one of Kinds, it carries every label of
// Labels ("*" matches any value), and its data kind (self, other, text,
// file) is one of Data. A rule sets at least one of Words, Kinds, Labels.
type AnchorRule struct {
	Category string            `yaml:"category"`
	Words    []string          `yaml:"words,omitempty"`
	Kinds    []string          `yaml:"kinds,omitempty"`
	Labels   map[string]string `yaml:"labels,omitempty"`
	Data     []string          `yaml:"data,omitempty"`
}

// LLM selects the language model that advances sonas.
type LLM struct {
	// Provider: offline (built-in, deterministic, no network), openai
	// (any OpenAI-compatible server: OpenAI, Ollama, vLLM, llama.cpp,
	// LM Studio) or anthropic.
	Provider string `yaml:"provider"`
	// BaseURL of the provider's API; empty: the provider's own
	// (https://api.openai.com/v1, https://api.anthropic.com).
	BaseURL string `yaml:"base_url"`
	Model   string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key
	// (default OPENAI_API_KEY or ANTHROPIC_API_KEY); the key itself never
	// sits in the configuration.
	APIKeyEnv string `yaml:"api_key_env"`
	MaxTokens int    `yaml:"max_tokens"`
	// ContextTokens is the model's context window: prompts are cut to fit
	// it with max_tokens left for the reply (0: no limit).
	ContextTokens int `yaml:"context_tokens"`
	// Timeout bounds one model call: its queueing, attempts and the waits
	// between them.
	Timeout Duration `yaml:"timeout"`
	// MaxRetries repeats a call that met a rate limit (429), a server
	// error (5xx) or a network error; other 4xx are not retried.
	MaxRetries int `yaml:"max_retries"`
	// RetryBase is the first backoff, doubled per retry up to RetryMax and
	// jittered to between half and all of it; a longer Retry-After wins.
	RetryBase Duration `yaml:"retry_base"`
	RetryMax  Duration `yaml:"retry_max"`
	// MaxConcurrency bounds the calls in flight to the provider; the rest
	// wait (memoria_llm_queue_wait_seconds). 0: unbounded.
	MaxConcurrency int `yaml:"max_concurrency"`
	// BreakerFailures consecutive failed attempts open the provider's
	// circuit breaker (0: never); chat then answers 503 at once until
	// BreakerCooldown has passed and a probe call succeeds.
	BreakerFailures int      `yaml:"breaker_failures"`
	BreakerCooldown Duration `yaml:"breaker_cooldown"`
}

// Embedder selects the embedding model. Its identity (provider, model,
// dims) is recorded in the store; a store opened with another embedder is
// refused until `memoria reindex` re-embeds it.
type Embedder struct {
	// Provider: hashed (built-in, deterministic, no network), glove (the
	// built-in GloVe word vectors, 100 dims, no network), openai (an
	// OpenAI-compatible embeddings endpoint) or model2vec (a local static
	// model folder).
	Provider string `yaml:"provider"`
	// Dims is the vector length; it must match the model's.
	Dims int `yaml:"dims"`
	// BaseURL, Model and APIKeyEnv as for llm (openai).
	BaseURL   string `yaml:"base_url"`
	Model     string `yaml:"model"`
	APIKeyEnv string `yaml:"api_key_env"`
	// Path is the model2vec folder (tokenizer.json, model.safetensors,
	// config.json).
	Path string `yaml:"path"`
	// Timeout bounds one embedding call (retries and the breaker follow
	// the llm settings).
	Timeout Duration `yaml:"timeout"`
	// MaxConcurrency bounds the embedding calls in flight (0: unbounded).
	MaxConcurrency int `yaml:"max_concurrency"`
	// BatchSize bounds the texts of one embeddings request.
	BatchSize int `yaml:"batch_size"`
}

// Actors configures the actor system.
type Actors struct {
	// SonaIdle passivates a sona actor after this long without a message.
	SonaIdle Duration `yaml:"sona_idle"`
	// MaxRestarts within RestartWindow before a supervisor stops a child.
	MaxRestarts   int      `yaml:"max_restarts"`
	RestartWindow Duration `yaml:"restart_window"`
	// RestartBackoff delays a failed child's restart, doubled for each
	// earlier failure in the window (0: restart at once).
	RestartBackoff Duration `yaml:"restart_backoff"`
	// MaxBackoff caps that delay under the root and a sona (its tiers);
	// ServiceMaxBackoff under the heartbeat, consensus, evaluator and
	// anchors actors' supervisor. (The sonas' supervisor restarts a sona
	// at once: its state is in the store and its callers wait.)
	MaxBackoff        Duration `yaml:"max_backoff"`
	ServiceMaxBackoff Duration `yaml:"service_max_backoff"`
	// AskTimeout bounds a request to an actor that does not call an LLM.
	AskTimeout Duration `yaml:"ask_timeout"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // console | json
}

// Default returns the configuration with every default of the design.
func Default() Config {
	return Config{
		DataDir: "./memoria-data",
		Server: Server{
			Listen:            "127.0.0.1:7777",
			MaxBodyBytes:      8 << 20,
			RequestTimeout:    Duration(2 * time.Minute),
			MaxK:              100,
			MaxBudgetChars:    100_000,
			MaxListLimit:      1000,
			GCPercent:         100,
			MaxImportBytes:    256 << 20,
			TransferTimeout:   Duration(time.Hour),
			ReadHeaderTimeout: Duration(10 * time.Second),
			// A client on a slow link still sends max_body_bytes (8 MiB)
			// in time (140 KB/s); a trickle is cut.
			ReadTimeout:     Duration(time.Minute),
			IdleTimeout:     Duration(30 * time.Second),
			MaxHeaderBytes:  64 << 10,
			MaxConnections:  2048,
			MemoryLimit:     "auto",
			GCHeadroom:      "512MiB",
			MaxPathSegments: 1024,
		},
		Store: Store{
			MaxBatch:      1024,
			DeferFor:      Duration(50 * time.Millisecond),
			MaxBlockBytes: 1 << 20, // the IPFS block size limit
			CacheMB:       256,
			Compression:   "none",
			MemTableMB:    64,
			Memtables:     5,
			MemoryCache:   100_000,
			Prewarm:       true,
			MinFreeMB:     256,
			VerifyTables:  true,
			ValueLogMB:    256,
			GC:            StoreGC{Interval: Duration(10 * time.Minute), DiscardRatio: 0.5},
		},
		Index: Index{M: 32, EfSearch: 128, EfConstruction: 64, Backlog: 256, TextBacklog: 50_000, HeapVectorsMB: 64, PackMB: 256, Seed: 1, Graph: GraphAuto, SnapshotInterval: Duration(5 * time.Minute)},
		Recall: Recall{
			TopK:               10,
			ExpandPerHit:       2,
			MMRLambda:          0.95,
			Collapse:           0.9,
			BudgetChars:        4000,
			Candidates:         32,
			Lambda:             0.5,
			Weights:            Weights{Relevance: 1.0, Recency: 0.1, Importance: 0.2, Sona: 0.1},
			ExpandDecay:        0.5,
			ExpandDepth:        3,
			ImportanceAlpha:    0.2,
			ImportanceHopDecay: 0.5,
			ImportanceDepth:    2,
			ImportanceFloor:    0.05,
			Fusion:             "weighted",
			RRFK:               60,
			Paths:              PathWeights{Dense: 0.25, BM25: 1, Affinity: 0.5, Metric: 0.05, Context: 0.5, Time: 0.5, Speaker: 0.4, Reply: 0.5},
			Scope:              "sona",
			AffinitySeeds:      5,
			AffinityDepth:      2,
			AffinityLinks:      LinkWeights{Causal: 1, Similar: 0, Sequential: 1, Related: 1, CoAccess: 1},
			BM25K1:             1.2,
			BM25B:              0.3,
			CoAccessRate:       0.05,
			CoAccessPartners:   2,
			CoAccessFlush:      Duration(5 * time.Second),
			LinksHold:          Duration(30 * time.Second),
			TouchFlush:         Duration(30 * time.Second),
			Dedup:              true,
			SimilarNeighbors:   3,
			QueryLog:           true,
			QueryLogKeep:       10_000,
			ExactScanMax:       20_000,
			ContextWindow:      2,
			ContextGap:         Duration(time.Hour),
			Rerank:             defaultRerank(),
		},
		Threshold: Thresholds{
			RetrievalBeta: 0.3,
			DedupBeta:     3.0,
			ConsensusBeta: 5.0,
			BootstrapMin:  10,
			BootstrapMean: 0.60,
			BootstrapStd:  0.10,
		},
		Kinds:       DefaultKinds(),
		DefaultKind: "note",
		Tiers: Tiers{
			STMPages: 7, MTMSegments: 200, Theta: 0.6,
			Alpha: 1, Beta: 1, Gamma: 1, Mu: Duration(1e7 * time.Second), Tau: 5,
			TopM: 5, TopK: 5, SegmentPages: 256, KBSize: 100, AgentTraits: 100, LPMTopK: 10,
			Traits: DefaultTraits(),
			AgentProfile: map[string]string{
				"role":      "an assistant with a long-term memory",
				"character": "attentive, honest about what it does not remember",
			},
		},
		Living: Living{Phi: 1.618, MinCompressNodes: 3, ColdBranchRatio: 0.1, StakesHigh: 1.25},
		Heartbeat: Heartbeat{Interval: Duration(30 * time.Second), DreamIdle: Duration(6 * time.Hour),
			SweepBatch: 2000, MaxCompressions: 4, DreamRecent: 50, InsightConfidence: 0.4},
		Evaluation: Evaluation{Mode: "llm", Batch: 32, ImportanceSeed: 0.2, Archetypes: DefaultArchetypes()},
		LLM: LLM{Provider: "offline", MaxTokens: 1024, ContextTokens: 8192, Timeout: Duration(60 * time.Second),
			MaxRetries: 3, RetryBase: Duration(500 * time.Millisecond), RetryMax: Duration(20 * time.Second),
			MaxConcurrency: 16, BreakerFailures: 5, BreakerCooldown: Duration(30 * time.Second)},
		Embedder:  Embedder{Provider: "hashed", Dims: 384, Timeout: Duration(30 * time.Second), MaxConcurrency: 16, BatchSize: 256},
		Anchoring: Anchoring{Rules: DefaultAnchorRules()},
		Actors: Actors{
			SonaIdle:          Duration(5 * time.Minute),
			MaxRestarts:       10,
			RestartWindow:     Duration(time.Minute),
			RestartBackoff:    Duration(100 * time.Millisecond),
			MaxBackoff:        Duration(30 * time.Second),
			ServiceMaxBackoff: Duration(10 * time.Second),
			AskTimeout:        Duration(30 * time.Second),
		},
		Log:     Log{Level: "info", Format: "console"},
		Cluster: DefaultCluster(),
	}
}

// DefaultKinds is XmetaV's kind table (seed 002): weight and TTL. The note
// TTL "varies" in XmetaV; here it is permanent unless configured.
func DefaultKinds() map[string]Kind {
	const day = 24 * time.Hour
	return map[string]Kind{
		"outcome":     {Weight: 1.0, TTL: Duration(3 * day)},
		"fact":        {Weight: 1.0},
		"error":       {Weight: 0.9, TTL: Duration(3 * day)},
		"goal":        {Weight: 0.8},
		"observation": {Weight: 0.6, TTL: Duration(3 * day)},
		"note":        {Weight: 0.5},
	}
}

// DefaultAnchorRules are XmetaV's anchoring categories (seed 002:
// "milestone/decision/incident keywords"): an explicit `anchor` label
// first, then cue words and phrases, incidents before milestones before
// decisions (a rollback after an outage is an incident first). The cue
// words judge what is reported to a sona (text and other memories), not
// the model's own responses, which restate what they recall.
func DefaultAnchorRules() []AnchorRule {
	reported := func() []string { return []string{"text", "other"} }
	return []AnchorRule{
		{Category: "milestone", Labels: map[string]string{"anchor": "milestone"}},
		{Category: "decision", Labels: map[string]string{"anchor": "decision"}},
		{Category: "incident", Labels: map[string]string{"anchor": "incident"}},
		{Category: "incident", Data: reported(), Words: []string{"incident", "outage", "went down", "root cause",
			"postmortem", "post-mortem", "rolled back", "data loss", "breach"}},
		{Category: "milestone", Data: reported(), Words: []string{"milestone", "shipped", "launched", "went live",
			"released", "deployed to production"}},
		{Category: "decision", Data: reported(), Words: []string{"decided", "decision", "we agreed",
			"agreed to", "chose to", "approved"}},
	}
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	v := &validation{}
	for _, section := range []func(*validation){
		c.validateDataDir, c.validateServer, c.validateStore, c.validateIndex, c.validateRecall,
		c.validateThresholds, c.validateKinds, c.validateTiers, c.validateLiving, c.validateHeartbeat, c.validateEvaluation,
		c.validateAnchoring, c.validateLLM, c.validateEmbedder, c.validateActors, c.validateLog,
		func(v *validation) { c.Cluster.validate(v.bad) },
	} {
		section(v)
	}
	return errors.Join(v.errs...)
}

// validation collects what a validation finds wrong, each problem naming
// its key, in the order found.
type validation struct{ errs []error }

func (v *validation) bad(key, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

func (v *validation) positive(key string, n int) {
	if n <= 0 {
		v.bad(key, "must be positive, got %d", n)
	}
}

func (v *validation) unit(key string, x float64) {
	if math.IsNaN(x) || x < 0 || x > 1 {
		v.bad(key, "must be within 0..1, got %v", x)
	}
}

func (v *validation) nonNeg(key string, x float64) {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		v.bad(key, "must be a non-negative number, got %v", x)
	}
}

func (v *validation) posDur(key string, d Duration) {
	if d <= 0 {
		v.bad(key, "must be a positive duration, got %s", d)
	}
}

// validateDataDir checks data_dir.
func (c *Config) validateDataDir(v *validation) {
	bad := v.bad
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data_dir", "must not be empty")
	}
}

// validateServer checks server.* (and its tokens).
func (c *Config) validateServer(v *validation) {
	bad, positive, posDur := v.bad, v.positive, v.posDur
	for _, h := range c.Server.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(strings.Trim(h, "[]")) == nil {
			bad("server.allowed_hosts", "want a host name or IP without scheme or port, got %q", h)
		}
	}
	for _, o := range c.Server.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			bad("server.allowed_origins", "want scheme://host[:port], got %q", o)
		}
	}
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		bad("server.listen", "want host:port, got %q", c.Server.Listen)
	}
	if c.Server.MaxBodyBytes <= 0 {
		bad("server.max_body_bytes", "must be positive, got %d", c.Server.MaxBodyBytes)
	}
	posDur("server.request_timeout", c.Server.RequestTimeout)
	positive("server.max_k", c.Server.MaxK)
	positive("server.max_budget_chars", c.Server.MaxBudgetChars)
	positive("server.max_list_limit", c.Server.MaxListLimit)
	positive("server.gc_percent", c.Server.GCPercent)
	if c.Server.MaxImportBytes <= 0 {
		bad("server.max_import_bytes", "must be positive, got %d", c.Server.MaxImportBytes)
	}
	posDur("server.transfer_timeout", c.Server.TransferTimeout)
	posDur("server.read_header_timeout", c.Server.ReadHeaderTimeout)
	posDur("server.read_timeout", c.Server.ReadTimeout)
	posDur("server.idle_timeout", c.Server.IdleTimeout)
	if c.Server.MaxHeaderBytes < 4<<10 || c.Server.MaxHeaderBytes > 16<<20 {
		bad("server.max_header_bytes", "must be within 4 KiB..16 MiB, got %d", c.Server.MaxHeaderBytes)
	}
	if c.Server.MaxConnections < 0 {
		bad("server.max_connections", "must not be negative (0 = no limit), got %d", c.Server.MaxConnections)
	}
	if _, err := c.Server.MemoryLimit.Parse(); err != nil {
		bad("server.memory_limit", "%v", err)
	}
	if _, err := c.Server.GCHeadroom.Parse(); err != nil {
		bad("server.gc_headroom", "%v", err)
	}
	positive("server.max_path_segments", c.Server.MaxPathSegments)
	c.validateTokens(bad)
}

// validateStore checks store.*.
func (c *Config) validateStore(v *validation) {
	bad, positive := v.bad, v.positive
	positive("store.max_batch", c.Store.MaxBatch)
	if c.Store.DeferFor < 0 || c.Store.DeferFor.D() > time.Second {
		bad("store.defer_for", "must be within 0..1s, got %s", c.Store.DeferFor)
	}
	if c.Store.CommitInterval < 0 || c.Store.CommitInterval.D() > 100*time.Millisecond {
		bad("store.commit_interval", "must be within 0..100ms, got %s", c.Store.CommitInterval)
	}
	positive("store.max_block_bytes", c.Store.MaxBlockBytes)
	if c.Store.MaxBlockBytes > 4<<20 {
		bad("store.max_block_bytes", "must be at most 4 MiB, got %d", c.Store.MaxBlockBytes)
	}
	positive("store.cache_mb", c.Store.CacheMB)
	if !slices.Contains([]string{"none", "snappy", "zstd"}, c.Store.Compression) {
		bad("store.compression", "must be none, snappy or zstd, got %q", c.Store.Compression)
	}
	if c.Store.Memtables < 2 || c.Store.Memtables > 16 {
		bad("store.memtables", "must be within 2..16, got %d", c.Store.Memtables)
	}
	positive("store.memory_cache", c.Store.MemoryCache)
	if c.Store.MemTableMB < 1 || c.Store.MemTableMB > 1024 {
		bad("store.memtable_mb", "must be within 1..1024, got %d", c.Store.MemTableMB)
	}
	if c.Store.MinFreeMB < 2*c.Store.MemTableMB {
		bad("store.min_free_mb", "must be at least 2 × store.memtable_mb (%d), got %d: the reserve covers a memtable flush", 2*c.Store.MemTableMB, c.Store.MinFreeMB)
	}
	if c.Store.ValueLogMB < 16 || c.Store.ValueLogMB > 2047 {
		bad("store.value_log_mb", "must be within 16..2047, got %d", c.Store.ValueLogMB)
	}
	if c.Store.GC.Interval < 0 || c.Store.GC.Interval > 0 && c.Store.GC.Interval.D() < time.Second {
		bad("store.gc.interval", "must be 0 (no background pass) or at least 1s, got %s", c.Store.GC.Interval)
	}
	if r := c.Store.GC.DiscardRatio; !(r >= 0.05 && r <= 0.95) {
		bad("store.gc.discard_ratio", "must be within 0.05..0.95, got %g", r)
	}
}

// validateIndex checks index.*.
func (c *Config) validateIndex(v *validation) {
	bad, positive := v.bad, v.positive
	if c.Index.M < 2 {
		bad("index.m", "must be at least 2, got %d", c.Index.M)
	}
	positive("index.ef_search", c.Index.EfSearch)
	positive("index.ef_construction", c.Index.EfConstruction)
	if !slices.Contains([]string{GraphAuto, GraphEager, GraphLazy}, c.Index.Graph) {
		bad("index.graph", "must be %q, %q or %q, got %q", GraphAuto, GraphEager, GraphLazy, c.Index.Graph)
	}
	if c.Index.Backlog < 0 {
		bad("index.backlog", "must not be negative, got %d", c.Index.Backlog)
	}
	if c.Index.HeapVectorsMB < 0 {
		bad("index.heap_vectors_mb", "must not be negative, got %d", c.Index.HeapVectorsMB)
	}
	if c.Index.PackMB < 0 {
		bad("index.pack_mb", "must not be negative, got %d", c.Index.PackMB)
	}
	if c.Index.TextBacklog < 0 {
		bad("index.text_backlog", "must not be negative, got %d", c.Index.TextBacklog)
	}
	if c.Index.SnapshotInterval < 0 {
		bad("index.snapshot_interval", "must not be negative, got %s", c.Index.SnapshotInterval)
	}
}

// validateRecall checks recall.*.
func (c *Config) validateRecall(v *validation) {
	bad, positive, unit, nonNeg := v.bad, v.positive, v.unit, v.nonNeg
	positive("recall.top_k", c.Recall.TopK)
	positive("recall.budget_chars", c.Recall.BudgetChars)
	c.Recall.Rerank.validate(v)
	if c.Recall.Candidates < c.Recall.TopK {
		bad("recall.candidates", "must be at least recall.top_k (%d), got %d", c.Recall.TopK, c.Recall.Candidates)
	}
	if c.Recall.ExpandPerHit < 0 {
		bad("recall.expand_per_hit", "must not be negative, got %d", c.Recall.ExpandPerHit)
	}
	unit("recall.mmr_lambda", c.Recall.MMRLambda)
	unit("recall.collapse", c.Recall.Collapse)
	nonNeg("recall.lambda", c.Recall.Lambda)
	nonNeg("recall.weights.relevance", c.Recall.Weights.Relevance)
	nonNeg("recall.weights.recency", c.Recall.Weights.Recency)
	nonNeg("recall.weights.importance", c.Recall.Weights.Importance)
	nonNeg("recall.weights.sona", c.Recall.Weights.Sona)
	unit("recall.expand_decay", c.Recall.ExpandDecay)
	if c.Recall.ExpandDepth < 0 {
		bad("recall.expand_depth", "must not be negative, got %d", c.Recall.ExpandDepth)
	}
	unit("recall.importance_alpha", c.Recall.ImportanceAlpha)
	unit("recall.importance_hop_decay", c.Recall.ImportanceHopDecay)
	unit("recall.importance_floor", c.Recall.ImportanceFloor)
	switch c.Recall.Fusion {
	case "rrf", "weighted":
	default:
		bad("recall.fusion", "want rrf or weighted, got %q", c.Recall.Fusion)
	}
	if !(c.Recall.RRFK > 0) || math.IsInf(c.Recall.RRFK, 0) {
		bad("recall.rrf_k", "must be a positive number, got %v", c.Recall.RRFK)
	}
	nonNeg("recall.paths.dense", c.Recall.Paths.Dense)
	nonNeg("recall.paths.bm25", c.Recall.Paths.BM25)
	nonNeg("recall.paths.affinity", c.Recall.Paths.Affinity)
	nonNeg("recall.paths.context", c.Recall.Paths.Context)
	nonNeg("recall.paths.time", c.Recall.Paths.Time)
	nonNeg("recall.paths.speaker", c.Recall.Paths.Speaker)
	nonNeg("recall.paths.session", c.Recall.Paths.Session)
	nonNeg("recall.paths.feedback", c.Recall.Paths.Feedback)
	nonNeg("recall.paths.reply", c.Recall.Paths.Reply)
	if c.Recall.ContextWindow < 0 {
		bad("recall.context_window", "must not be negative, got %d", c.Recall.ContextWindow)
	}
	if c.Recall.ContextGap < 0 {
		bad("recall.context_gap", "must not be negative, got %v", c.Recall.ContextGap)
	}
	if c.Recall.Paths.Dense+c.Recall.Paths.BM25 == 0 {
		bad("recall.paths", "the dense or the bm25 path must be on")
	}
	switch c.Recall.Scope {
	case "self", "sona":
	default:
		bad("recall.scope", "want self or sona, got %q", c.Recall.Scope)
	}
	if c.Recall.AffinitySeeds < 0 {
		bad("recall.affinity_seeds", "must not be negative, got %d", c.Recall.AffinitySeeds)
	}
	if c.Recall.AffinityDepth < 1 {
		bad("recall.affinity_depth", "must be at least 1, got %d", c.Recall.AffinityDepth)
	}
	unit("recall.affinity_links.causal", c.Recall.AffinityLinks.Causal)
	unit("recall.affinity_links.similar", c.Recall.AffinityLinks.Similar)
	unit("recall.affinity_links.sequential", c.Recall.AffinityLinks.Sequential)
	unit("recall.affinity_links.related", c.Recall.AffinityLinks.Related)
	unit("recall.affinity_links.coaccess", c.Recall.AffinityLinks.CoAccess)
	nonNeg("recall.bm25_k1", c.Recall.BM25K1)
	unit("recall.bm25_b", c.Recall.BM25B)
	unit("recall.coaccess_rate", c.Recall.CoAccessRate)
	if c.Recall.CoAccessFlush < 0 || c.Recall.CoAccessFlush.D() > time.Minute {
		bad("recall.coaccess_flush", "must be within 0..1m, got %s", c.Recall.CoAccessFlush)
	}
	if c.Recall.LinksHold < 0 || c.Recall.LinksHold.D() > 10*time.Minute {
		bad("recall.links_hold", "must be within 0..10m, got %s", c.Recall.LinksHold)
	}
	if c.Recall.TouchFlush < 0 || c.Recall.TouchFlush.D() > 5*time.Minute {
		bad("recall.touch_flush", "must be within 0..5m, got %s", c.Recall.TouchFlush)
	}
	if c.Recall.CoAccessPartners < 0 {
		bad("recall.coaccess_partners", "must not be negative, got %d", c.Recall.CoAccessPartners)
	}
	if c.Recall.QueryLogKeep < 0 {
		bad("recall.query_log_keep", "must not be negative, got %d", c.Recall.QueryLogKeep)
	}
	if c.Recall.ExactScanMax < 0 {
		bad("recall.exact_scan_max", "must not be negative, got %d", c.Recall.ExactScanMax)
	}
	if c.Recall.Workers < 0 {
		bad("recall.workers", "must not be negative (0: the cores), got %d", c.Recall.Workers)
	}
	if c.Recall.SimilarNeighbors < 0 {
		bad("recall.similar_neighbors", "must not be negative, got %d", c.Recall.SimilarNeighbors)
	}
	if c.Recall.ImportanceDepth < 0 {
		bad("recall.importance_depth", "must not be negative, got %d", c.Recall.ImportanceDepth)
	}
}

// validateThresholds checks thresholds.*.
func (c *Config) validateThresholds(v *validation) {
	bad, positive, nonNeg := v.bad, v.positive, v.nonNeg
	for _, b := range []struct {
		key  string
		beta float64
	}{
		{"thresholds.retrieval_beta", c.Threshold.RetrievalBeta},
		{"thresholds.dedup_beta", c.Threshold.DedupBeta},
		{"thresholds.consensus_beta", c.Threshold.ConsensusBeta},
	} {
		if !(b.beta > 0) || math.IsInf(b.beta, 0) {
			bad(b.key, "β must be a positive number (log β is taken), got %v", b.beta)
		}
	}
	positive("thresholds.bootstrap_min", c.Threshold.BootstrapMin)
	if !(c.Threshold.BootstrapMean >= -1 && c.Threshold.BootstrapMean <= 1) {
		bad("thresholds.bootstrap_mean", "must be a cosine within -1..1, got %v", c.Threshold.BootstrapMean)
	}
	nonNeg("thresholds.bootstrap_std", c.Threshold.BootstrapStd)
}

// validateKinds checks kinds and default_kind.
func (c *Config) validateKinds(v *validation) {
	bad := v.bad
	if len(c.Kinds) == 0 {
		bad("kinds", "must not be empty")
	}
	for _, name := range sortedKeys(c.Kinds) {
		k := c.Kinds[name]
		if !validName(name) {
			bad("kinds."+name, "kind names are lower-case letters, digits, '_' or '-'")
		}
		if math.IsNaN(k.Weight) || k.Weight <= 0 || k.Weight > 1 {
			bad("kinds."+name+".weight", "must be within (0, 1], got %v", k.Weight)
		}
		if k.TTL < 0 {
			bad("kinds."+name+".ttl", "must not be negative, got %s", k.TTL)
		}
	}
	if _, ok := c.Kinds[c.DefaultKind]; !ok {
		bad("default_kind", "%q is not in kinds (%s)", c.DefaultKind, strings.Join(sortedKeys(c.Kinds), ", "))
	}
}

// validateTiers checks tiers.*.
func (c *Config) validateTiers(v *validation) {
	bad, positive, nonNeg, posDur := v.bad, v.positive, v.nonNeg, v.posDur
	t := c.Tiers
	positive("tiers.stm_pages", t.STMPages)
	positive("tiers.mtm_segments", t.MTMSegments)
	nonNeg("tiers.theta", t.Theta)
	nonNeg("tiers.alpha", t.Alpha)
	nonNeg("tiers.beta", t.Beta)
	nonNeg("tiers.gamma", t.Gamma)
	posDur("tiers.mu", t.Mu)
	nonNeg("tiers.tau", t.Tau)
	positive("tiers.top_m", t.TopM)
	positive("tiers.top_k", t.TopK)
	positive("tiers.segment_pages", t.SegmentPages)
	positive("tiers.kb_size", t.KBSize)
	positive("tiers.agent_traits", t.AgentTraits)
	if len(t.Traits) == 0 {
		bad("tiers.traits", "must list at least one trait dimension")
	}
	seenTrait := map[string]bool{}
	for i, d := range t.Traits {
		switch {
		case strings.TrimSpace(d.Name) == "" || strings.TrimSpace(d.Group) == "":
			bad(fmt.Sprintf("tiers.traits[%d]", i), "needs a name and a group")
		case seenTrait[d.Name]:
			bad(fmt.Sprintf("tiers.traits[%d]", i), "repeats the dimension %q", d.Name)
		}
		seenTrait[d.Name] = true
	}
	positive("tiers.lpm_top_k", t.LPMTopK)
}

// validateLiving checks living.*.
func (c *Config) validateLiving(v *validation) {
	bad, positive, unit := v.bad, v.positive, v.unit
	if !(c.Living.Phi > 1) || math.IsInf(c.Living.Phi, 0) {
		bad("living.phi", "must be greater than 1, got %v", c.Living.Phi)
	}
	positive("living.min_compress_nodes", c.Living.MinCompressNodes)
	unit("living.cold_branch_ratio", c.Living.ColdBranchRatio)
	if !(c.Living.StakesHigh >= 1) || math.IsInf(c.Living.StakesHigh, 0) {
		bad("living.stakes_high", "must be at least 1, got %v", c.Living.StakesHigh)
	}
}

// validateHeartbeat checks heartbeat.*.
func (c *Config) validateHeartbeat(v *validation) {
	positive, unit, posDur := v.positive, v.unit, v.posDur
	posDur("heartbeat.interval", c.Heartbeat.Interval)
	posDur("heartbeat.dream_idle", c.Heartbeat.DreamIdle)
	positive("heartbeat.sweep_batch", c.Heartbeat.SweepBatch)
	positive("heartbeat.max_compressions", c.Heartbeat.MaxCompressions)
	positive("heartbeat.dream_recent", c.Heartbeat.DreamRecent)
	unit("heartbeat.insight_confidence", c.Heartbeat.InsightConfidence)
}

// validateAnchoring checks anchoring.*.
func (c *Config) validateAnchoring(v *validation) {
	bad := v.bad
	for i, r := range c.Anchoring.Rules {
		key := fmt.Sprintf("anchoring.rules[%d]", i)
		if !validName(r.Category) {
			bad(key+".category", "want lower-case letters, digits, '_' or '-', got %q", r.Category)
		}
		if len(r.Words) == 0 && len(r.Kinds) == 0 && len(r.Labels) == 0 {
			bad(key, "needs words, kinds or labels")
		}
		for _, w := range r.Words {
			if strings.TrimSpace(w) == "" {
				bad(key+".words", "must not hold an empty word")
			}
		}
		for _, k := range r.Kinds {
			if _, ok := c.Kinds[k]; !ok {
				bad(key+".kinds", "%q is not in kinds (%s)", k, strings.Join(sortedKeys(c.Kinds), ", "))
			}
		}
		for k := range r.Labels {
			if k == "" {
				bad(key+".labels", "label names must not be empty")
			}
		}
		for _, d := range r.Data {
			switch d {
			case "self", "other", "text", "file":
			default:
				bad(key+".data", "want self, other, text or file, got %q", d)
			}
		}
	}
}

// validateLLM checks llm.*.
func (c *Config) validateLLM(v *validation) {
	bad, posDur := v.bad, v.posDur
	switch c.LLM.Provider {
	case "offline":
	case "openai", "anthropic":
		if strings.TrimSpace(c.LLM.Model) == "" {
			bad("llm.model", "must name the model for provider %s", c.LLM.Provider)
		}
	default:
		bad("llm.provider", "unknown provider %q (available: offline, openai, anthropic)", c.LLM.Provider)
	}
	validURL("llm.base_url", c.LLM.BaseURL, bad)
	if c.LLM.MaxTokens < 0 {
		bad("llm.max_tokens", "must not be negative, got %d", c.LLM.MaxTokens)
	}
	if c.LLM.ContextTokens < 0 || (c.LLM.ContextTokens > 0 && c.LLM.ContextTokens <= c.LLM.MaxTokens) {
		bad("llm.context_tokens", "must be 0 (no limit) or more than llm.max_tokens (%d), got %d", c.LLM.MaxTokens, c.LLM.ContextTokens)
	}
	posDur("llm.timeout", c.LLM.Timeout)
	if c.LLM.MaxRetries < 0 || c.LLM.MaxRetries > 20 {
		bad("llm.max_retries", "must be within 0..20, got %d", c.LLM.MaxRetries)
	}
	posDur("llm.retry_base", c.LLM.RetryBase)
	if c.LLM.RetryMax < c.LLM.RetryBase {
		bad("llm.retry_max", "must be at least llm.retry_base (%s), got %s", c.LLM.RetryBase, c.LLM.RetryMax)
	}
	if c.LLM.MaxConcurrency < 0 {
		bad("llm.max_concurrency", "must not be negative (0 = unbounded), got %d", c.LLM.MaxConcurrency)
	}
	if c.LLM.BreakerFailures < 0 {
		bad("llm.breaker_failures", "must not be negative (0 = never open), got %d", c.LLM.BreakerFailures)
	}
	posDur("llm.breaker_cooldown", c.LLM.BreakerCooldown)
}

// validateEmbedder checks embedder.*.
func (c *Config) validateEmbedder(v *validation) {
	bad, positive, posDur := v.bad, v.positive, v.posDur
	switch c.Embedder.Provider {
	case "hashed":
	case "openai":
		if strings.TrimSpace(c.Embedder.Model) == "" {
			bad("embedder.model", "must name the embedding model for provider openai")
		}
	case "model2vec":
		if strings.TrimSpace(c.Embedder.Path) == "" {
			bad("embedder.path", "must name the model2vec folder (tokenizer.json, model.safetensors, config.json)")
		}
	case "glove":
		if c.Embedder.Dims != 100 {
			bad("embedder.dims", "must be 100 for provider glove (the built-in GloVe table), got %d", c.Embedder.Dims)
		}
	default:
		bad("embedder.provider", "unknown provider %q (available: hashed, glove, openai, model2vec)", c.Embedder.Provider)
	}
	validURL("embedder.base_url", c.Embedder.BaseURL, bad)
	if c.Embedder.Dims < 8 || c.Embedder.Dims > 8192 {
		bad("embedder.dims", "must be within 8..8192, got %d", c.Embedder.Dims)
	}
	posDur("embedder.timeout", c.Embedder.Timeout)
	if c.Embedder.MaxConcurrency < 0 {
		bad("embedder.max_concurrency", "must not be negative (0 = unbounded), got %d", c.Embedder.MaxConcurrency)
	}
	positive("embedder.batch_size", c.Embedder.BatchSize)
}

// validateActors checks actors.*.
func (c *Config) validateActors(v *validation) {
	bad, posDur := v.bad, v.posDur
	posDur("actors.sona_idle", c.Actors.SonaIdle)
	if c.Actors.MaxRestarts < 0 {
		bad("actors.max_restarts", "must not be negative, got %d", c.Actors.MaxRestarts)
	}
	posDur("actors.restart_window", c.Actors.RestartWindow)
	if c.Actors.RestartBackoff < 0 {
		bad("actors.restart_backoff", "must not be negative (0 = restart at once), got %s", c.Actors.RestartBackoff)
	}
	if c.Actors.MaxBackoff < c.Actors.RestartBackoff {
		bad("actors.max_backoff", "must be at least actors.restart_backoff (%s), got %s", c.Actors.RestartBackoff, c.Actors.MaxBackoff)
	}
	if c.Actors.ServiceMaxBackoff < c.Actors.RestartBackoff {
		bad("actors.service_max_backoff", "must be at least actors.restart_backoff (%s), got %s", c.Actors.RestartBackoff, c.Actors.ServiceMaxBackoff)
	}
	posDur("actors.ask_timeout", c.Actors.AskTimeout)
}

// validateLog checks log.*.
func (c *Config) validateLog(v *validation) {
	bad := v.bad
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		bad("log.format", "want console or json, got %q", c.Log.Format)
	}
}

// KindWeight returns the weight of an XmetaV kind, or the default kind's.
func (c *Config) KindWeight(kind string) float64 {
	if k, ok := c.Kinds[kind]; ok {
		return k.Weight
	}
	return c.Kinds[c.DefaultKind].Weight
}

// validURL checks an optional http(s) base URL.
func validURL(key, raw string, bad func(string, string, ...any)) {
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad(key, "want an http(s) URL such as http://localhost:11434/v1, got %q", raw)
	}
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

//go:embed archetypes.yaml
var archetypesYAML []byte

// DefaultArchetypes are the evaluating archetypes of archetypes.yaml.
func DefaultArchetypes() []Archetype { return embedded[[]Archetype]("archetypes.yaml", archetypesYAML) }

//go:embed traits.yaml
var traitsYAML []byte

// DefaultTraits are MemoryOS's 90 user trait dimensions in three groups
// (traits.yaml).
func DefaultTraits() []TraitDimension { return embedded[[]TraitDimension]("traits.yaml", traitsYAML) }

// embedded decodes a YAML file built into the binary.
func embedded[T any](name string, b []byte) T {
	var v T
	if err := yaml.Unmarshal(b, &v); err != nil {
		panic(fmt.Sprintf("config: %s: %v", name, err))
	}
	return v
}

// metricName is what a metric may be called: it is a JSON property of the
// evaluation schema and a key of the stored metrics.
var metricName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// validateEvaluation checks the metric path's weight (recall.paths.metric)
// and evaluation.*.
func (c *Config) validateEvaluation(v *validation) {
	bad, positive, unit := v.bad, v.positive, v.unit
	v.nonNeg("recall.paths.metric", c.Recall.Paths.Metric)
	e := c.Evaluation
	switch e.Mode {
	case "llm", "heuristic":
	case "off":
		return
	default:
		bad("evaluation.mode", "must be llm, heuristic or off, got %q", e.Mode)
		return
	}
	positive("evaluation.batch", e.Batch)
	unit("evaluation.importance_seed", e.ImportanceSeed)
	if len(e.Archetypes) == 0 {
		bad("evaluation.archetypes", "must list at least one archetype (or set evaluation.mode: off)")
	}
	names := map[string]bool{}
	for i, a := range e.Archetypes {
		key := fmt.Sprintf("evaluation.archetypes[%d]", i)
		if a.Name == "" || names[a.Name] {
			bad(key, "needs a name of its own, got %q", a.Name)
		}
		names[a.Name] = true
		if len(a.Metrics) == 0 {
			bad(key, "must define at least one metric")
		}
		metrics := map[string]bool{}
		for j, m := range a.Metrics {
			if !metricName.MatchString(m.Name) || metrics[m.Name] {
				bad(fmt.Sprintf("%s.metrics[%d]", key, j), "needs a unique name of lower-case letters, digits and _, got %q", m.Name)
			}
			metrics[m.Name] = true
			if m.Definition == "" {
				bad(fmt.Sprintf("%s.metrics[%d]", key, j), "needs a definition")
			}
		}
		for _, f := range a.Focus {
			if !metrics[f] {
				bad(key+".focus", "names %q, which is not one of its metrics", f)
			}
		}
	}
}

var tokenHash = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func (c *Config) validateTokens(bad func(string, string, ...any)) {
	names := map[string]bool{}
	hashes := map[string]bool{}
	for i, t := range c.Server.Auth.Tokens {
		key := fmt.Sprintf("server.auth.tokens[%d]", i)
		if strings.TrimSpace(t.Name) == "" || names[t.Name] {
			bad(key+".name", "needs a name of its own, got %q", t.Name)
		}
		names[t.Name] = true
		if !tokenHash.MatchString(t.Hash) {
			bad(key+".hash", "want sha256:<64 lower-case hex digits> (from `memoria token hash`), not the token itself")
		} else if hashes[t.Hash] {
			bad(key+".hash", "repeats the hash of another token")
		}
		hashes[t.Hash] = true
		if len(t.Scopes) == 0 {
			bad(key+".scopes", "must list at least one of read, write, admin")
		}
		for _, sc := range t.Scopes {
			if !slices.Contains(Scopes, sc) {
				bad(key+".scopes", "want read, write or admin, got %q", sc)
			}
		}
		for _, id := range t.Sonas {
			if !uuidPattern.MatchString(id) {
				bad(key+".sonas", "want sona uuids (lower-case, hyphenated), got %q", id)
			}
		}
	}
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
