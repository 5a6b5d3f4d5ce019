package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/messages"
)

// insert measures POST /memories on an empty store: clients clients, each
// inserting into its own sona (the dedup search included: the path users
// hit).
func (r *run) insert(ctx context.Context, clients int) error {
	srv, stop, err := r.scratchServer(ctx, "insert")
	if err != nil {
		return err
	}
	defer stop()
	c, closeClient := loadgen.NewClient(srv.URL, r.o.Token, clients)
	defer closeClient()
	sonas, err := createSonas(ctx, c, clients, "insert-%d", nil)
	if err != nil {
		return err
	}
	var next, dups atomic.Int64
	req := func(ctx context.Context, i int, _ *rand.Rand) (loadgen.Op, error) {
		resp, err := insertText(ctx, c, sonas[i], r.o.Corpus.Text(int(next.Add(1)-1)))
		if err == nil && (resp.Deduplicated || resp.Existed) {
			dups.Add(1)
		}
		return loadgen.OpInsert, err
	}
	res := r.measure(ctx, Insert, fmt.Sprintf("insert: %d clients", clients), srv, loadgen.Window{Clients: clients, Duration: r.o.Duration, Requests: r.o.Requests,
		Seed: r.o.Seed, Server: srv.Sample}, req)
	res.Sonas = clients
	if h, err := r.client(srv).Health(ctx); err == nil {
		res.StoreSize = int(h.Memories)
	}
	res.Note = fmt.Sprintf("%d clients into %d sonas from an empty store; %d of the inserts were folded into a near-duplicate", clients, clients, dups.Load())
	r.add(res)
	return nil
}

// recall measures POST /sona/{uuid}/recall on the sized store: each query
// is four words of a memory the store holds, asked in its sona.
func (r *run) recall(ctx context.Context, clients int) error {
	s := r.store
	c, closeClient := loadgen.NewClient(s.srv.URL, r.o.Token, clients)
	defer closeClient()
	var hits atomic.Int64
	req := func(ctx context.Context, _ int, rng *rand.Rand) (loadgen.Op, error) {
		i := s.pick(rng)
		return recallText(ctx, c, s.sona(i), r.o.Corpus.Text(i), rng, &hits)
	}
	res := r.measure(ctx, Recall, fmt.Sprintf("recall: %s, %d clients", FormatSize(s.man.Memories), clients), s.srv,
		loadgen.Window{Clients: clients, Duration: r.o.Duration, Requests: r.o.Requests, Seed: r.o.Seed, Server: s.srv.Sample}, req)
	res.StoreSize, res.Sonas = s.man.Memories, len(s.man.Sonas)
	if res.Ops > 0 {
		h := float64(hits.Load()) / float64(res.Ops)
		res.HitRate = &h
	}
	r.add(res)
	return nil
}

// recallText asks sona for four words of text (Query) and counts in hits
// a recall that brought back a memory of text. Of the answer it reads only
// the memories' contents (hasContent): the clients share the server's
// cores, and protojson's decoding of a whole answer (client.Recall) took a
// quarter of the CPU a recall cost at 100k memories.
func recallText(ctx context.Context, c *client.Client, sona, text string, rng *rand.Rand, hits *atomic.Int64) (loadgen.Op, error) {
	body, err := c.RecallJSON(ctx, sona, &messages.RecallRequest{Query: Query(text, rng)})
	if err != nil {
		return loadgen.OpRecall, err
	}
	found, err := hasContent(body, text)
	if err != nil {
		return loadgen.OpRecall, fmt.Errorf("bench: bad recall answer: %w", err)
	}
	if found {
		hits.Add(1)
	}
	return loadgen.OpRecall, nil
}

