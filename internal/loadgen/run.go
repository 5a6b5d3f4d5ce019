package loadgen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/messages"
)

// Op is one kind of request of the workload.
type Op string

// The operations of the workload, and the routes they call.
const (
	OpInsert Op = "insert" // POST /memories
	OpRecall Op = "recall" // POST /sona/{uuid}/recall
	OpChat   Op = "chat"   // POST /sona/{uuid}/chat (the offline model unless configured)
	OpGet    Op = "get"    // GET /memory/{cid}
	OpList   Op = "list"   // GET /memories/list?sona=
)

// Ops are every operation, in report order.
var Ops = []Op{OpInsert, OpRecall, OpChat, OpGet, OpList}

var routes = map[Op]string{
	OpInsert: "POST /memories",
	OpRecall: "POST /sona/{uuid}/recall",
	OpChat:   "POST /sona/{uuid}/chat",
	OpGet:    "GET /memory/{cid}",
	OpList:   "GET /memories/list",
}

// Mix weighs the operations: each request is one of them, drawn with
// probability weight / sum of weights.
type Mix map[Op]int

// DefaultMix is a read-mostly agent workload with steady writes.
func DefaultMix() Mix {
	return Mix{OpInsert: 25, OpRecall: 30, OpChat: 10, OpGet: 25, OpList: 10}
}

// ParseMix reads "insert=25,recall=30,chat=10,get=25,list=10"; operations
// left out get weight 0.
func ParseMix(s string) (Mix, error) {
	m := Mix{}
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(strings.TrimSpace(w))
		op := Op(strings.TrimSpace(name))
		if !ok || err != nil || n < 0 || !slices.Contains(Ops, op) {
			return nil, fmt.Errorf("loadgen: mix: want op=weight pairs of %s, got %q", opNames(), part)
		}
		m[op] = n
	}
	return m, m.validate()
}

func (m Mix) validate() error {
	total := 0
	for op, w := range m {
		if w < 0 || !slices.Contains(Ops, op) {
			return fmt.Errorf("loadgen: mix: bad weight %s=%d", op, w)
		}
		total += w
	}
	if total == 0 {
		return fmt.Errorf("loadgen: mix: every weight is 0")
	}
	return nil
}

func (m Mix) String() string {
	var parts []string
	for _, op := range Ops {
		if m[op] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", op, m[op]))
		}
	}
	return strings.Join(parts, ",")
}

func (m Mix) pick(rng *rand.Rand) Op {
	total := 0
	for _, op := range Ops {
		total += m[op]
	}
	n := rng.IntN(total)
	for _, op := range Ops {
		if n < m[op] {
			return op
		}
		n -= m[op]
	}
	panic("unreachable")
}

func opNames() string {
	names := make([]string, len(Ops))
	for i, op := range Ops {
		names[i] = string(op)
	}
	return strings.Join(names, ", ")
}

// Options configure a load run.
type Options struct {
	// URL of the server, and its bearer token (may be empty).
	URL, Token string
	// Clients is how many clients send requests concurrently, each one
	// after the other on its own connection.
	Clients int
	// Duration of the load (setup not counted).
	Duration time.Duration
	// Rate, when above 0, offers that many requests a second on a fixed
	// schedule instead (Window.Rate).
	Rate float64
	// Sonas the clients spread over; each gets SeedMemories memories
	// before the load starts, so reads find something from the start.
	Sonas        int
	SeedMemories int
	Mix          Mix
	// Seed makes the workload (which op, which sona, which words) reproducible.
	Seed int64
	// Server, when set, is sampled during the load: the server's CPU time
	// and memory (see Window.Server).
	Server func() (ProcSample, error)
	// Every, when above 0, also reports the load in stretches of that
	// length (Report.Intervals), each with the memories the server holds at
	// its end; OnInterval, when set, is given each as it ends.
	Every      time.Duration
	OnInterval func(Interval)
}

