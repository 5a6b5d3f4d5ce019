package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/messages"
)

// A restart is measured from outside, as an operator sees it: the server
// logs when its derived indexes are ready (the full-text index, loaded
// within the store's open; the HNSW graph, built after), but not the
// evaluator's backlog nor the caches' warmth, so after /healthz
// answers, one client asks a recall every probeEvery until the server
// serves at full speed: the median of the last probeWindow recalls is
// within steadyFactor of the warm server's median (measured the same way
// before the stop) and stays so for the hold — steadyHold, or half of
// Options.Duration when shorter — (SteadyMs: when that stretch began), or
// until steadyLimit. Then, the probe stopped, the server's background work
// is done once it uses less than idleShare of a core over idleSpan
// (IdleMs: when that span began; see waitIdle). The probe is stopped first
// because its own cost would hide background work held to a small share of
// a core (the HNSW builder works at a fifth of one under a small backlog).
//
// The reference is the median of referenceN probes (fewer when
// Options.Duration is shorter than referenceN probes).
const (
	probeEvery   = 100 * time.Millisecond
	probeWindow  = 10
	steadyFactor = 1.5
	steadyHold   = 10 * time.Second
	steadyLimit  = 30 * time.Minute
	referenceN   = 60
)

// hold and references are steadyHold and referenceN for this run.
func (r *run) hold() time.Duration { return min(steadyHold, r.o.Duration/2) }

func (r *run) references() int {
	return max(probeWindow, min(referenceN, int(r.o.Duration/probeEvery)))
}

