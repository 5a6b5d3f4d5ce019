// Package torture kills a real `memoria serve` with SIGKILL under mixed
// write load, over and over, and checks after each restart that nothing
// it acknowledged was lost: every acknowledged memory is served and its
// raw block hashes to its CID, every chain is linear from its head to its
// genesis and holds every acknowledged step, and the indexes catch up
// (recall finds acknowledged texts). `memoria torture` runs it.
package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/messages"
)

// ErrLoss means an acknowledged write was not found after a restart, or
// a stored structure was broken.
var ErrLoss = errors.New("torture: acknowledged data lost or damaged")

// Options configure a run.
type Options struct {
	// Server says how to start `memoria serve` (its DataDir is reused
	// across restarts).
	Server loadgen.ServerOptions
	// Cycles is how many times the server is killed (and restarted and
	// checked).
	Cycles int
	// Writers write concurrently, each one request after the other,
	// spread over Sonas sonas.
	Writers, Sonas int
	// Duration is the longest a cycle's load lasts: the kill falls at a
	// random point between a quarter of it and all of it.
	Duration time.Duration
	// ChatShare is the share of writes that are chats (an input and a
	// response memory); the rest are inserts.
	ChatShare float64
	// RecallChecks is how many acknowledged texts are recalled after each
	// restart.
	RecallChecks int
	// IndexDeadline bounds the wait for the indexes to catch up after a
	// restart.
	IndexDeadline time.Duration
	// Seed makes the kill points and the workload reproducible.
	Seed int64
	// Cycle, when set, hears each cycle's outcome as it ends.
	Cycle func(CycleReport)
}

// Report is a run's outcome.
type Report struct {
	Seed   int64 `json:"seed"`
	Cycles int   `json:"cycles"`
	// Acknowledged counts the memories the server acknowledged: inserts,
	// and chats' inputs and responses.
	Acknowledged int `json:"acknowledged"`
	Inserts      int `json:"inserts"`
	Chats        int `json:"chats"`
	// Losses are acknowledged memories or steps not found after a restart;
	// Violations are other broken promises (a block that does not hash to
	// its CID, a chain that is not linear, indexes that did not catch up,
	// a recall that missed, a write that failed while the server was up).
	// Problems describes the first of both.
	Losses     int      `json:"losses"`
	Violations int      `json:"violations"`
	Problems   []string `json:"problems,omitempty"`
	// RestartMs are the times from starting the server to its first
	// healthy answer, after each kill.
	RestartMs    []float64 `json:"restart_ms"`
	RestartP50Ms float64   `json:"restart_p50_ms"`
	RestartMaxMs float64   `json:"restart_max_ms"`
	// IndexCatchUpMaxMs is the longest wait, after a restart, for the
	// indexes to hold every memory.
	IndexCatchUpMaxMs float64 `json:"index_catch_up_max_ms"`
	// ACTs is the length of every chain at the end.
	ACTs    int64   `json:"acts"`
	Seconds float64 `json:"seconds"`
}

// CycleReport is one cycle's outcome.
type CycleReport struct {
	Cycle        int     `json:"cycle"`
	KilledAfter  float64 `json:"killed_after_ms"`
	Acknowledged int     `json:"acknowledged"` // in this cycle
	RestartMs    float64 `json:"restart_ms"`
	Losses       int     `json:"losses"`
	Violations   int     `json:"violations"`
}

// Run runs the cycles. It returns ErrLoss (with the report) when
// anything acknowledged was lost or damaged, and another error when the
// run itself could not go on (the server would not start).
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Cycles < 1 || o.Writers < 1 || o.Sonas < 1 || o.Duration <= 0 {
		return nil, fmt.Errorf("torture: need at least one cycle, writer and sona, and a positive duration")
	}
	if o.IndexDeadline <= 0 {
		o.IndexDeadline = 2 * time.Minute
	}
	began := time.Now()
	t := &run{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0)), rep: &Report{Seed: o.Seed}}
	defer func() { t.finish(time.Since(began)) }() // a report of what was done, whatever stopped it
	srv, err := loadgen.StartServer(ctx, o.Server)
	if err != nil {
		return nil, err
	}
	defer func() { srv.Kill() }()
	if err := srv.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	c := newClient(srv)
	for i := range o.Sonas {
		s, err := c.CreateSona(ctx, fmt.Sprintf("torture-%d", i))
		if err != nil {
			return nil, fmt.Errorf("torture: create sona: %w", err)
		}
		t.sonas = append(t.sonas, s.Uuid)
	}
	for cycle := 1; cycle <= o.Cycles; cycle++ {
		if err := ctx.Err(); err != nil {
			return t.rep, err
		}
		cr := CycleReport{Cycle: cycle}
		before := t.ledger.count()
		runFor := o.Duration/4 + time.Duration(t.rng.Int64N(int64(o.Duration*3/4)+1))
		cr.KilledAfter = ms(runFor)
		t.load(ctx, c, srv, cycle, runFor)
		cr.Acknowledged = t.ledger.count() - before

		start := time.Now()
		next, err := loadgen.StartServer(ctx, o.Server)
		if err != nil {
			return t.rep, fmt.Errorf("torture: restart after kill %d: %w", cycle, err)
		}
		srv = next
		if err := srv.WaitHealthy(ctx); err != nil {
			return t.rep, fmt.Errorf("torture: restart after kill %d: %w", cycle, err)
		}
		cr.RestartMs = ms(time.Since(start))
		t.rep.RestartMs = append(t.rep.RestartMs, cr.RestartMs)
		c = newClient(srv)
		losses, violations := t.rep.Losses, t.rep.Violations
		if err := t.verify(ctx, c); err != nil {
			return t.rep, err
		}
		cr.Losses, cr.Violations = t.rep.Losses-losses, t.rep.Violations-violations
		if o.Cycle != nil {
			o.Cycle(cr)
		}
	}
	if err := srv.Stop(time.Minute); err != nil {
		t.violation("the server did not shut down cleanly after the last check: %v", err)
	}
	if t.rep.Losses > 0 || t.rep.Violations > 0 {
		return t.rep, fmt.Errorf("%w: %d losses, %d violations (seed %d)", ErrLoss, t.rep.Losses, t.rep.Violations, o.Seed)
	}
	return t.rep, nil
}

