// Package metrics holds the process's Prometheus metrics, served at
// GET /metrics. Every metric is registered on the Set's own registry (not
// the global one), so several processes' worth can live in one test.
package metrics

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Set is the process's metrics. A nil *Set records nothing.
type Set struct {
	registry *prometheus.Registry

	// TierTransitions counts MemoryOS tier transitions by kind
	// (page_added, page_moved, segment_created, …; see tiers.Event).
	TierTransitions *prometheus.CounterVec
	// TierFallbacks counts tier decisions the offline heuristic made
	// because the language model could not, by operation.
	TierFallbacks *prometheus.CounterVec
	// TierFailures counts tier steps that failed (and were retried by a
	// restart of the tier actor), by tier.
	TierFailures *prometheus.CounterVec
	// Evaluations counts memories the EUMAS evaluator stored, by result
	// (evaluated, failed: every archetype failed).
	Evaluations *prometheus.CounterVec
	// EvaluationFailures counts archetype answers that were invalid
	// twice (recorded, not stored), by archetype.
	EvaluationFailures *prometheus.CounterVec

	// HTTPRequests counts requests by route (the mux pattern, "unmatched"
	// for none), method and status; HTTPDuration times them.
	HTTPRequests *prometheus.CounterVec
	HTTPDuration *prometheus.HistogramVec
	// RecallDuration times recalls, by operation (recall, chat, query).
	RecallDuration *prometheus.HistogramVec
	// ActorRestarts counts actor restarts by supervisor decision, by actor
	// kind (sona, tier, heartbeat, …).
	ActorRestarts *prometheus.CounterVec
	// MailboxDepth is how many messages wait in the mailboxes of each actor
	// kind.
	MailboxDepth *prometheus.GaugeVec
	// Connections is how many HTTP connections are open; ConnectionWaits
	// counts the times the listener waited for one to close
	// (server.max_connections reached).
	Connections     prometheus.Gauge
	ConnectionWaits prometheus.Counter

	llm *llmMetrics // model providers (llm.go)
}

// New registers the metrics, with Go runtime and process collectors.
func New() *Set {
	r := prometheus.NewRegistry()
	s := &Set{
		registry: r,
		TierTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_tier_transitions_total",
			Help: "MemoryOS tier transitions, by kind.",
		}, []string{"kind"}),
		TierFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_tier_model_fallbacks_total",
			Help: "Tier decisions made by the offline heuristic because the language model gave no valid structured reply, by operation.",
		}, []string{"op"}),
		TierFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_tier_step_failures_total",
			Help: "Tier steps that failed and were retried, by tier.",
		}, []string{"tier"}),
		Evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_evaluations_total",
			Help: "Memories evaluated by the EUMAS evaluator, by result (evaluated, failed).",
		}, []string{"result"}),
		EvaluationFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoria_evaluation_failures_total",
			Help: "Archetype evaluations whose answer was invalid twice and was recorded as failed, by archetype.",
		}, []string{"archetype"}),
	}
	s.HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memoria_http_requests_total",
		Help: "HTTP requests, by route (mux pattern), method and status.",
	}, []string{"route", "method", "status"})
	s.HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "memoria_http_request_duration_seconds",
		Help:    "HTTP request latency, by route (mux pattern) and status.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5 ms … 131 s
	}, []string{"route", "status"})
	s.RecallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "memoria_recall_duration_seconds",
		Help:    "Recall latency, by operation (recall, chat, query).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12), // 0.1 ms … 18 s
	}, []string{"op"})
	s.ActorRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memoria_actor_restarts_total",
		Help: "Actor restarts decided by a supervisor, by actor kind.",
	}, []string{"actor"})
	s.MailboxDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "memoria_actor_mailbox_depth",
		Help: "Messages waiting in actor mailboxes, by actor kind.",
	}, []string{"actor"})
	s.Connections = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "memoria_http_connections",
		Help: "Open HTTP connections.",
	})
	s.ConnectionWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "memoria_http_connection_waits_total",
		Help: "Times the listener waited for a connection to close before accepting another (server.max_connections reached).",
	})
	r.MustRegister(s.HTTPRequests, s.HTTPDuration, s.RecallDuration, s.ActorRestarts, s.MailboxDepth, s.Connections, s.ConnectionWaits)
	r.MustRegister(s.TierTransitions, s.TierFallbacks, s.TierFailures, s.Evaluations, s.EvaluationFailures,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectorRuntimeMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.llm = newLLMMetrics(r)
	return s
}

