// Package bench measures what Memoria's users run (`memoria bench`): it
// starts the real server (`memoria serve`, through internal/loadgen) on
// loopback and drives it over HTTP with many clients — inserts, recalls,
// advances, restarts of a large store — and, in the same run, the
// references those figures are judged against: raw Badger with one fsynced
// transaction per write, exact search, coder/hnsw and chromem-go over the
// same vectors, and Memoria's own HNSW in process (its recall@10 against
// exact search).
//
// Every figure of a user-facing operation comes from the server's child
// process: latency as its clients see it, its CPU time per operation from
// /proc/<pid>/stat over the measured window, its memory from
// /proc/<pid>/status. Nothing here is a timed assertion; the report is for
// people (a table), scripts (JSON) and plots (SVG).
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/loadgen"
)

// Scenario names.
const (
	Insert  = "insert"  // POST /memories, N clients into N sonas, on an empty store
	Recall  = "recall"  // POST /sona/{uuid}/recall on a store of each size
	Advance = "advance" // POST /sona/{uuid}/chat over many sonas, the offline model
	Mixed   = "mixed"   // recalls, an insert and a chat at a time in one window, on a fresh store of each size
	Restart = "restart" // SIGTERM and SIGKILL of a store of each size, then until it serves at full speed
	ANN     = "ann"     // Memoria's HNSW in process: recall@10 against exact search
	Refs    = "refs"    // raw Badger, exact search, coder/hnsw, chromem-go
	// Forget runs only when asked for: POST /forget of a sona of
	// ForgetSize memories, ForgetRuns times.
	Forget = "forget"
	// Build is not a scenario one asks for: it is the growth of the store
	// to each size through POST /memories, reported as it happens.
	Build = "build"
)

// Scenarios are the scenarios in the order a run makes them.
var Scenarios = []string{Insert, Refs, Recall, Restart, ANN, Mixed, Advance}

// ErrOptions means the options make no run.
var ErrOptions = errors.New("bench: bad options")

// Options configure a run.
type Options struct {
	// Binary is the memoria executable started as the server.
	Binary string
	// ServerArgs are more arguments of `memoria serve` (e.g. --config FILE);
	// Env is the server's environment (default os.Environ()).
	ServerArgs []string
	Env        []string
	// ProfileDir, when set, is made if missing, and every server started
	// writes a CPU profile of its whole run there (serve --cpuprofile) and
	// a heap profile when it stops (--memprofile), named after its data
	// directory and the order it was started in: insert-1.pprof,
	// insert-1.heap.pprof, ….
	ProfileDir string
	// Trace, with ProfileDir, has every server also write a Go execution
	// trace of its run (serve --trace): insert-1.trace, ….
	Trace bool
	// Dir is the working directory: the sized store (dir/store, kept and
	// grown by later runs with the same corpus, seed and binary) and the
	// scratch stores of insert, advance and raw Badger (removed after use).
	Dir string
	// Scenarios to run (default: all), in Scenarios order whatever the
	// order given.
	Scenarios []string
	// Sizes are the store sizes (memories) of recall, restart, ann and
	// refs' searches, run in increasing order on one growing store.
	Sizes []int
	// Clients, when set, replaces every scenario's client counts (insert
	// 64; recall 1 and 16; advance 64 and 128).
	Clients []int
	// Duration of each measured window of load (10 s).
	Duration time.Duration
	// Requests, when above 0, ends each window of load once that many
	// requests were sent, if its Duration has not ended it first: a
	// comparison of work that changes with what was done (one sona's
	// advances cost more as its history grows) needs the same work.
	Requests int64
	// Rate, when above 0, offers each window of insert, recall and advance
	// that many requests a second on a fixed schedule (loadgen.Window.Rate:
	// an open loop, a request's latency counted from when it was due)
	// instead of each client sending its next request once its last was
	// answered: the latency at a given load, not at the clients' most.
	Rate float64
	// AdvanceSonas is how many sonas the advance scenario chats with
	// (10,000); StoreSonas how many the sized store's memories are spread
	// over (100, as BenchmarkRecall).
	AdvanceSonas int
	StoreSonas   int
	// AdvanceKeep keeps the advance scenario's store and its sonas in
	// Dir/advance-kept: a later run with it starts a new server on that
	// store and chats with the same sonas, its texts following on from the
	// last run's, so that the advances of sonas grown over earlier runs,
	// by other binaries or after a restart, can be measured (issue 15,
	// stop 99: a new server advanced them no faster).
	AdvanceKeep bool
	// Queries is how many searches each in-process vector index answers
	// (200; chromem-go stops after 30 s).
	Queries int
	// Seed makes texts, queries and the workload reproducible.
	Seed int64
	// Corpus is the texts (default NewSynthetic(Seed)).
	Corpus Corpus
	// Config is the servers' effective configuration (default
	// config.Default()): the in-process indexes take its index settings
	// and embedding dimensions.
	Config *config.Config
	// Token is the servers' bearer token, when their configuration asks
	// for one (it needs the write scope).
	Token string
	// Progress, when set, is told what the run is doing.
	Progress func(Progress)
	// ServerLog, when set, receives the servers' logs.
	ServerLog io.Writer
}