func newClient(srv *loadgen.Server) *client.Client {
	return client.New(srv.URL, &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
}

type run struct {
	o      Options
	rng    *rand.Rand
	rep    *Report
	sonas  []string
	ledger ledger

	mu sync.Mutex // guards rep.Problems and the counts during checks
}

// load runs the writers against srv and kills it with SIGKILL after
// runFor, while they write.
func (t *run) load(ctx context.Context, c *client.Client, srv *loadgen.Server, cycle int, runFor time.Duration) {
	var killed sync.WaitGroup
	killed.Add(1)
	var dead = make(chan struct{})
	go func() {
		defer killed.Done()
		timer := time.NewTimer(runFor)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		close(dead) // before the kill: errors from here on are expected
		srv.Kill()
	}()
	var wg sync.WaitGroup
	for w := range t.o.Writers {
		rng := rand.New(rand.NewPCG(uint64(t.o.Seed), uint64(cycle)<<16|uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-dead:
					return
				default:
				}
				if err := t.write(ctx, c, rng, fmt.Sprintf("c%dw%dn%d", cycle, w, n)); err != nil {
					select {
					case <-dead:
					default:
						t.violation("a write failed while the server was up: %v", err)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	killed.Wait()
}

// write inserts a memory or chats, in a random sona, and records what
// was acknowledged.
func (t *run) write(ctx context.Context, c *client.Client, rng *rand.Rand, tag string) error {
	sona := t.sonas[rng.IntN(len(t.sonas))]
	// A word of its own makes each text findable by recall.
	text := fmt.Sprintf("%s %s the %s keeps %d %s", word(rng), tag, word(rng), rng.IntN(1000), word(rng))
	if rng.Float64() < t.o.ChatShare {
		resp, err := c.Chat(ctx, sona, &messages.ChatRequest{Content: text, Name: "torture"})
		if err != nil {
			return err
		}
		t.ledger.addChat(ackChat{sona: sona, input: resp.GetInput().GetCid(), response: resp.GetResponse().GetCid()})
		return nil
	}
	data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": text})
	if err != nil {
		return err
	}
	resp, err := c.Insert(ctx, &messages.InsertRequest{Sona: sona, Data: data, Dedup: proto.Bool(false)})
	if err != nil {
		return err
	}
	t.ledger.addInsert(ackInsert{sona: sona, seq: resp.Seq, cid: resp.Cid, text: text})
	return nil
}

// word is a random made-up word of 8 letters.
func word(rng *rand.Rand) string {
	const letters = "bcdfghjklmnpqrstvwxz"
	const vowels = "aeiou"
	b := make([]byte, 8)
	for i := range b {
		if i%2 == 0 {
			b[i] = letters[rng.IntN(len(letters))]
		} else {
			b[i] = vowels[rng.IntN(len(vowels))]
		}
	}
	return string(b)
}

func (t *run) loss(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rep.Losses++
	t.note(format, args...)
}

func (t *run) violation(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rep.Violations++
	t.note(format, args...)
}

func (t *run) note(format string, args ...any) {
	if len(t.rep.Problems) < 20 {
		t.rep.Problems = append(t.rep.Problems, fmt.Sprintf(format, args...))
	}
}

func (t *run) finish(took time.Duration) {
	r := t.rep
	r.Cycles = len(r.RestartMs)
	r.Inserts, r.Chats = len(t.ledger.inserts), len(t.ledger.chats)
	r.Acknowledged = t.ledger.count()
	r.Seconds = took.Seconds()
	if len(r.RestartMs) > 0 {
		s := slices.Clone(r.RestartMs)
		slices.Sort(s)
		r.RestartP50Ms = s[(len(s)-1)/2]
		r.RestartMaxMs = s[len(s)-1]
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ledger holds what the server acknowledged.
type ledger struct {
	mu      sync.Mutex
	inserts []ackInsert
	chats   []ackChat
}

type ackInsert struct {
	sona string
	seq  *int64 // nil when the server did not say (an existing memory)
	cid  string
	text string
}

type ackChat struct {
	sona, input, response string
}

func (l *ledger) addInsert(a ackInsert) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inserts = append(l.inserts, a)
}

func (l *ledger) addChat(a ackChat) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.chats = append(l.chats, a)
}

// count is the acknowledged memories: inserts, and two per chat.
func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.inserts) + 2*len(l.chats)
}

// snapshot copies the entries (the writers are stopped during checks).
func (l *ledger) snapshot() ([]ackInsert, []ackChat) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.inserts), slices.Clone(l.chats)
}