// hasContent tells whether a JSON document has a "content" member whose
// value is the string text, reading only those members: a key is never
// found inside a string, whose quotes are escaped.
func hasContent(doc []byte, text string) (bool, error) {
	const key = `"content":`
	for {
		at := bytes.Index(doc, []byte(key))
		if at < 0 {
			return false, nil
		}
		doc = bytes.TrimLeft(doc[at+len(key):], " \t\r\n")
		if len(doc) == 0 || doc[0] != '"' {
			continue // not a string
		}
		end, escaped := 1, false
		for ; end < len(doc) && doc[end] != '"'; end++ {
			if doc[end] == '\\' {
				escaped = true
				end++
			}
		}
		if end >= len(doc) {
			return false, errors.New("a string without its end")
		}
		if !escaped {
			if string(doc[1:end]) == text {
				return true, nil
			}
		} else {
			var s string
			if err := json.Unmarshal(doc[:end+1], &s); err != nil {
				return false, err
			}
			if s == text {
				return true, nil
			}
		}
		doc = doc[end+1:]
	}
}

// advance measures POST /sona/{uuid}/chat (the offline model unless the
// server's configuration names another) over AdvanceSonas sonas made on
// an empty store, or kept from an earlier run (AdvanceKeep).
func (r *run) advance(ctx context.Context) (err error) {
	var (
		srv  *loadgen.Server
		stop func()
		kept *keptSonas
	)
	n := r.o.AdvanceSonas
	if r.o.AdvanceKeep {
		dir := filepath.Join(r.o.Dir, keptAdvanceDir)
		if kept, err = readKeptSonas(dir, n); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if srv, err = r.startServer(ctx, dir); err != nil {
			return err
		}
		stop = func() { srv.Stop(5 * time.Minute) }
	} else if srv, stop, err = r.scratchServer(ctx, "advance"); err != nil {
		return err
	}
	defer stop()
	most := slices.Max(r.o.clients(Advance))
	c, closeClient := loadgen.NewClient(srv.URL, r.o.Token, most)
	defer closeClient()
	start := time.Now()
	var sonas []string
	var next atomic.Int64
	continued := kept != nil && len(kept.Sonas) > 0
	if continued {
		sonas = kept.Sonas
		next.Store(kept.Chats)
	} else if sonas, err = createSonas(ctx, c, n, "advance-%d", func(m int) { r.progress("advance: sonas", m, n) }); err != nil {
		return err
	}
	if kept != nil {
		kept.Sonas = sonas
		defer func() { // the texts sent so far: the next run follows on
			kept.Chats = next.Load()
			if werr := kept.write(); werr != nil && err == nil {
				err = werr
			}
		}()
		if err := kept.write(); err != nil { // before the first chat: the sonas are made
			return err
		}
	}
	made := time.Since(start)
	for _, clients := range r.o.clients(Advance) {
		req := func(ctx context.Context, _ int, rng *rand.Rand) (loadgen.Op, error) {
			_, err := c.Chat(ctx, sonas[rng.IntN(len(sonas))], &messages.ChatRequest{
				Content: r.o.Corpus.Text(int(next.Add(1) - 1)), Name: "user"})
			return loadgen.OpChat, err
		}
		res := r.measure(ctx, Advance, fmt.Sprintf("advance: %d sonas, %d clients", n, clients), srv,
			loadgen.Window{Clients: clients, Duration: r.o.Duration, Requests: r.o.Requests, Seed: r.o.Seed, Server: srv.Sample}, req)
		res.Sonas = n
		if h, err := r.client(srv).Health(ctx); err == nil {
			res.StoreSize = int(h.Memories)
		}
		res.Note = fmt.Sprintf("%d sonas made over HTTP in %.1f s before the first window; each chat stores 2 memories", n, made.Seconds())
		if continued {
			res.Note = fmt.Sprintf("%d sonas kept from an earlier run (--advance-keep), %d chats sent to them before, a new server on their store; each chat stores 2 memories", n, kept.Chats)
		}
		r.add(res)
	}
	return nil
}

