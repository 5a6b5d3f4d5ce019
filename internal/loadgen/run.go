package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
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
	// Sonas the clients spread over; each gets SeedMemories memories
	// before the load starts, so reads find something from the start.
	Sonas        int
	SeedMemories int
	Mix          Mix
	// Seed makes the workload (which op, which sona, which words) reproducible.
	Seed int64
	// Memory, when set, is sampled at the start, the middle and the end
	// of the load (the server's RSS).
	Memory func() (ProcMemory, error)
}

// Report is the outcome of a run.
type Report struct {
	Clients  int     `json:"clients"`
	Sonas    int     `json:"sonas"`
	Mix      string  `json:"mix"`
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
	Memory       []MemorySample `json:"server_memory,omitempty"`
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
	if o.Mix == nil {
		o.Mix = DefaultMix()
	}
	if err := o.Mix.validate(); err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        o.Clients,
		MaxIdleConnsPerHost: o.Clients, // one kept-alive connection per client
		IdleConnTimeout:     90 * time.Second,
	}}
	defer hc.CloseIdleConnections()
	r := &runner{o: o, c: client.New(o.URL, hc).WithToken(o.Token), words: vocabulary(o.Seed)}
	if err := r.setup(ctx); err != nil {
		return nil, err
	}

	rep := &Report{Clients: o.Clients, Sonas: o.Sonas, Mix: o.Mix.String(), Seed: o.Seed, ErrorsByStatus: map[string]int64{}}
	sample := func(at string) {
		if o.Memory == nil {
			return
		}
		if m, err := o.Memory(); err == nil {
			rep.Memory = append(rep.Memory, MemorySample{At: at, ProcMemory: m})
		}
	}
	sample("start")
	start := time.Now()
	deadline := start.Add(o.Duration)
	stats := make([]*clientStats, o.Clients)
	var wg sync.WaitGroup
	for i := range stats {
		stats[i] = newClientStats()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.client(ctx, i, deadline, stats[i])
		}()
	}
	middle := time.NewTimer(o.Duration / 2)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-middle.C:
		sample("middle")
		<-done
	case <-done:
		middle.Stop()
	}
	took := time.Since(start)
	sample("end")
	rep.Seconds = took.Seconds()
	r.summarize(rep, stats)
	return rep, nil
}

type runner struct {
	o     Options
	c     *client.Client
	words []string
	sonas []string // uuids
	cids  cidPool

	mu      sync.Mutex
	samples []string
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
			s, err := r.c.CreateSona(ectx, fmt.Sprintf("load-%d", i))
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

func (r *runner) client(ctx context.Context, i int, deadline time.Time, st *clientStats) {
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), uint64(i)+1))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		op := r.o.Mix.pick(rng)
		t := time.Now()
		err := r.do(ctx, rng, op)
		st.record(op, time.Since(t), err)
		if err != nil {
			r.sampleError(op, err)
		}
	}
}

func (r *runner) do(ctx context.Context, rng *rand.Rand, op Op) error {
	sona := r.sonas[rng.IntN(len(r.sonas))]
	switch op {
	case OpInsert:
		return r.insert(ctx, rng, sona)
	case OpRecall:
		_, err := r.c.Recall(ctx, sona, &messages.RecallRequest{Query: r.sentence(rng, 3, 8)})
		return err
	case OpChat:
		_, err := r.c.Chat(ctx, sona, &messages.ChatRequest{Content: r.sentence(rng, 6, 16), Name: "user"})
		return err
	case OpGet:
		cid := r.cids.pick(rng)
		if cid == "" {
			return r.insert(ctx, rng, sona)
		}
		_, err := r.c.Memory(ctx, cid)
		return err
	case OpList:
		_, err := r.c.ListMemories(ctx, sona, "", 20)
		return err
	}
	return fmt.Errorf("loadgen: unknown op %q", op)
}

func (r *runner) insert(ctx context.Context, rng *rand.Rand, sona string) error {
	data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": r.sentence(rng, 6, 20)})
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

// sentence is between lo and hi words of the vocabulary.
func (r *runner) sentence(rng *rand.Rand, lo, hi int) string {
	n := lo + rng.IntN(hi-lo+1)
	w := make([]string, n)
	for i := range w {
		// Zipf-like: low indexes are common words, high ones rare.
		w[i] = r.words[int(float64(len(r.words))*rng.Float64()*rng.Float64())]
	}
	return strings.Join(w, " ")
}

func (r *runner) sampleError(op Op, err error) {
	msg := fmt.Sprintf("%s: %v", op, err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) < 5 && !slices.Contains(r.samples, msg) {
		r.samples = append(r.samples, msg)
	}
}

func (r *runner) summarize(rep *Report, stats []*clientStats) {
	all := newClientStats()
	for _, st := range stats {
		all.merge(st)
	}
	for _, op := range Ops {
		lat := all.latency[op]
		if len(lat) == 0 {
			continue
		}
		slices.Sort(lat)
		rr := RouteReport{Op: op, Route: routes[op], Requests: int64(len(lat)), Errors: all.errors[op],
			PerSecond: float64(len(lat)) / rep.Seconds,
			P50Ms:     ms(percentile(lat, 0.50)), P99Ms: ms(percentile(lat, 0.99)), MaxMs: ms(lat[len(lat)-1])}
		rep.Routes = append(rep.Routes, rr)
		rep.Requests += rr.Requests
		rep.Errors += rr.Errors
	}
	rep.PerSecond = float64(rep.Requests) / rep.Seconds
	rep.ErrorsByStatus = all.statuses
	r.mu.Lock()
	rep.ErrorSamples = append([]string(nil), r.samples...)
	r.mu.Unlock()
	sort.Strings(rep.ErrorSamples)
}

// clientStats are one client's counts (merged at the end: no locks on
// the request path).
type clientStats struct {
	latency  map[Op][]time.Duration
	errors   map[Op]int64
	statuses map[string]int64
}

func newClientStats() *clientStats {
	return &clientStats{latency: map[Op][]time.Duration{}, errors: map[Op]int64{}, statuses: map[string]int64{}}
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
	for op, n := range o.errors {
		s.errors[op] += n
	}
	for k, n := range o.statuses {
		s.statuses[k] += n
	}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
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

// vocabulary is a deterministic list of pronounceable made-up words, so
// that texts share words (recall has work to do) without a word list.
func vocabulary(seed int64) []string {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	cons := []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh", "tr", "st"}
	vows := []string{"a", "e", "i", "o", "u", "ai", "ou", "ea"}
	seen := map[string]bool{}
	var words []string
	for len(words) < 4000 {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString(cons[rng.IntN(len(cons))])
			b.WriteString(vows[rng.IntN(len(vows))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words
}