// Report is the outcome of a run.
type Report struct {
	Clients int `json:"clients"`
	// Rate is the requests a second offered (Window.Rate), 0 for clients
	// each sending its next request once its last was answered; Unsent
	// are the requests due within the window that no client was free to
	// send before it ended.
	Rate     float64 `json:"rate,omitempty"`
	Unsent   int64   `json:"unsent,omitempty"`
	Sonas    int     `json:"sonas,omitempty"`
	Mix      string  `json:"mix,omitempty"`
	Seed     int64   `json:"seed"`
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	// PerSecond is the throughput: requests completed per second.
	PerSecond float64 `json:"requests_per_second"`
	// Errors are answers other than 2xx and requests that got no answer;
	// ErrorsByStatus counts them by status ("transport": no answer).
	Errors         int64            `json:"errors"`
	ErrorsByStatus map[string]int64 `json:"errors_by_status"`
	// ErrorSamples are the first few distinct error messages.
	ErrorSamples []string       `json:"error_samples,omitempty"`
	Routes       []RouteReport  `json:"routes"`
	Intervals    []Interval     `json:"intervals,omitempty"`
	Memory       []MemorySample `json:"server_memory,omitempty"`
	// PeakRSS is the largest resident set of the server sampled during
	// the load (every 250 ms, and at its start and end).
	PeakRSS int64 `json:"server_rss_peak_bytes,omitempty"`
	// ServerCPUSeconds is the CPU time (user + system, all threads) the
	// server used during the load; ServerCPUPerRequestMs divides it by
	// the requests. ClientCPUPerRequestMs is the same for this process,
	// the clients (on the same machine, they take CPU from the server).
	ServerCPUSeconds      float64 `json:"server_cpu_seconds,omitempty"`
	ServerCPUPerRequestMs float64 `json:"server_cpu_ms_per_request,omitempty"`
	ClientCPUPerRequestMs float64 `json:"client_cpu_ms_per_request"`
}

// RouteReport is one operation's figures.
type RouteReport struct {
	Op        Op      `json:"op"`
	Route     string  `json:"route"`
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MaxMs     float64 `json:"max_ms"`
	// ServerP50Ms and ServerP99Ms are of the server's own time until the
	// answer's headers, as its Server-Timing header tells it (app;dur):
	// what the latency above is without the network, the client's
	// decoding and its share of the machine. 0 when no answer told it.
	ServerP50Ms float64 `json:"server_p50_ms,omitempty"`
	ServerP99Ms float64 `json:"server_p99_ms,omitempty"`
}

// Interval is one stretch of a window (Window.Every): the requests that
// ended within it, and the server then — how a long run's figures move as
// the store grows.
type Interval struct {
	// EndSeconds is when the stretch ended, from the window's start.
	EndSeconds float64 `json:"end_seconds"`
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	PerSecond  float64 `json:"per_second"`
	// P50Ms, P99Ms are of every operation's latency together.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	// ServerCPUPerRequestMs is the server's CPU time over the stretch
	// divided by its requests; RSS and Anon its memory at the end (0: not
	// sampled, Window.Server).
	ServerCPUPerRequestMs float64 `json:"server_cpu_ms_per_request,omitempty"`
	RSS                   int64   `json:"rss_bytes,omitempty"`
	Anon                  int64   `json:"anon_bytes,omitempty"`
	// Memories are those the server holds at the end (Window.Stored; -1:
	// not asked or not answered).
	Memories int64 `json:"memories"`
}

// MemorySample is the server's memory at a point of the run (start,
// middle, end).
type MemorySample struct {
	At string `json:"at"`
	ProcMemory
}

// Run drives the server with opts.Clients concurrent clients for
// opts.Duration and reports what happened. It returns an error only when
// the run could not be made (setup failed); failed requests are counted
// in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Clients < 1 || o.Sonas < 1 || o.Duration <= 0 || o.SeedMemories < 0 {
		return nil, fmt.Errorf("loadgen: need at least one client and one sona and a positive duration")
	}
	if !(o.Rate >= 0 && o.Rate <= MaxRate) {
		return nil, fmt.Errorf("loadgen: a rate of %g requests a second is not between 0 and %d", o.Rate, MaxRate)
	}
	if o.Every < 0 {
		return nil, fmt.Errorf("loadgen: stretches of %v: want a positive length, or 0 for none", o.Every)
	}
	if o.Mix == nil {
		o.Mix = DefaultMix()
	}
	if err := o.Mix.validate(); err != nil {
		return nil, err
	}
	c, closeClient := NewClient(o.URL, o.Token, o.Clients)
	defer closeClient()
	r := &runner{o: o, c: c, texts: NewTexts(o.Seed)}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	w := Window{Clients: o.Clients, Duration: o.Duration, Rate: o.Rate, Seed: o.Seed, Server: o.Server,
		Every: o.Every, OnInterval: o.OnInterval, Stored: StoredIn(c)}
	rep := Drive(ctx, w, r.do)
	rep.Sonas, rep.Mix = o.Sonas, o.Mix.String()
	return rep, nil
}