// RestartFigures are a restart's times, from the start of the new
// process, and its memory.
type RestartFigures struct {
	Signal string `json:"signal"` // SIGTERM or SIGKILL
	// StopMs is how long the old process took to exit after SIGTERM.
	StopMs float64 `json:"stop_ms,omitempty"`
	// TextLoadedMs, LoadedMs and GraphBuiltMs are when the server logged
	// "full-text index loaded" (its snapshot and log read, the insertion
	// log caught up: it serves every search from then; it loads in the
	// background, beside the rest of the open), "self loaded" (the store
	// open: sonas, vectors, metadata read) and "vector graph built" (every
	// stored vector in the HNSW graph; dense searches are exact until
	// then) or "vector graph deferred" (index.graph lazy, no search has
	// needed it: nothing to build); 0: not logged.
	TextLoadedMs float64 `json:"text_loaded_ms,omitempty"`
	LoadedMs     float64 `json:"loaded_ms,omitempty"`
	GraphBuiltMs float64 `json:"graph_built_ms,omitempty"`
	// HealthzMs is when GET /healthz first answered 200.
	HealthzMs float64 `json:"healthz_ms"`
	// SteadyMs is when recall reached its steady latency (-1: not within
	// steadyLimit); ReferenceP50Ms that latency, on the warm server before
	// the stop.
	SteadyMs       float64 `json:"steady_ms"`
	ReferenceP50Ms float64 `json:"reference_p50_ms"`
	// IdleMs is when the server's background work was done (see waitIdle:
	// the present after idleTimeout, with a note); CPUSeconds is the new
	// process's CPU time when that was seen.
	IdleMs     float64 `json:"idle_ms"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSS when /healthz answered, at steady recall and when idle.
	RSSHealthz int64 `json:"rss_healthz_bytes"`
	RSSSteady  int64 `json:"rss_steady_bytes"`
	RSSIdle    int64 `json:"rss_idle_bytes"`
}

// restart stops the sized store's server (SIGTERM, or SIGKILL when kill)
// and measures a new one on the same data until it serves at full speed
// and is idle.
func (r *run) restart(ctx context.Context, kill bool) error {
	s := r.store
	phase := fmt.Sprintf("restart: %s", FormatSize(s.man.Memories))
	rng := rand.New(rand.NewPCG(uint64(r.o.Seed), 99))

	// The reference: the warm, idle server under the probe.
	var ref []time.Duration
	if err := r.probe(ctx, s, rng, phase+", reference", func(p *probeState) bool {
		ref = p.lat
		return len(p.lat) >= r.references()
	}); err != nil {
		return err
	}
	fig := &RestartFigures{Signal: "SIGTERM", ReferenceP50Ms: ms(median(ref))}

	if kill {
		fig.Signal = "SIGKILL"
		s.srv.Kill()
	} else {
		t := time.Now()
		if err := s.srv.Stop(5 * time.Minute); err != nil {
			return fmt.Errorf("bench: %s: stopping the server: %w", phase, err)
		}
		fig.StopMs = ms(time.Since(t))
	}
	s.srv = nil
	srv, err := r.launch(ctx, s.dir)
	if err != nil {
		return err
	}
	s.srv = srv
	since := func(t time.Time) float64 { return ms(t.Sub(srv.Started)) }
	r.progress(phase+", until /healthz", 0, 0)
	if err := srv.WaitHealthy(ctx); err != nil {
		return err
	}
	fig.HealthzMs = since(time.Now())
	if m, err := srv.Sample(); err == nil {
		fig.RSSHealthz = m.RSS
	}

	bound := time.Duration(steadyFactor * float64(median(ref)))
	var streak time.Time
	var ramp []time.Duration // the probes until steady
	var failed int
	steady := false
	err = r.probe(ctx, s, rng, phase+", until steady", func(p *probeState) bool {
		failed = p.errors
		steady = !streak.IsZero() && p.at.Sub(streak) >= r.hold()
		if !steady && len(p.lat) >= probeWindow {
			if median(p.lat[len(p.lat)-probeWindow:]) > bound {
				streak = time.Time{}
			} else if streak.IsZero() {
				streak = p.at
				ramp = slices.Clone(p.lat)
				fig.RSSSteady = p.sample.RSS
			}
		}
		return steady || time.Since(srv.Started) > steadyLimit
	})
	if err != nil {
		return err
	}
	// Idle is looked for without the probe, whose cost would hide
	// background work held to a small share of a core.
	idleAt, err := r.waitIdle(ctx, srv, phase+", until idle")
	if err != nil {
		return err
	}
	fig.IdleMs = since(idleAt)
	if m, err := srv.Sample(); err == nil {
		fig.RSSIdle, fig.CPUSeconds = m.RSS, m.CPU.Seconds()
	}
	fig.SteadyMs = since(streak)
	if !steady {
		r.note("%s after %s: recall did not stay within %.1f× its warm median (%.1f ms) within %s", phase, fig.Signal, steadyFactor, fig.ReferenceP50Ms, steadyLimit)
		fig.SteadyMs = -1
	}
	for msg, f := range map[string]*float64{"full-text index loaded": &fig.TextLoadedMs, "self loaded": &fig.LoadedMs,
		"vector graph built": &fig.GraphBuiltMs, "vector graph deferred until a search needs it": &fig.GraphBuiltMs} {
		if t, ok := srv.Logged(msg); ok {
			*f = since(t)
		}
	}
	slices.Sort(ramp)
	res := Result{Scenario: Restart, Name: "restart after " + fig.Signal, Path: "http", StoreSize: s.man.Memories,
		Sonas: len(s.man.Sonas), Clients: 1, Ops: int64(len(ramp)), Errors: int64(failed), Seconds: fig.SteadyMs / 1000, Restart: fig,
		RSS: &RSS{Start: fig.RSSHealthz, Peak: max(fig.RSSHealthz, fig.RSSSteady, fig.RSSIdle), End: fig.RSSIdle}}
	if len(ramp) > 0 {
		res.P50Ms, res.P99Ms, res.MaxMs = ms(loadgen.Percentile(ramp, 0.5)), ms(loadgen.Percentile(ramp, 0.99)), ms(ramp[len(ramp)-1])
	}
	res.Note = fmt.Sprintf("latencies: the %d recall probes (one every %s) from /healthz until steady", len(ramp), probeEvery)
	r.add(res)
	return nil
}

// probeState is what a probe has seen so far.
type probeState struct {
	lat    []time.Duration    // the successful recalls' latencies
	errors int                // the failed recalls
	at     time.Time          // when the last recall was sent
	sample loadgen.ProcSample // the server after it
}

// probe asks one recall every probeEvery, and samples the server after
// each, until enough says so. More than 100 failed recalls end it with an
// error.
func (r *run) probe(ctx context.Context, s *store, rng *rand.Rand, phase string, enough func(*probeState) bool) error {
	c := r.client(s.srv)
	p := &probeState{}
	start := time.Now()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		i := s.pick(rng)
		p.at = time.Now()
		_, err := c.Recall(ctx, s.sona(i), &messages.RecallRequest{Query: Query(r.o.Corpus.Text(i), rng)})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			if p.errors++; p.errors > 100 {
				return fmt.Errorf("bench: %s: recall keeps failing: %w", phase, err)
			}
		default:
			p.lat = append(p.lat, time.Since(p.at))
		}
		if p.sample, err = s.srv.Sample(); err != nil {
			return fmt.Errorf("bench: %s: %w (%s)", phase, err, s.srv.LastLog())
		}
		if enough(p) {
			return nil
		}
		r.progress(phase, int(time.Since(start).Seconds()), 0)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.srv.Exited():
			return fmt.Errorf("bench: %s: %w (%v): %s", phase, loadgen.ErrExited, s.srv.Err(), s.srv.LastLog())
		case <-t.C:
		}
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