// collectorRuntimeMetrics are the runtime's figures of the collector
// exported beside the Go collector's defaults, which memoria bench reads:
// the runtime's estimate of the CPU time its collector took (mark
// workers, assists, pauses: go_cpu_classes_gc_total_cpu_seconds_total),
// to be compared with its estimates of the CPU time there was
// (go_cpu_classes_total_cpu_seconds_total, GOMAXPROCS × the time) and of
// what was idle (go_cpu_classes_idle_cpu_seconds_total); and the heap
// its last cycle found live (go_gc_heap_live_bytes).
var collectorRuntimeMetrics = collectors.GoRuntimeMetricsRule{
	Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|idle|total):cpu-seconds$|^/gc/heap/live:bytes$`)}

// Handler serves the metrics in the Prometheus text format.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
}

// Registry is the registry the metrics live in.
func (s *Set) Registry() *prometheus.Registry { return s.registry }

// ConnOpened and ConnClosed follow the open connections; ConnWaited
// counts a wait for a free connection slot.
func (s *Set) ConnOpened() {
	if s != nil {
		s.Connections.Inc()
	}
}

func (s *Set) ConnClosed() {
	if s != nil {
		s.Connections.Dec()
	}
}

func (s *Set) ConnWaited() {
	if s != nil {
		s.ConnectionWaits.Inc()
	}
}

// TierTransition counts a tier transition of kind.
func (s *Set) TierTransition(kind string) {
	if s != nil {
		s.TierTransitions.WithLabelValues(kind).Inc()
	}
}

// TierFallback counts a tier decision the heuristic made for the model.
func (s *Set) TierFallback(op string) {
	if s != nil {
		s.TierFallbacks.WithLabelValues(op).Inc()
	}
}

// TierFailure counts a failed tier step.
func (s *Set) TierFailure(tier string) {
	if s != nil {
		s.TierFailures.WithLabelValues(tier).Inc()
	}
}

// Evaluated counts an evaluator step's memories.
func (s *Set) Evaluated(evaluated, failed int) {
	if s != nil {
		s.Evaluations.WithLabelValues("evaluated").Add(float64(evaluated - failed))
		s.Evaluations.WithLabelValues("failed").Add(float64(failed))
	}
}

// EvaluationFailure counts an archetype that failed twice.
func (s *Set) EvaluationFailure(archetype string) {
	if s != nil {
		s.EvaluationFailures.WithLabelValues(archetype).Inc()
	}
}

// ObserveHTTP records a request answered by route (a mux pattern; ""
// when none matched).
func (s *Set) ObserveHTTP(route, method string, status int, took time.Duration) {
	if s == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	code := strconv.Itoa(status)
	s.HTTPRequests.WithLabelValues(route, method, code).Inc()
	s.HTTPDuration.WithLabelValues(route, code).Observe(took.Seconds())
}

// ObserveRecall records how long a recall took.
func (s *Set) ObserveRecall(op string, took time.Duration) {
	if s != nil {
		s.RecallDuration.WithLabelValues(op).Observe(took.Seconds())
	}
}

// ActorRestart counts a restart of an actor of this kind.
func (s *Set) ActorRestart(kind string) {
	if s != nil {
		s.ActorRestarts.WithLabelValues(kind).Inc()
	}
}

// MailboxPosted and MailboxReceived move the mailbox depth of an actor
// kind.
func (s *Set) MailboxPosted(kind string) {
	if s != nil {
		s.MailboxDepth.WithLabelValues(kind).Inc()
	}
}

// MailboxReceived: see MailboxPosted.
func (s *Set) MailboxReceived(kind string) {
	if s != nil {
		s.MailboxDepth.WithLabelValues(kind).Dec()
	}
}

// State is what the store gauges read at each scrape.
type State struct {
	Sonas, Memories int64
	// Indexes are the derived indexes' sizes by name (vectors, text, …).
	Indexes map[string]int64
	// Disk is what the store's files take on disk, by part (tables,
	// value_log, wal, other).
	Disk map[string]int64
	// Spaces are the key spaces' live keys and bytes, as the last pass of
	// the store's garbage collection measured them (none before it).
	Spaces []Space
	// GC sums up the garbage collection's passes.
	GC GCState
	// WritesRefused: the store is below its free-space reserve.
	WritesRefused bool
	// TextRebuilds counts the full-text index rebuilds after damage.
	TextRebuilds int64
	// RerankFallbacks counts recalls whose reranker failed (recall.rerank).
	RerankFallbacks int64
	// RecallWorkers are the recalls computing and waiting for a worker now
	// (recall.workers), and the waits so far.
	RecallWorkers RecallWorkers
	// Caches are the reads and entries of the caches, by name.
	Caches map[string]Cache
	// VectorFloats are the bytes of the vector index's float32 vectors by
	// where they are: heap, spill (index.heap_vectors_mb).
	VectorFloats map[string]int64
	// VectorPacks are the bytes of the vector index's packs of large
	// sonas' records (index.pack_mb).
	VectorPacks int64
	// Committer is the group committer's work since the start.
	Committer Committer
	// Waiting is what recalls left behind that waits in memory to be
	// written, by what: coaccess_lists, touches (memories).
	Waiting map[string]int64
	// LinksBackWaiting is how many link lists wait for the links back
	// held in memory (recall.links_hold): a crash loses none of them,
	// which are read again at the next open.
	LinksBackWaiting int64
}

// RecallWorkers are the recalls computing (Busy, of Workers) and waiting
// for a worker now, the recalls that waited and their waits' seconds.
type RecallWorkers struct {
	Workers, Busy, Waiting int
	Waits                  uint64
	WaitSeconds            float64
}

// Committer is the group committer's work: its commits (one fsync each)
// and the operations they committed, the seconds it was busy with
// batches and, of those, in Badger's commits; its batches by how long it
// took over each (Batches[i] at most BatchBounds[i] seconds and more than
// the bound before, the last more than every bound); Badger's stalls of
// the writes while level 0 of its tree was full, and their seconds; and
// the store's read transactions open now, the oldest how many commits
// behind.
type Committer struct {
	Commits, Ops, DeferredOps  uint64
	BusySeconds, CommitSeconds float64
	BatchBounds                []float64
	Batches                    []uint64
	// Waits are the submitted writes' waits by stage (queued, batch,
	// acknowledge): counts by WaitBounds as Batches by BatchBounds, and
	// their seconds.
	WaitBounds       []float64
	Waits            map[string]Waits
	Stalls           uint64
	StallSeconds     float64
	ReadsOpen        int
	OldestReadBehind uint64
	// Written are the keys and bytes the commits wrote, by key space.
	Written map[string]Written
}

// Written are the keys of a key space the commits wrote and their bytes.
type Written struct{ Keys, Bytes uint64 }

// WriteStages name the stages of a write's wait (Committer.Waits' keys,
// the stage label of memoria_store_write_wait_seconds), in the order the
// store counts them (store.StageQueued, StageBatch, StageAcknowledge).
var WriteStages = [...]string{"queued", "batch", "acknowledge"}

// Waits are the writes' waits in one stage: Counts[i] at most
// Committer.WaitBounds[i] seconds, the last more than every bound.
type Waits struct {
	Counts  []uint64
	Seconds float64
}

// Cache is a cache's reads that found what they wanted (Hits) and those
// that did not since the process started, and its entries now.
type Cache struct {
	Hits, Misses uint64
	Entries      int
}

// Space is one key space's live size.
type Space struct {
	Name        string
	Keys, Bytes int64
}

// GCState sums up the garbage collection's passes.
type GCState struct {
	// Passes by result: reclaimed (freed space), nothing, skipped (for
	// want of space), failed.
	Passes               map[string]int64
	Rewritten, Reclaimed int64
}

// WatchState registers gauges that call read at each scrape.
func (s *Set) WatchState(read func() State) {
	s.registry.MustRegister(&stateCollector{read: read})
}

var (
	sonasDesc     = prometheus.NewDesc("memoria_sonas", "Sonas in the store.", nil, nil)
	memoriesDesc  = prometheus.NewDesc("memoria_memories", "Memories in the store.", nil, nil)
	indexDesc     = prometheus.NewDesc("memoria_index_entries", "Entries in each derived index.", []string{"index"}, nil)
	diskDesc      = prometheus.NewDesc("memoria_store_disk_bytes", "What the store's files take on disk (blocks allocated), by part (tables, value_log, wal, other).", []string{"part"}, nil)
	spaceDesc     = prometheus.NewDesc("memoria_store_space_bytes", "Live bytes of each key space (keys and value lengths, uncompressed), as the last pass of the garbage collection measured them.", []string{"space"}, nil)
	spaceKeysDesc = prometheus.NewDesc("memoria_store_space_keys", "Live keys of each key space, as the last pass of the garbage collection measured them.", []string{"space"}, nil)
	gcPassesDesc  = prometheus.NewDesc("memoria_store_gc_passes_total", "Passes of the store's garbage collection, by result (reclaimed, nothing, skipped, failed).", []string{"result"}, nil)
	gcFilesDesc   = prometheus.NewDesc("memoria_store_gc_rewritten_files_total", "Value-log files the garbage collection rewrote without their garbage.", nil, nil)
	gcBytesDesc   = prometheus.NewDesc("memoria_store_gc_reclaimed_bytes_total", "Bytes on disk the garbage collection's passes freed.", nil, nil)
	refusedDesc   = prometheus.NewDesc("memoria_writes_refused", "1 while writes are refused because the data directory's file system is below store.min_free_mb, else 0.", nil, nil)
	rebuildsDesc  = prometheus.NewDesc("memoria_text_index_rebuilds_total", "Full-text index rebuilds after it was found damaged (at open or while serving).", nil, nil)
	cacheHitsDesc = prometheus.NewDesc("memoria_cache_hits_total", "Reads that found what they wanted in a cache: memories (decoded memories) and metadata (store.memory_cache entries each), hot (the hot states read when a metadata record is not cached: four times as many), links (as many), blocks (Badger's block cache, store.cache_mb; zero without one: tables uncompressed).", []string{"cache"}, nil)
	cacheMissDesc = prometheus.NewDesc("memoria_cache_misses_total", "Reads that did not find what they wanted in a cache (see memoria_cache_hits_total) and read the store.", []string{"cache"}, nil)
	cacheSizeDesc = prometheus.NewDesc("memoria_cache_entries", "Entries each cache holds (see memoria_cache_hits_total).", []string{"cache"}, nil)
	packsDesc     = prometheus.NewDesc("memoria_vector_pack_bytes", "Bytes of the vector index's packs: copies of large sonas' int8 records side by side, which their searches read in sequence (at most index.pack_mb).", nil, nil)
	floatsDesc    = prometheus.NewDesc("memoria_vector_float_bytes", "Bytes of the vector index's float32 vectors in the heap (at most index.heap_vectors_mb once the graph holds them) and in its spill file beside the snapshot (those beyond, until a snapshot holds them).", []string{"where"}, nil)
	commitsDesc   = prometheus.NewDesc("memoria_store_commits_total", "Group commits of the store (one fsync each).", nil, nil)
	commitOpsDesc = prometheus.NewDesc("memoria_store_committed_ops_total", "Writes (operations) the group commits committed; over memoria_store_commits_total, the batches' mean size.", nil, nil)
	deferredDesc  = prometheus.NewDesc("memoria_store_committed_deferred_ops_total", "Of memoria_store_committed_ops_total, the writes no client waited for that waited for a group commit to share (store.defer_for): recalls' traces, responses' reinforcements, the tiers' steps, the evaluator's records.", nil, nil)
	busyDesc      = prometheus.NewDesc("memoria_store_committer_busy_seconds_total", "Seconds the committer — one goroutine, which every write goes through — spent on batches: its rate is the committer's utilisation (near 1 under a steady load: it takes what queued while it worked).", nil, nil)
	batchDesc     = prometheus.NewDesc("memoria_store_batch_duration_seconds", "How long the committer took over each batch of writes: running its operations and committing them (its sum is memoria_store_committer_busy_seconds_total). Every write of a batch waited that long, besides its wait for the batch to begin: a slow batch, such as one that met Badger's switch to a new memtable, holds back every write in it.", nil, nil)
	writeWaitDesc = prometheus.NewDesc("memoria_store_write_wait_seconds", "How long each submitted write (not the background's deferred ones) waited, by stage: queued until its batch began, batch until its batch was committed and durable (memoria_store_batch_duration_seconds, from the write's point of view), acknowledge until it was answered (the commit told to the subscribers, the operations' commit hooks run, then the acknowledged mark recorded). A write's wait for durability is their sum.", []string{"stage"}, nil)
	commitSecDesc = prometheus.NewDesc("memoria_store_commit_seconds_total", "Seconds of memoria_store_committer_busy_seconds_total spent in Badger's commits (the value log, the fsync, the memtable).", nil, nil)
	stallsDesc    = prometheus.NewDesc("memoria_store_write_stalls_total", "Times Badger held the writes back because level 0 of the store's tree was full (its compaction behind the writes; each also logged at warn): commits wait meanwhile.", nil, nil)
	stallSecDesc  = prometheus.NewDesc("memoria_store_write_stall_seconds_total", "Seconds the stalls of memoria_store_write_stalls_total lasted.", nil, nil)
	readsDesc     = prometheus.NewDesc("memoria_store_reads_open", "Read transactions of the store open now (views share one while the committer is busy).", nil, nil)
	behindDesc    = prometheus.NewDesc("memoria_store_oldest_read_commits_behind", "Commits made since the oldest open read transaction began: Badger keeps every version it may read.", nil, nil)
	writtenDesc   = prometheus.NewDesc("memoria_store_written_bytes_total", "Bytes the commits wrote into Badger (keys and values; a deletion its key; a key written twice in a batch once), by key space (its first letter and '/'; \"other\" for keys of none): the values of v/ (the embeddings) go to the value log, the rest into the tree, which its compactions rewrite level by level. Over operations, what each writes, a figure that does not move with the machine's speed.", []string{"space"}, nil)
	writtenKeys   = prometheus.NewDesc("memoria_store_written_keys_total", "Keys the commits wrote into Badger (see memoria_store_written_bytes_total), by key space.", []string{"space"}, nil)
	rerankDesc    = prometheus.NewDesc("memoria_recall_rerank_fallbacks_total", "Recalls that kept the fused order because the reranker (recall.rerank) failed or timed out.", nil, nil)
	workersDesc   = prometheus.NewDesc("memoria_recall_workers", "Recalls that may compute at once (recall.workers).", nil, nil)
	busyRecDesc   = prometheus.NewDesc("memoria_recall_workers_busy", "Recalls computing now (at most memoria_recall_workers).", nil, nil)
	waitingDesc   = prometheus.NewDesc("memoria_recall_waiting", "Recalls waiting now for a worker (recall.workers) to compute.", nil, nil)
	waitsDesc     = prometheus.NewDesc("memoria_recall_waits_total", "Recalls that waited for a worker (recall.workers).", nil, nil)
	waitSecDesc   = prometheus.NewDesc("memoria_recall_wait_seconds_total", "Seconds the recalls of memoria_recall_waits_total waited, summed.", nil, nil)
	linksBackDesc = prometheus.NewDesc("memoria_links_back_waiting", "Link lists whose links back from new memories wait in memory to be written (recall.links_hold); a crash loses none: they are read again from the new memories' own lists at the next open.", nil, nil)
	learningDesc  = prometheus.NewDesc("memoria_learning_waiting", "What recalls left behind that waits in memory to be written, which a crash would lose (learning, never a memory): co-access lists (recall.coaccess_flush), memories' touches (recall.touch_flush).", []string{"what"}, nil)
)

type stateCollector struct{ read func() State }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sonasDesc
	ch <- memoriesDesc
	ch <- indexDesc
	ch <- diskDesc
	ch <- spaceDesc
	ch <- spaceKeysDesc
	ch <- gcPassesDesc
	ch <- gcFilesDesc
	ch <- gcBytesDesc
	ch <- refusedDesc
	ch <- rebuildsDesc
	ch <- rerankDesc
	ch <- workersDesc
	ch <- busyRecDesc
	ch <- waitingDesc
	ch <- waitsDesc
	ch <- waitSecDesc
	ch <- learningDesc
	ch <- linksBackDesc
	ch <- cacheHitsDesc
	ch <- cacheMissDesc
	ch <- cacheSizeDesc
	ch <- floatsDesc
	ch <- packsDesc
	ch <- commitsDesc
	ch <- commitOpsDesc
	ch <- deferredDesc
	ch <- busyDesc
	ch <- commitSecDesc
	ch <- batchDesc
	ch <- writeWaitDesc
	ch <- stallsDesc
	ch <- stallSecDesc
	ch <- readsDesc
	ch <- behindDesc
	ch <- writtenDesc
	ch <- writtenKeys
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.read()
	ch <- prometheus.MustNewConstMetric(sonasDesc, prometheus.GaugeValue, float64(st.Sonas))
	ch <- prometheus.MustNewConstMetric(memoriesDesc, prometheus.GaugeValue, float64(st.Memories))
	for name, n := range st.Indexes {
		ch <- prometheus.MustNewConstMetric(indexDesc, prometheus.GaugeValue, float64(n), name)
	}
	for part, n := range st.Disk {
		ch <- prometheus.MustNewConstMetric(diskDesc, prometheus.GaugeValue, float64(n), part)
	}
	for _, sp := range st.Spaces {
		ch <- prometheus.MustNewConstMetric(spaceDesc, prometheus.GaugeValue, float64(sp.Bytes), sp.Name)
		ch <- prometheus.MustNewConstMetric(spaceKeysDesc, prometheus.GaugeValue, float64(sp.Keys), sp.Name)
	}
	for result, n := range st.GC.Passes {
		ch <- prometheus.MustNewConstMetric(gcPassesDesc, prometheus.CounterValue, float64(n), result)
	}
	ch <- prometheus.MustNewConstMetric(gcFilesDesc, prometheus.CounterValue, float64(st.GC.Rewritten))
	ch <- prometheus.MustNewConstMetric(gcBytesDesc, prometheus.CounterValue, float64(st.GC.Reclaimed))
	refused := 0.0
	if st.WritesRefused {
		refused = 1
	}
	ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.GaugeValue, refused)
	ch <- prometheus.MustNewConstMetric(rebuildsDesc, prometheus.CounterValue, float64(st.TextRebuilds))
	ch <- prometheus.MustNewConstMetric(rerankDesc, prometheus.CounterValue, float64(st.RerankFallbacks))
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(st.RecallWorkers.Workers))
	ch <- prometheus.MustNewConstMetric(busyRecDesc, prometheus.GaugeValue, float64(st.RecallWorkers.Busy))
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(st.RecallWorkers.Waiting))
	ch <- prometheus.MustNewConstMetric(waitsDesc, prometheus.CounterValue, float64(st.RecallWorkers.Waits))
	ch <- prometheus.MustNewConstMetric(waitSecDesc, prometheus.CounterValue, st.RecallWorkers.WaitSeconds)
	for what, n := range st.Waiting {
		ch <- prometheus.MustNewConstMetric(learningDesc, prometheus.GaugeValue, float64(n), what)
	}
	ch <- prometheus.MustNewConstMetric(linksBackDesc, prometheus.GaugeValue, float64(st.LinksBackWaiting))
	for name, c := range st.Caches {
		ch <- prometheus.MustNewConstMetric(cacheHitsDesc, prometheus.CounterValue, float64(c.Hits), name)
		ch <- prometheus.MustNewConstMetric(cacheMissDesc, prometheus.CounterValue, float64(c.Misses), name)
		ch <- prometheus.MustNewConstMetric(cacheSizeDesc, prometheus.GaugeValue, float64(c.Entries), name)
	}
	for where, n := range st.VectorFloats {
		ch <- prometheus.MustNewConstMetric(floatsDesc, prometheus.GaugeValue, float64(n), where)
	}
	ch <- prometheus.MustNewConstMetric(packsDesc, prometheus.GaugeValue, float64(st.VectorPacks))
	ch <- prometheus.MustNewConstMetric(commitsDesc, prometheus.CounterValue, float64(st.Committer.Commits))
	ch <- prometheus.MustNewConstMetric(commitOpsDesc, prometheus.CounterValue, float64(st.Committer.Ops))
	ch <- prometheus.MustNewConstMetric(deferredDesc, prometheus.CounterValue, float64(st.Committer.DeferredOps))
	ch <- prometheus.MustNewConstMetric(busyDesc, prometheus.CounterValue, st.Committer.BusySeconds)
	ch <- prometheus.MustNewConstMetric(commitSecDesc, prometheus.CounterValue, st.Committer.CommitSeconds)
	cm := st.Committer
	if h, ok := histogram(batchDesc, cm.BatchBounds, cm.Batches, cm.BusySeconds); ok {
		ch <- h
	}
	for stage, w := range cm.Waits {
		if h, ok := histogram(writeWaitDesc, cm.WaitBounds, w.Counts, w.Seconds, stage); ok {
			ch <- h
		}
	}
	ch <- prometheus.MustNewConstMetric(stallsDesc, prometheus.CounterValue, float64(st.Committer.Stalls))
	ch <- prometheus.MustNewConstMetric(stallSecDesc, prometheus.CounterValue, st.Committer.StallSeconds)
	ch <- prometheus.MustNewConstMetric(readsDesc, prometheus.GaugeValue, float64(st.Committer.ReadsOpen))
	ch <- prometheus.MustNewConstMetric(behindDesc, prometheus.GaugeValue, float64(st.Committer.OldestReadBehind))
	for space, w := range st.Committer.Written {
		ch <- prometheus.MustNewConstMetric(writtenDesc, prometheus.CounterValue, float64(w.Bytes), space)
		ch <- prometheus.MustNewConstMetric(writtenKeys, prometheus.CounterValue, float64(w.Keys), space)
	}
}

// histogram is the histogram of counts by bounds (counts[i] at most
// bounds[i] and more than the bound before, the last more than every
// bound) whose sum is sum; not ok unless there is a count for each.
func histogram(desc *prometheus.Desc, bounds []float64, counts []uint64, sum float64, labels ...string) (prometheus.Metric, bool) {
	if len(counts) != len(bounds)+1 {
		return nil, false
	}
	buckets := make(map[float64]uint64, len(bounds))
	var n uint64
	for i, le := range bounds {
		n += counts[i]
		buckets[le] = n
	}
	n += counts[len(bounds)]
	return prometheus.MustNewConstHistogram(desc, n, sum, buckets, labels...), true
}