// NewClient returns a client of the server at url that keeps up to conns
// connections alive (one per concurrent caller), and a function that
// closes them.
func NewClient(url, token string, conns int) (*client.Client, func()) {
	hc := &http.Client{Transport: serverTiming{&http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
	}}}
	return client.New(url, hc).WithToken(token), hc.CloseIdleConnections
}

// serverTiming hands the server's time of each answer (its Server-Timing
// header's app;dur) to the request's context slot (Drive's), if any.
type serverTiming struct{ base *http.Transport }

type timingSlot struct{}

func (t serverTiming) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if slot, ok := req.Context().Value(timingSlot{}).(*time.Duration); ok && err == nil {
		if d, ok := ServerTime(resp.Header); ok {
			*slot = d
		}
	}
	return resp, err
}

func (t serverTiming) CloseIdleConnections() { t.base.CloseIdleConnections() }

// ServerTime reads the server's time from h's Server-Timing header
// (app;dur=<ms>).
func ServerTime(h http.Header) (time.Duration, bool) {
	for _, metric := range strings.Split(h.Get("Server-Timing"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(metric), ";")
		if name != "app" {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok {
				ms, err := strconv.ParseFloat(v, 64)
				if err != nil || ms < 0 {
					return 0, false
				}
				return time.Duration(ms * float64(time.Millisecond)), true
			}
		}
	}
	return 0, false
}

// MaxRate bounds Window.Rate: a million requests a second.
const MaxRate = 1_000_000

// Window is a measured stretch of load: Clients clients, each sending
// one request after the other, until Duration has passed or, when
// Requests > 0, that many requests were started.
type Window struct {
	Clients  int
	Duration time.Duration
	Requests int64
	// Rate, when above 0, offers the load on a fixed schedule (an open
	// loop) instead: request k (from 0) is due k/Rate seconds after the
	// start, the next free client sends the next request due, and a
	// request's latency is counted from when it was due, so the time a
	// request waited for a free client (the server behind) is in it. The
	// requests due within the window that no client could start before its
	// end are not sent: Report.Unsent.
	Rate float64
	// Seed seeds each client's random source (client i: Seed, i+1).
	Seed int64
	// Server, when set, is sampled at the start, the middle and the end of
	// the window and every 250 ms between: its CPU time over the window
	// and its memory.
	Server func() (ProcSample, error)
	// Every, when above 0, also reports the window in stretches of that
	// length (Report.Intervals; the last may be shorter), a request in the
	// stretch it ended in; OnInterval, when set, is given each as it ends,
	// and Stored, when set, is asked how many memories the server holds
	// then.
	Every      time.Duration
	OnInterval func(Interval)
	Stored     func(context.Context) (int64, error)
}

// Request sends one request as client i (0 ≤ i < Clients) and says which
// operation it was; a non-nil error counts as a failed request.
type Request func(ctx context.Context, i int, rng *rand.Rand) (Op, error)