// keptAdvanceDir is where AdvanceKeep keeps the advance scenario's store
// in Options.Dir, with its sonas (keptSonasFile).
const (
	keptAdvanceDir = "advance-kept"
	keptSonasFile  = "bench-sonas.json"
)

// keptSonas are the sonas of a kept advance store and the texts sent to
// them so far.
type keptSonas struct {
	dir   string
	Sonas []string `json:"sonas"`
	Chats int64    `json:"chats"`
}

// readKeptSonas reads the sonas kept in dir (none yet: an empty list),
// refusing a store kept for another number of them than n.
func readKeptSonas(dir string, n int) (*keptSonas, error) {
	k := &keptSonas{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, keptSonasFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(filepath.Join(dir, "store")); serr == nil {
			return nil, fmt.Errorf("%w: %s holds a store but not its sonas (%s): remove it to begin again", ErrOptions, dir, keptSonasFile)
		}
		return k, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, k); err != nil || len(k.Sonas) == 0 || k.Chats < 0 {
		return nil, fmt.Errorf("%w: %s: not a list of kept sonas", ErrOptions, filepath.Join(dir, keptSonasFile))
	}
	if len(k.Sonas) != n {
		return nil, fmt.Errorf("%w: the advance store kept in %s has %d sonas, not --advance-sonas %d", ErrOptions, dir, len(k.Sonas), n)
	}
	return k, nil
}

// write records k, whole or not at all.
func (k *keptSonas) write() error {
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return writeWhole(filepath.Join(k.dir, keptSonasFile), b)
}

// measure runs a window of load on srv and makes its result, with the
// server's caches' hit ratios, its committer's and its collector's work
// over the window.
func (r *run) measure(ctx context.Context, scenario, phase string, srv *loadgen.Server, w loadgen.Window, req loadgen.Request) Result {
	if r.o.Rate > 0 {
		w.Rate = r.o.Rate
		phase += fmt.Sprintf(" at %g/s", r.o.Rate)
	}
	res, _ := r.measureLoad(ctx, scenario, phase, srv, w, req)
	return res
}

// measureLoad is measure with the window's report (its routes).
func (r *run) measureLoad(ctx context.Context, scenario, phase string, srv *loadgen.Server, w loadgen.Window, req loadgen.Request) (Result, *loadgen.Report) {
	if w.Every = tenths(w.Duration); w.Every > 0 {
		w.Stored = loadgen.StoredIn(r.client(srv))
	}
	before := r.readServer(ctx, srv.URL)
	rep := r.window(ctx, phase, w, req)
	res := fromLoad(scenario, rep)
	after := r.readServer(ctx, srv.URL)
	if before != nil && after != nil {
		res.CacheHits = hitRatios(before.caches, after.caches)
		res.CacheMissesPerOp = missesPerOp(before.caches, after.caches, res.Ops)
		res.WrittenPerOp = perOp(before.written, after.written, res.Ops)
		res.WrittenKeysPerOp = perOp(before.writtenKeys, after.writtenKeys, res.Ops)
		res.Committer = committerFigures(before, after)
		res.Collector = collectorFigures(before, after, res.Ops)
	}
	if after != nil {
		res.PackBytes = int64(after.values[packsFamily])
	}
	return res, rep
}

// tenths is the length of the stretches a window of d is also reported
// in (Result.Stretches): a tenth of it from a minute on, else none. Over
// minutes the store and the sonas grow, and a window's mean hides how
// its rate and its CPU an operation move: twenty minutes of advances
// averaged 175 /s while their last five minutes made 55–111 /s (issue 15, stop 94).
func tenths(d time.Duration) time.Duration {
	if d < time.Minute {
		return 0
	}
	return d / windowTenths
}

// windowTenths is how many stretches tenths cuts a window into.
const windowTenths = 10