// Progress is one step of a run: phase, and done of total units (total 0:
// no measure of how far).
type Progress struct {
	Phase       string
	Done, Total int
}

// Defaults of Options.
const (
	DefaultDuration     = 10 * time.Second
	DefaultAdvanceSonas = 10_000
	DefaultStoreSonas   = 100
	DefaultQueries      = 200
)

// DefaultSizes keep a default run within a few minutes on a 2-core
// machine (two sizes: the plots draw lines).
var DefaultSizes = []int{10_000, 20_000}

// clientsOf are the default client counts of each scenario.
var clientsOf = map[string][]int{Insert: {64}, Recall: {1, 16}, Mixed: {16}, Advance: {64, 128}}

func (o *Options) fill() error {
	if o.Binary == "" {
		return fmt.Errorf("%w: no server binary", ErrOptions)
	}
	if o.Dir == "" {
		return fmt.Errorf("%w: no working directory", ErrOptions)
	}
	if o.Trace && o.ProfileDir == "" {
		return fmt.Errorf("%w: a server trace needs a profile directory", ErrOptions)
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) && s != Forget {
			return fmt.Errorf("%w: unknown scenario %q (have %s, %s)", ErrOptions, s, strings.Join(Scenarios, ", "), Forget)
		}
	}
	if len(o.Sizes) == 0 {
		o.Sizes = DefaultSizes
	}
	o.Sizes = slices.Clone(o.Sizes)
	slices.Sort(o.Sizes)
	o.Sizes = slices.Compact(o.Sizes)
	if o.Sizes[0] < 1 {
		return fmt.Errorf("%w: sizes must be positive", ErrOptions)
	}
	for _, c := range o.Clients {
		if c < 1 {
			return fmt.Errorf("%w: clients must be positive", ErrOptions)
		}
	}
	if o.Duration < 0 || o.Requests < 0 || o.AdvanceSonas < 0 || o.StoreSonas < 0 || o.Queries < 0 {
		return fmt.Errorf("%w: a negative duration or count", ErrOptions)
	}
	if !(o.Rate >= 0 && o.Rate <= loadgen.MaxRate) {
		return fmt.Errorf("%w: a rate of %g requests a second is not between 0 and %d", ErrOptions, o.Rate, loadgen.MaxRate)
	}
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.AdvanceSonas <= 0 {
		o.AdvanceSonas = DefaultAdvanceSonas
	}
	if o.StoreSonas <= 0 {
		o.StoreSonas = DefaultStoreSonas
	}
	if o.Queries <= 0 {
		o.Queries = DefaultQueries
	}
	if o.Corpus == nil {
		o.Corpus = NewSynthetic(o.Seed)
	}
	if o.Config == nil {
		d := config.Default()
		o.Config = &d
	}
	if o.AdvanceKeep && o.has(Advance) { // refused before anything runs
		if _, err := readKeptSonas(filepath.Join(o.Dir, keptAdvanceDir), o.AdvanceSonas); err != nil {
			return err
		}
	}
	return nil
}

func (o *Options) has(s string) bool { return slices.Contains(o.Scenarios, s) }

func (o *Options) clients(s string) []int {
	if len(o.Clients) > 0 {
		return o.Clients
	}
	return clientsOf[s]
}