// Drive runs a window of load made of req and reports latency, throughput
// and errors by operation, and the server's CPU time and memory.
func Drive(ctx context.Context, w Window, req Request) *Report {
	rep := &Report{Clients: w.Clients, Seed: w.Seed, ErrorsByStatus: map[string]int64{}}
	var startCPU, endCPU ProcSample
	sample := func(at string) (ProcSample, bool) {
		if w.Server == nil {
			return ProcSample{}, false
		}
		s, err := w.Server()
		if err != nil {
			return s, false
		}
		rep.PeakRSS = max(rep.PeakRSS, s.RSS)
		if at != "" {
			rep.Memory = append(rep.Memory, MemorySample{At: at, ProcMemory: s.ProcMemory})
		}
		return s, true
	}
	haveServer := false
	startCPU, haveServer = sample("start")
	clientStart, _ := ReadProcCPU(os.Getpid())
	start := time.Now()
	stats := make([]*clientStats, w.Clients)
	errs := &errorSamples{}
	next := w.schedule(start)
	stretches := newStretches(w.Clients, start, w.Every)
	var wg sync.WaitGroup
	for i := range stats {
		stats[i] = newClientStats()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w.Seed), uint64(i)+1))
			for ctx.Err() == nil {
				due, ok := next(ctx)
				if !ok {
					return
				}
				server := time.Duration(-1)
				op, err := req(context.WithValue(ctx, timingSlot{}, &server), i, rng)
				lat := time.Since(due)
				stats[i].record(op, lat, err)
				stretches.record(i, lat, err)
				if server >= 0 {
					stats[i].server[op] = append(stats[i].server[op], server)
				}
				if err != nil {
					errs.add(op, err)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	middle := time.NewTimer(w.Duration / 2)
	tick := time.NewTicker(250 * time.Millisecond)
	var every <-chan time.Time
	if w.Every > 0 {
		t := time.NewTicker(w.Every)
		defer t.Stop()
		every = t.C
	}
	last, lastOK := startCPU, haveServer // the server at the last stretch's end
	stretch := func(final bool, s ProcSample, sampled bool) {
		iv, ok := stretches.take(final)
		if !ok {
			return
		}
		if sampled && lastOK && iv.Requests > 0 {
			iv.ServerCPUPerRequestMs = 1000 * (s.CPU - last.CPU).Seconds() / float64(iv.Requests)
		}
		if sampled {
			iv.RSS, iv.Anon = s.RSS, s.Anon
		}
		last, lastOK = s, sampled
		iv.Memories = -1
		if w.Stored != nil {
			if n, err := w.Stored(ctx); err == nil {
				iv.Memories = n
			}
		}
		rep.Intervals = append(rep.Intervals, iv)
		if w.OnInterval != nil {
			w.OnInterval(iv)
		}
	}
	for running := true; running; {
		select {
		case <-middle.C:
			sample("middle")
		case <-tick.C:
			sample("")
		case <-every:
			s, ok := sample("")
			stretch(false, s, ok)
		case <-done:
			running = false
		}
	}
	middle.Stop()
	tick.Stop()
	took := time.Since(start)
	endCPU, sampled := sample("end")
	if sampled && haveServer {
		rep.ServerCPUSeconds = (endCPU.CPU - startCPU.CPU).Seconds()
	}
	if w.Every > 0 {
		stretch(true, endCPU, sampled)
	}
	clientEnd, _ := ReadProcCPU(os.Getpid())
	rep.Seconds = took.Seconds()
	summarize(rep, stats, errs)
	if w.Rate > 0 {
		rep.Rate, rep.Unsent = w.Rate, w.due()-rep.Requests
	}
	if rep.Requests > 0 {
		rep.ServerCPUPerRequestMs = 1000 * rep.ServerCPUSeconds / float64(rep.Requests)
		rep.ClientCPUPerRequestMs = 1000 * (clientEnd - clientStart).Seconds() / float64(rep.Requests)
	}
	return rep
}

// stretches collect the requests of a window's stretches (Window.Every):
// each client records into its own part, under its own lock — taken by
// nobody else but take, once a stretch —, the stretch a request ends in
// read under that lock, so that a stretch taken holds every request that
// ended before.
type stretches struct {
	start   time.Time
	every   time.Duration
	taken   time.Duration // the end of the last stretch taken
	clients []stretchPart
}

type stretchPart struct {
	mu      sync.Mutex
	latency map[int][]time.Duration // by stretch
	errors  map[int]int64
}

func newStretches(clients int, start time.Time, every time.Duration) *stretches {
	s := &stretches{start: start, every: every}
	if every > 0 {
		s.clients = make([]stretchPart, clients)
		for i := range s.clients {
			s.clients[i] = stretchPart{latency: map[int][]time.Duration{}, errors: map[int]int64{}}
		}
	}
	return s
}

func (s *stretches) record(client int, d time.Duration, err error) {
	if s.every <= 0 {
		return
	}
	p := &s.clients[client]
	p.mu.Lock()
	k := int(time.Since(s.start) / s.every)
	p.latency[k] = append(p.latency[k], d)
	if err != nil {
		p.errors[k]++
	}
	p.mu.Unlock()
}

// take returns the stretches ended since the last taken, as one (more
// than one only when the window's loop was late for a tick), or with final
// the rest of the window; false when there is nothing to report (a full
// stretch without requests is reported: the server answered none).
func (s *stretches) take(final bool) (Interval, bool) {
	now := time.Since(s.start)
	upTo := int(now / s.every) // the stretches before it have ended
	end := time.Duration(upTo) * s.every
	if final {
		upTo, end = math.MaxInt, max(now, s.taken)
	}
	var lat []time.Duration
	var errs int64
	for i := range s.clients {
		p := &s.clients[i]
		p.mu.Lock()
		for j, l := range p.latency {
			if j < upTo {
				lat = append(lat, l...)
				errs += p.errors[j]
				delete(p.latency, j)
				delete(p.errors, j)
			}
		}
		p.mu.Unlock()
	}
	if len(lat) == 0 && (final || end <= s.taken) { // the window's end: no stretch of nothing
		return Interval{}, false
	}
	iv := Interval{EndSeconds: end.Seconds(), Requests: int64(len(lat)), Errors: errs}
	if end > s.taken {
		iv.PerSecond = float64(len(lat)) / (end - s.taken).Seconds()
	}
	s.taken = end
	if len(lat) > 0 {
		slices.Sort(lat)
		iv.P50Ms, iv.P99Ms = ms(Percentile(lat, 0.50)), ms(Percentile(lat, 0.99))
	}
	return iv, true
}

// schedule returns what a client calls before each request of a window
// begun at start: when the request was due (its latency counts from then)
// and whether to send it. Without a Rate a request is due when its client
// is free, while the window lasts and fewer than Requests were started;
// with one the next request in the schedule is taken, waited for if it is
// not due yet, and sent if the window has not ended by then.
func (w Window) schedule(start time.Time) func(context.Context) (time.Time, bool) {
	deadline := start.Add(w.Duration)
	var started atomic.Int64
	if w.Rate <= 0 {
		return func(context.Context) (time.Time, bool) {
			now := time.Now()
			return now, now.Before(deadline) && (w.Requests <= 0 || started.Add(1) <= w.Requests)
		}
	}
	n := w.due()
	return func(ctx context.Context) (time.Time, bool) {
		k := started.Add(1) - 1
		if k >= n {
			return time.Time{}, false
		}
		due := start.Add(time.Duration(float64(k) / w.Rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return time.Time{}, false
			}
		}
		return due, time.Now().Before(deadline)
	}
}

// due is how many requests a window at a Rate offers: those due before
// its Duration ends, no more than Requests when that is set.
func (w Window) due() int64 {
	n := int64(math.Ceil(w.Duration.Seconds() * w.Rate))
	if w.Requests > 0 {
		n = min(n, w.Requests)
	}
	return n
}

type runner struct {
	o     Options
	c     *client.Client
	texts *Texts
	sonas []string // uuids
	cids  cidPool
}

// setup creates the sonas and their first memories.
func (r *runner) setup(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 0))
	r.sonas = make([]string, r.o.Sonas)
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(16)
	for i := range r.sonas {
		seedRNG := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		eg.Go(func() error {
			// A server loaded before has these names (--server): the
			// run's sonas are its own, named by uuid from here.
			s, err := r.c.CreateSonaWith(ectx, &messages.CreateSonaRequest{Name: fmt.Sprintf("load-%d", i), AllowDuplicate: true})
			if err != nil {
				return fmt.Errorf("loadgen: create sona: %w", err)
			}
			r.sonas[i] = s.Uuid
			for range r.o.SeedMemories {
				if err := r.insert(ectx, seedRNG, s.Uuid); err != nil {
					return fmt.Errorf("loadgen: seed memories: %w", err)
				}
			}
			return nil
		})
	}
	return eg.Wait()
}