// serverReading is what the bench reads of a server's /metrics: each
// cache's hits and misses (memoria_cache_hits_total,
// memoria_cache_misses_total), the committer's counters
// (memoria_store_commits_total, …) and the Go runtime's figures of its
// collector (go_cpu_classes_gc_total_cpu_seconds_total, …), and when.
type serverReading struct {
	at          time.Time
	caches      map[string][2]float64
	written     map[string]float64 // memoria_store_written_bytes_total by space
	writtenKeys map[string]float64 // memoria_store_written_keys_total by space
	values      map[string]float64 // the committer's and the collector's, by family
}

// committerFamilies are the committer's counters on /metrics; the last,
// the stalls', an older server lacks.
var committerFamilies = []string{"memoria_store_commits_total", "memoria_store_committed_ops_total",
	"memoria_store_committer_busy_seconds_total", "memoria_store_commit_seconds_total", stallFamily}

const stallFamily = "memoria_store_write_stall_seconds_total"

// batchFamilies are the series of the committer's batch times on /metrics
// that the bench reads (a server older than stop 59 of issue 15 lacks
// them): all its batches, those within 100 ms and within 500 ms.
var batchFamilies = []string{"memoria_store_batch_duration_seconds_count",
	`memoria_store_batch_duration_seconds_bucket{le="0.1"}`, `memoria_store_batch_duration_seconds_bucket{le="0.5"}`}

// writeWaitFamilies are the sums and counts of the submitted writes'
// waits by stage on /metrics (a server older than stop 64 of issue 15
// lacks them), in the order of WriteWaits' fields.
var writeWaitFamilies = func() []string {
	var out []string
	for _, stage := range metrics.WriteStages {
		out = append(out, `memoria_store_write_wait_seconds_sum{stage="`+stage+`"}`, `memoria_store_write_wait_seconds_count{stage="`+stage+`"}`)
	}
	return out
}()

// collectorFamilies are the Go runtime's figures of the collector and the
// heap on /metrics (internal/metrics): what the process allocated, the
// collector's cycles, the runtime's estimates of the CPU time its
// collector took, of the CPU time there was and of what was idle, and the
// heap its last cycle found live. A server older than stop 50 of issue 15
// lacks the last four.
var collectorFamilies = []string{"go_memstats_alloc_bytes_total", "go_gc_duration_seconds_count",
	"go_cpu_classes_gc_total_cpu_seconds_total", "go_cpu_classes_total_cpu_seconds_total",
	"go_cpu_classes_idle_cpu_seconds_total", "go_gc_heap_live_bytes"}

// writtenFamily and writtenKeysFamily are the bytes and the keys the
// commits wrote by key space (a server older than stop 83 of issue 15
// lacks them).
const (
	writtenFamily     = "memoria_store_written_bytes_total"
	writtenKeysFamily = "memoria_store_written_keys_total"
)

// packsFamily is the bytes of the vector index's packs of large sonas'
// records (a server older than stop 72 of issue 15 lacks it).
const packsFamily = "memoria_vector_pack_bytes"

// labelValue reads a line of /metrics of family with the one label
// label (family{label="name"} value): the name and the value.
func labelValue(line, family, label string) (name string, v float64, ok bool) {
	rest, ok := strings.CutPrefix(line, family+`{`+label+`="`)
	if !ok {
		return "", 0, false
	}
	name, value, ok := strings.Cut(rest, `"} `)
	if !ok {
		return "", 0, false
	}
	v, err := strconv.ParseFloat(value, 64)
	return name, v, err == nil
}