// Report is a whole run. Its JSON field names are stable.
type Report struct {
	Format    string    `json:"format"` // ReportFormat
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"`
	// Command is how the run was started (set by the command line).
	Command  string   `json:"command,omitempty"`
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	Results  []Result `json:"results"`
	Notes    []string `json:"notes,omitempty"`
}

// ReportFormat names the layout of Report.
const ReportFormat = "memoria-bench/1"

// Machine describes where the run was made.
type Machine struct {
	CPUs        int    `json:"cpus"`
	CPUModel    string `json:"cpu_model,omitempty"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	GoVersion   string `json:"go_version"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15-minute load
	// averages when the run started and ended.
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
}

// Settings are the options that shape the figures.
type Settings struct {
	Scenarios       []string `json:"scenarios"`
	Sizes           []int    `json:"sizes"`
	Clients         []int    `json:"clients,omitempty"`
	DurationSeconds float64  `json:"duration_seconds"`
	Requests        int64    `json:"requests,omitempty"`
	Rate            float64  `json:"rate,omitempty"`
	AdvanceSonas    int      `json:"advance_sonas"`
	StoreSonas      int      `json:"store_sonas"`
	Queries         int      `json:"queries"`
	Seed            int64    `json:"seed"`
	Corpus          string   `json:"corpus"`
	ServerArgs      []string `json:"server_args,omitempty"`
}