// do sends one request of the mix.
func (r *runner) do(ctx context.Context, _ int, rng *rand.Rand) (Op, error) {
	op := r.o.Mix.pick(rng)
	sona := r.sonas[rng.IntN(len(r.sonas))]
	switch op {
	case OpInsert:
		return op, r.insert(ctx, rng, sona)
	case OpRecall:
		_, err := r.c.Recall(ctx, sona, &messages.RecallRequest{Query: r.texts.Sentence(rng, 3, 8)})
		return op, err
	case OpChat:
		_, err := r.c.Chat(ctx, sona, &messages.ChatRequest{Content: r.texts.Sentence(rng, 6, 16), Name: "user"})
		return op, err
	case OpGet:
		cid := r.cids.pick(rng)
		if cid == "" {
			return op, r.insert(ctx, rng, sona)
		}
		_, err := r.c.Memory(ctx, cid)
		return op, err
	case OpList:
		_, err := r.c.ListMemories(ctx, sona, "", 20)
		return op, err
	}
	return op, fmt.Errorf("loadgen: unknown op %q", op)
}

// StoredIn is a Window's Stored for the server c talks to: the memories
// its /healthz counts.
func StoredIn(c *client.Client) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		h, err := c.Health(ctx)
		if err != nil {
			return 0, err
		}
		return h.Memories, nil
	}
}

func (r *runner) insert(ctx context.Context, rng *rand.Rand, sona string) error {
	data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": r.texts.Sentence(rng, 6, 20)})
	if err != nil {
		return err
	}
	resp, err := r.c.Insert(ctx, &messages.InsertRequest{Sona: sona, Data: data})
	if err != nil {
		return err
	}
	r.cids.add(resp.Cid)
	return nil
}