// readServer reads the server's /metrics; nil when it cannot.
func (r *run) readServer(ctx context.Context, url string) *serverReading {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil
	}
	if r.o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.o.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	out := &serverReading{at: time.Now(), caches: map[string][2]float64{}, written: map[string]float64{}, writtenKeys: map[string]float64{}, values: map[string]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, family := range []string{"memoria_cache_hits_total", "memoria_cache_misses_total"} {
			if name, v, ok := labelValue(line, family, "cache"); ok {
				e := out.caches[name]
				e[i] = v
				out.caches[name] = e
			}
		}
		if space, v, ok := labelValue(line, writtenFamily, "space"); ok {
			out.written[space] = v
		}
		if space, v, ok := labelValue(line, writtenKeysFamily, "space"); ok {
			out.writtenKeys[space] = v
		}
		if family, value, ok := strings.Cut(line, " "); ok && (slices.Contains(committerFamilies, family) || slices.Contains(batchFamilies, family) || slices.Contains(writeWaitFamilies, family) || slices.Contains(collectorFamilies, family) || family == packsFamily) {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out.values[family] = v
			}
		}
	}
	return out
}

// committerFigures is the committer's work between two readings; nil
// when a reading lacks its counters (the stalls' may be missing: none
// counted) or it made no commit.
func committerFigures(before, after *serverReading) *CommitterFigures {
	d, ok := deltas(before, after, committerFamilies, stallFamily)
	if !ok {
		return nil
	}
	commits := d["memoria_store_commits_total"]
	wall := after.at.Sub(before.at).Seconds()
	if commits <= 0 || wall <= 0 {
		return nil
	}
	f := &CommitterFigures{
		Busy:         d["memoria_store_committer_busy_seconds_total"] / wall,
		PerSecond:    commits / wall,
		OpsPerCommit: d["memoria_store_committed_ops_total"] / commits,
		CommitMs:     1000 * d["memoria_store_commit_seconds_total"] / commits,
		StalledS:     d[stallFamily],
	}
	if b, ok := deltas(before, after, batchFamilies, ""); ok {
		all := b[batchFamilies[0]]
		f.BatchesOver100ms, f.BatchesOver500ms = int64(all-b[batchFamilies[1]]), int64(all-b[batchFamilies[2]])
	}
	if w, ok := deltas(before, after, writeWaitFamilies, ""); ok && w[writeWaitFamilies[1]] > 0 {
		mean := func(stage int) float64 {
			return 1000 * w[writeWaitFamilies[2*stage]] / w[writeWaitFamilies[2*stage+1]]
		}
		f.WriteWaits = &WriteWaits{Writes: int64(w[writeWaitFamilies[1]]), QueuedMs: mean(0), BatchMs: mean(1), AcknowledgeMs: mean(2)}
	}
	return f
}

// collectorFigures are the collector's work between two readings over ops
// operations; nil when a reading lacks a figure (a server older than
// stop 50 of issue 15) or there was no operation.
func collectorFigures(before, after *serverReading, ops int64) *CollectorFigures {
	d, ok := deltas(before, after, collectorFamilies, "")
	if !ok || ops <= 0 {
		return nil
	}
	f := &CollectorFigures{
		Cycles:       int64(d["go_gc_duration_seconds_count"]),
		AllocKBPerOp: d["go_memstats_alloc_bytes_total"] / 1024 / float64(ops),
		LiveBytes:    int64(after.values["go_gc_heap_live_bytes"]),
	}
	if used := d["go_cpu_classes_total_cpu_seconds_total"] - d["go_cpu_classes_idle_cpu_seconds_total"]; used > 0 {
		f.CPUShare = d["go_cpu_classes_gc_total_cpu_seconds_total"] / used
	}
	return f
}

// deltas are each of families' change between two readings; false when
// a reading lacks one other than optional (which is then left out).
func deltas(before, after *serverReading, families []string, optional string) (map[string]float64, bool) {
	d := map[string]float64{}
	for _, family := range families {
		b, ok := before.values[family]
		a, ok2 := after.values[family]
		if !ok || !ok2 {
			if family == optional {
				continue
			}
			return nil, false
		}
		d[family] = a - b
	}
	return d, true
}