// Result is one measurement. Latencies are of one operation as its client
// saw it; CPU is the server's for operations over HTTP and this process's
// for in-process ones.
type Result struct {
	Scenario string `json:"scenario"`
	// Name says what was measured, e.g. "POST /memories", "coder/hnsw".
	Name string `json:"name"`
	// Path is "http" (the server child, over loopback) or "in-process".
	Path string `json:"path"`
	// StoreSize is the memories in the store (or vectors in the index)
	// when the measurement ended.
	StoreSize int `json:"store_size"`
	Sonas     int `json:"sonas,omitempty"`
	Clients   int `json:"clients"`
	// Rate is the requests a second the window offered (Options.Rate), 0
	// for a closed loop; Unsent the requests due in it that no client was
	// free to send before it ended (the server behind the rate).
	Rate      float64 `json:"rate,omitempty"`
	Unsent    int64   `json:"unsent,omitempty"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	// ServerP50Ms and ServerP99Ms are the server's own time until its
	// answers' headers (their Server-Timing), over HTTP: the latency
	// without the loopback, the clients' decoding and their share of
	// the machine's cores.
	ServerP50Ms float64 `json:"server_p50_ms,omitempty"`
	ServerP99Ms float64 `json:"server_p99_ms,omitempty"`
	// CPUMsPerOp is the CPU time per operation of the process that did
	// the work (the server over HTTP); ClientCPUMsPerOp the clients'.
	CPUMsPerOp       float64 `json:"cpu_ms_per_op"`
	ClientCPUMsPerOp float64 `json:"client_cpu_ms_per_op,omitempty"`
	// RSS of the working process: at the start, the largest sampled, at
	// the end of the measurement.
	RSS *RSS `json:"rss,omitempty"`
	// HitRate is the share of recalls whose source memory came back.
	HitRate *float64 `json:"hit_rate,omitempty"`
	// CacheHits is each of the server's caches' share of reads that found
	// what they wanted during the window (its /metrics before and after).
	CacheHits map[string]float64 `json:"cache_hits,omitempty"`
	// CacheMissesPerOp is each cache's reads that went to the store, per
	// operation of the window: unlike the hits' share, it does not move
	// with the machine's speed, so an A/B of a cache shows in it where the
	// throughput's noise hides it.
	CacheMissesPerOp map[string]float64 `json:"cache_misses_per_op,omitempty"`
	// WrittenPerOp is the bytes the server's commits wrote into Badger
	// per operation of the window, by key space (memoria_store_written_
	// bytes_total: keys and values, the v/ values to the value log, the
	// rest into the tree): what an operation writes, which the
	// compactions then rewrite — like the cache misses, a count that does
	// not move with the machine's speed.
	WrittenPerOp map[string]float64 `json:"written_bytes_per_op,omitempty"`
	// WrittenKeysPerOp is the keys those bytes were written under, per
	// operation, by key space (memoria_store_written_keys_total): each
	// a search and an insert in Badger's memtable, whatever its size.
	WrittenKeysPerOp map[string]float64 `json:"written_keys_per_op,omitempty"`
	// Committer is the server's group committer's work over the window.
	Committer *CommitterFigures `json:"committer,omitempty"`
	// Collector is the server's garbage collector's work over the window.
	Collector *CollectorFigures `json:"collector,omitempty"`
	// PackBytes are the server's packs of large sonas' records at the
	// window's end (index.pack_mb).
	PackBytes int64 `json:"pack_bytes,omitempty"`
	// RecallAt10 is the share of exact search's 10 nearest found.
	RecallAt10 *float64 `json:"recall_at_10,omitempty"`
	// BuildSeconds is how long the index (or the store's growth) took.
	BuildSeconds *float64 `json:"build_seconds,omitempty"`
	// Restart are a restart's figures.
	Restart *RestartFigures `json:"restart,omitempty"`
	// Stretches are the tenths of a window of a minute or more, in order:
	// the requests that ended in each, the server's CPU time an operation
	// over it, its RSS and the memories it held at its end.
	Stretches []loadgen.Interval `json:"stretches,omitempty"`
	// Load1 is the machine's 1-minute load average when it ended.
	Load1         float64  `json:"load1"`
	ErrorSamples  []string `json:"error_samples,omitempty"`
	Note          string   `json:"note,omitempty"`
	ErrorStatuses string   `json:"error_statuses,omitempty"`
}

// CommitterFigures are the server's group committer's work over a window
// (its memoria_store_* counters): the share of the window it was busy
// with batches (every write goes through it), its commits a second, the
// operations a commit carried and the milliseconds a commit spent in
// Badger (value log, fsync, memtable).
type CommitterFigures struct {
	Busy         float64 `json:"busy"`
	PerSecond    float64 `json:"commits_per_s"`
	OpsPerCommit float64 `json:"ops_per_commit"`
	CommitMs     float64 `json:"commit_ms"`
	// StalledS is how long Badger held the writes back in the window
	// (level 0 of its tree full); 0 also from a server that does not
	// count it.
	StalledS float64 `json:"stalled_s"`
	// BatchesOver100ms and BatchesOver500ms are the window's batches that
	// took the committer longer than that (every write in such a batch
	// waited as long); 0 also from a server that does not count them.
	BatchesOver100ms int64 `json:"batches_over_100ms"`
	BatchesOver500ms int64 `json:"batches_over_500ms"`
	// WriteWaits are the submitted writes' mean waits by stage in the
	// window; nil from a server that does not count them.
	WriteWaits *WriteWaits `json:"write_waits,omitempty"`
}

// WriteWaits are the writes submitted and committed in a window (not the
// background's deferred ones) and how long they waited on average, by
// stage: queued until their batch began, in it until it was durable, and
// then until acknowledged (the acknowledged mark recorded).
type WriteWaits struct {
	Writes        int64   `json:"writes"`
	QueuedMs      float64 `json:"queued_ms"`
	BatchMs       float64 `json:"batch_ms"`
	AcknowledgeMs float64 `json:"acknowledge_ms"`
}

// CollectorFigures are the server's garbage collector's work over a
// window, from the Go runtime's figures on its /metrics: the collector's
// share of the CPU time the process used (the runtime's own estimates of
// both, which overstate the collector's), its cycles, what the process
// allocated per operation (kibibytes; background work included) and the
// heap its last cycle found live, at the window's end.
type CollectorFigures struct {
	CPUShare     float64 `json:"cpu_share"`
	Cycles       int64   `json:"cycles"`
	AllocKBPerOp float64 `json:"alloc_kb_per_op"`
	LiveBytes    int64   `json:"live_bytes"`
}

// RSS is a process's resident set over a measurement, in bytes.
type RSS struct {
	Start int64 `json:"start_bytes"`
	Peak  int64 `json:"peak_bytes"`
	End   int64 `json:"end_bytes"`
	// EndFile is how much of End is pages of mapped files (RssFile):
	// Badger's tables and the vector index's records, read in place, and
	// the binary's own — the page cache's, which the kernel takes back
	// under pressure (the rest is the heap, stacks and Badger's
	// memtables: RssAnon).
	EndFile int64 `json:"end_file_bytes,omitempty"`
}

// run is one run's state.
type run struct {
	o       Options
	rep     *Report
	store   *store // the sized store, once opened
	started int    // servers started (names their profiles)
}

// Run makes the measurements o asks for and reports them. A failure to
// set a measurement up (a server that does not start, a write refused)
// ends the run with an error and the report so far; failed requests
// within a measurement are counted in it.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: --server-profiles: %v", ErrOptions, err)
		}
	}
	r := &run{o: o, rep: &Report{Format: ReportFormat, StartedAt: time.Now().UTC(), Machine: machine()}}
	r.rep.Settings = Settings{Scenarios: o.Scenarios, Sizes: o.Sizes, Clients: o.Clients, DurationSeconds: o.Duration.Seconds(),
		Requests: o.Requests, Rate: o.Rate, AdvanceSonas: o.AdvanceSonas, StoreSonas: o.StoreSonas, Queries: o.Queries, Seed: o.Seed, Corpus: o.Corpus.Name(), ServerArgs: o.ServerArgs}
	err := r.all(ctx)
	if r.store != nil {
		if cerr := r.store.close(); err == nil {
			err = cerr
		}
	}
	r.rep.Machine.LoadEnd = loadAvg()
	r.rep.Seconds = time.Since(r.rep.StartedAt).Seconds()
	return r.rep, err
}

func (r *run) all(ctx context.Context) error {
	o := &r.o
	if o.has(Insert) {
		for _, n := range o.clients(Insert) {
			if err := r.insert(ctx, n); err != nil {
				return err
			}
			if o.has(Refs) { // the reference in the same minutes
				if err := r.badger(ctx, n); err != nil {
					return err
				}
			}
		}
	} else if o.has(Refs) {
		if err := r.badger(ctx, o.clients(Insert)[0]); err != nil {
			return err
		}
	}
	if o.has(Recall) || o.has(Restart) || o.has(ANN) || o.has(Refs) {
		for _, size := range o.Sizes {
			if err := r.sized(ctx, size); err != nil {
				return err
			}
		}
	}
	if o.has(Mixed) {
		for _, size := range o.Sizes {
			if err := r.mixed(ctx, size); err != nil {
				return err
			}
		}
	}
	if o.has(Advance) {
		if err := r.advance(ctx); err != nil {
			return err
		}
	}
	if o.has(Forget) {
		return r.forget(ctx)
	}
	return nil
}

// sized makes the measurements at one store size.
func (r *run) sized(ctx context.Context, size int) error {
	o := &r.o
	if o.has(Recall) || o.has(Restart) {
		if err := r.grow(ctx, size); err != nil {
			return err
		}
		if o.has(Restart) {
			for _, kill := range []bool{false, true} {
				if err := r.restart(ctx, kill); err != nil {
					return err
				}
			}
		}
		if o.has(Recall) {
			for _, n := range o.clients(Recall) {
				if err := r.recall(ctx, n); err != nil {
					return err
				}
			}
		}
	}
	if o.has(ANN) || o.has(Refs) {
		return r.vectors(ctx, size)
	}
	return nil
}

func (r *run) progress(phase string, done, total int) {
	if r.o.Progress != nil {
		r.o.Progress(Progress{Phase: phase, Done: done, Total: total})
	}
}

func (r *run) add(res Result) {
	res.Load1 = loadAvg()[0]
	r.rep.Results = append(r.rep.Results, res)
}

func (r *run) note(format string, args ...any) {
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf(format, args...))
}

// startServer starts `memoria serve` on dir and waits until /healthz
// answers.
func (r *run) startServer(ctx context.Context, dir string) (*loadgen.Server, error) {
	srv, err := r.launch(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := srv.WaitHealthy(ctx); err != nil {
		srv.Kill()
		return nil, err
	}
	return srv, nil
}

// launch starts `memoria serve` on dir (with a CPU profile when asked).
func (r *run) launch(ctx context.Context, dir string) (*loadgen.Server, error) {
	args := r.o.ServerArgs
	if r.o.ProfileDir != "" {
		r.started++
		name := filepath.Join(r.o.ProfileDir, fmt.Sprintf("%s-%d", filepath.Base(dir), r.started))
		args = append(slices.Clone(args), loadgen.ProfileArgs(name)...)
		if r.o.Trace {
			args = append(args, "--trace", name+".trace")
		}
	}
	return loadgen.StartServer(ctx, loadgen.ServerOptions{Binary: r.o.Binary, DataDir: dir, Args: args,
		Env: r.o.Env, Stderr: r.o.ServerLog})
}

// client is a client of srv for single requests.
func (r *run) client(srv *loadgen.Server) *client.Client {
	return client.New(srv.URL, nil).WithToken(r.o.Token)
}

// scratch returns an empty directory under the working directory.
func (r *run) scratch(name string) (string, error) {
	dir := filepath.Join(r.o.Dir, name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// scratchServer starts a server on an empty scratch directory; stop
// stops it and removes the directory.
func (r *run) scratchServer(ctx context.Context, name string) (srv *loadgen.Server, stop func(), err error) {
	dir, err := r.scratch(name)
	if err != nil {
		return nil, nil, err
	}
	if srv, err = r.startServer(ctx, dir); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return srv, func() {
		srv.Stop(5 * time.Minute)
		os.RemoveAll(dir)
	}, nil
}

// fromLoad turns a load report of one operation into a result.
func fromLoad(scenario string, rep *loadgen.Report) Result {
	res := Result{Scenario: scenario, Path: "http", Clients: rep.Clients, Rate: rep.Rate, Unsent: rep.Unsent, Ops: rep.Requests, Errors: rep.Errors,
		Seconds: rep.Seconds, PerSecond: rep.PerSecond, CPUMsPerOp: rep.ServerCPUPerRequestMs,
		ClientCPUMsPerOp: rep.ClientCPUPerRequestMs, ErrorSamples: rep.ErrorSamples, Stretches: rep.Intervals}
	if len(rep.Routes) > 0 {
		res.withRoute(rep.Routes[0])
	}
	if n := len(rep.Memory); n > 0 {
		end := rep.Memory[n-1]
		res.RSS = &RSS{Start: rep.Memory[0].RSS, Peak: rep.PeakRSS, End: end.RSS, EndFile: end.File}
	}
	if rep.Errors > 0 {
		var parts []string
		for k, v := range rep.ErrorsByStatus {
			parts = append(parts, fmt.Sprintf("%s: %d", k, v))
		}
		slices.Sort(parts)
		res.ErrorStatuses = strings.Join(parts, ", ")
	}
	return res
}

// withRoute gives res the latency of rt's answers.
func (res *Result) withRoute(rt loadgen.RouteReport) {
	res.Name, res.P50Ms, res.P99Ms, res.MaxMs = rt.Route, rt.P50Ms, rt.P99Ms, rt.MaxMs
	res.ServerP50Ms, res.ServerP99Ms = rt.ServerP50Ms, rt.ServerP99Ms
}

// machine describes this machine.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				m.MemoryBytes = kb << 10
			}
		}
	}
	return m
}

// loadAvg reads the 1, 5 and 15-minute load averages (zeros if unknown).
func loadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// ParseSize reads a store size: 10000, 10k, 1.5m, 1m.
func ParseSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1e3, strings.TrimSuffix(t, "k")
	case strings.HasSuffix(t, "m"):
		mult, t = 1e6, strings.TrimSuffix(t, "m")
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || f*mult > 1e9 || f*mult != float64(int(f*mult)) {
		return 0, fmt.Errorf("%w: size %q: want a positive count such as 10000, 10k or 1m", ErrOptions, s)
	}
	return int(f * mult), nil
}

// FormatSize writes a size as ParseSize reads it, shortest first.
func FormatSize(n int) string {
	switch {
	case n >= 1e6 && n%1e5 == 0:
		return strconv.FormatFloat(float64(n)/1e6, 'f', -1, 64) + "m"
	case n >= 1e3 && n%100 == 0:
		return strconv.FormatFloat(float64(n)/1e3, 'f', -1, 64) + "k"
	}
	return strconv.Itoa(n)
}
