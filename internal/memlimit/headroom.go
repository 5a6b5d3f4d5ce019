package memlimit

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MinPercent is the lowest collector target a headroom sets: below it a
// huge live heap would have the collector run nearly all the time.
const MinPercent = 10

// Percent is the collector's target (GOGC) for a live heap of live bytes:
// percent, unless percent% of live exceeds headroom — then headroom as a
// share of live, not below MinPercent. headroom 0 is no bound.
func Percent(live, headroom int64, percent int) int {
	if headroom <= 0 || live <= 0 || headroom*100/live >= int64(percent) {
		return percent
	}
	return max(int(headroom*100/live), MinPercent)
}

// Headroom bounds the heap's growth between collections (server.gc_headroom):
// after each collection it sets the target for the live heap that
// collection found. It owns the process's target while it runs.
type Headroom struct {
	percent int
	bytes   int64

	mu      sync.Mutex
	stopped bool
	set     int // the target last set
	sample  []metrics.Sample
}

// StartHeadroom sets the target to percent and, after every collection,
// lowers it as Percent says for the live heap.
func StartHeadroom(percent int, headroom int64) *Headroom {
	h := &Headroom{percent: percent, bytes: headroom, set: percent,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	debug.SetGCPercent(percent)
	h.collected()
	return h
}

// Stop ends the tuning and puts the target back to percent.
func (h *Headroom) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	debug.SetGCPercent(h.percent)
}

// Target is the collector's target last set.
func (h *Headroom) Target() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.set
}

// sentinel is garbage whose cleanup runs once a collection has found it:
// a pointer field keeps it out of the tiny allocator, whose blocks can
// outlive their objects.
type sentinel struct{ _ *byte }

// collected sets the target for the live heap the last collection found,
// then waits for the next one.
func (h *Headroom) collected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	metrics.Read(h.sample)
	if h.sample[0].Value.Kind() == metrics.KindUint64 {
		if p := Percent(int64(h.sample[0].Value.Uint64()), h.bytes, h.percent); p != h.set {
			debug.SetGCPercent(p)
			h.set = p
		}
	}
	runtime.AddCleanup(new(sentinel), (*Headroom).collected, h)
}