// hitRatios are each cache's hits over its reads between two readings;
// nil when either is missing or no cache was read.
func hitRatios(before, after map[string][2]float64) map[string]float64 {
	if before == nil || after == nil {
		return nil
	}
	out := map[string]float64{}
	for name, a := range after {
		b := before[name]
		hits, misses := a[0]-b[0], a[1]-b[1]
		if hits+misses > 0 {
			out[name] = hits / (hits + misses)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// missesPerOp is each cache's misses between before and after per one of
// ops operations (nil without either reading or operations).
func missesPerOp(before, after map[string][2]float64, ops int64) map[string]float64 {
	if before == nil || after == nil || ops <= 0 {
		return nil
	}
	out := map[string]float64{}
	for name, a := range after {
		out[name] = (a[1] - before[name][1]) / float64(ops)
	}
	return out
}

// perOp is each counter's growth between before and after per one of
// ops operations (nil without either reading, operations or counters).
func perOp(before, after map[string]float64, ops int64) map[string]float64 {
	if len(after) == 0 || before == nil || ops <= 0 {
		return nil
	}
	out := make(map[string]float64, len(after))
	for name, a := range after {
		out[name] = (a - before[name]) / float64(ops)
	}
	return out
}

// window runs a window of load with a progress bar of its seconds.
func (r *run) window(ctx context.Context, phase string, w loadgen.Window, req loadgen.Request) *loadgen.Report {
	stop := r.ticking(phase, w.Duration)
	defer stop()
	return loadgen.Drive(ctx, w, req)
}

// ticking reports the seconds elapsed of a phase of length d until the
// returned function is called.
func (r *run) ticking(phase string, d time.Duration) func() {
	total := int(d.Seconds())
	r.progress(phase, 0, total)
	stop := loadgen.EverySecond(d, func(s int) { r.progress(phase, s, total) })
	return func() {
		stop()
		r.progress(phase, total, total)
	}
}

// Idleness: the server is idle once it used less than idleShare of a core
// (more than what a probe costs, when one runs) over idleSpan: its
// background work — index building, evaluation, compaction — is done.
// waitIdle gives up after idleTimeout.
const (
	idleShare   = 0.10
	idleSpan    = 3 * time.Second
	idleTimeout = 30 * time.Minute
)

// quiet finds the first span of idleSpan over which a process used less
// than share cores.
type quiet struct {
	share   float64
	samples []loadgen.ProcSample
}

// add takes a sample and returns when the quiet span began, once there
// is one.
func (q *quiet) add(s loadgen.ProcSample) (time.Time, bool) {
	q.samples = append(q.samples, s)
	for j := len(q.samples) - 1; j >= 0; j-- {
		old := q.samples[j]
		if s.At.Sub(old.At) < idleSpan {
			continue
		}
		q.samples = q.samples[j:]
		if float64(s.CPU-old.CPU) < q.share*float64(s.At.Sub(old.At)) {
			return old.At, true
		}
		break
	}
	return time.Time{}, false
}

// waitIdle waits until srv is idle and returns when its quiet span began.
// It fails when the server exits; after idleTimeout it notes so and
// returns the present.
func (r *run) waitIdle(ctx context.Context, srv *loadgen.Server, phase string) (time.Time, error) {
	start := time.Now()
	q := &quiet{share: idleShare}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		s, err := srv.Sample()
		if err != nil {
			return time.Time{}, fmt.Errorf("bench: %s: %w (%s)", phase, err, srv.LastLog())
		}
		if at, ok := q.add(s); ok {
			return at, nil
		}
		if time.Since(start) > idleTimeout {
			r.note("%s: the server was still busy after %s", phase, idleTimeout)
			return time.Now(), nil
		}
		r.progress(phase, int(time.Since(start).Seconds()), 0)
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-srv.Exited():
			return time.Time{}, fmt.Errorf("bench: %s: %w (%v): %s", phase, loadgen.ErrExited, srv.Err(), srv.LastLog())
		case <-t.C:
		}
	}
}