// errorSamples keeps the first few distinct error messages.
type errorSamples struct {
	mu      sync.Mutex
	samples []string
}

func (e *errorSamples) add(op Op, err error) {
	msg := fmt.Sprintf("%s: %v", op, err)
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.samples) < 5 && !slices.Contains(e.samples, msg) {
		e.samples = append(e.samples, msg)
	}
}

func summarize(rep *Report, stats []*clientStats, errs *errorSamples) {
	all := newClientStats()
	for _, st := range stats {
		all.merge(st)
	}
	ops := slices.Collect(maps.Keys(all.latency))
	slices.SortFunc(ops, func(a, b Op) int { return cmp.Compare(opRank(a), opRank(b)) })
	for _, op := range ops {
		lat := all.latency[op]
		slices.Sort(lat)
		route := routes[op]
		if route == "" {
			route = string(op)
		}
		rr := RouteReport{Op: op, Route: route, Requests: int64(len(lat)), Errors: all.errors[op],
			PerSecond: float64(len(lat)) / rep.Seconds,
			P50Ms:     ms(Percentile(lat, 0.50)), P99Ms: ms(Percentile(lat, 0.99)), MaxMs: ms(lat[len(lat)-1])}
		if srv := all.server[op]; len(srv) > 0 {
			slices.Sort(srv)
			rr.ServerP50Ms, rr.ServerP99Ms = ms(Percentile(srv, 0.50)), ms(Percentile(srv, 0.99))
		}
		rep.Routes = append(rep.Routes, rr)
		rep.Requests += rr.Requests
		rep.Errors += rr.Errors
	}
	rep.PerSecond = float64(rep.Requests) / rep.Seconds
	rep.ErrorsByStatus = all.statuses
	errs.mu.Lock()
	rep.ErrorSamples = append([]string(nil), errs.samples...)
	errs.mu.Unlock()
	sort.Strings(rep.ErrorSamples)
}

// opRank orders the report: the known operations first, in Ops order,
// then others by name.
func opRank(op Op) string {
	if i := slices.Index(Ops, op); i >= 0 {
		return fmt.Sprintf("0%02d", i)
	}
	return "1" + string(op)
}

// clientStats are one client's counts (merged at the end: no locks on
// the request path).
type clientStats struct {
	latency  map[Op][]time.Duration
	server   map[Op][]time.Duration // the answers' Server-Timing
	errors   map[Op]int64
	statuses map[string]int64
}

func newClientStats() *clientStats {
	return &clientStats{latency: map[Op][]time.Duration{}, server: map[Op][]time.Duration{}, errors: map[Op]int64{}, statuses: map[string]int64{}}
}

func (s *clientStats) record(op Op, d time.Duration, err error) {
	s.latency[op] = append(s.latency[op], d)
	if err == nil {
		return
	}
	s.errors[op]++
	var e *client.Error
	if errors.As(err, &e) {
		s.statuses[strconv.Itoa(e.Status)]++
	} else {
		s.statuses["transport"]++
	}
}

func (s *clientStats) merge(o *clientStats) {
	for op, l := range o.latency {
		s.latency[op] = append(s.latency[op], l...)
	}
	for op, l := range o.server {
		s.server[op] = append(s.server[op], l...)
	}
	for op, n := range o.errors {
		s.errors[op] += n
	}
	for k, n := range o.statuses {
		s.statuses[k] += n
	}
}

// Percentile is the nearest-rank percentile p (0…1) of sorted durations.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cidPool holds the CIDs of recent inserts for the clients to read.
type cidPool struct {
	mu   sync.Mutex
	cids []string
	next int
}

const poolSize = 8192

func (p *cidPool) add(c string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cids) < poolSize {
		p.cids = append(p.cids, c)
		return
	}
	p.cids[p.next] = c
	p.next = (p.next + 1) % poolSize
}

func (p *cidPool) pick(rng *rand.Rand) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.cids) == 0 {
		return ""
	}
	return p.cids[rng.IntN(len(p.cids))]
}

// EverySecond calls f with the whole seconds elapsed, at most total's,
// once a second until the returned function is called; that function
// returns once f is no longer running. (The progress of a timed phase.)
func EverySecond(total time.Duration, f func(elapsed int)) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f(min(int(time.Since(start).Seconds()), int(total.Seconds())))
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
