package memlimit_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/memlimit"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, headroom int64
		percent, want  int
	}{
		{100 * mib, 512 * mib, 100, 100},  // a small heap: gc_percent
		{512 * mib, 512 * mib, 100, 100},  // at the bound
		{1024 * mib, 512 * mib, 100, 50},  // the headroom binds
		{1400 * mib, 512 * mib, 100, 36},  // a million memories
		{1024 * mib, 512 * mib, 30, 30},   // a lower gc_percent stays
		{100 << 30, 512 * mib, 100, 10},   // not below MinPercent
		{1024 * mib, 0, 100, 100},         // no headroom
		{0, 512 * mib, 100, 100},          // nothing measured yet
		{4096 * mib, 1024 * mib, 400, 25}, // a high gc_percent too
		{200 * mib, 1024 * mib, 400, 400}, // within it
	} {
		if got := memlimit.Percent(tc.live, tc.headroom, tc.percent); got != tc.want {
			t.Errorf("Percent(%d MiB, %d MiB, %d) = %d, want %d", tc.live/mib, tc.headroom/mib, tc.percent, got, tc.want)
		}
	}
}

// gogc reads the collector's target the runtime has.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// collectUntil runs collections until ok holds, or fails at the deadline.
func collectUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s of collections", what)
		}
		runtime.GC()
		runtime.Gosched()
	}
}

// TestHeadroomFollowsTheLiveHeap: after the collections that find a
// large live heap the target falls so that the heap's growth stays
// within the headroom; when the heap is small again it is gc_percent;
// stopped, the target is gc_percent and stays there.
func TestHeadroomFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const percent, headroom = 100, 16 << 20
	h := memlimit.StartHeadroom(percent, headroom)
	defer h.Stop()

	live := make([]byte, 256<<20) // 256 MiB live (untouched: the heap counts it all the same): 16 MiB is 6%, below the floor
	collectUntil(t, "target of 10", func() bool { return h.Target() == memlimit.MinPercent && gogc() == memlimit.MinPercent })
	runtime.KeepAlive(live)

	live = make([]byte, 64<<20) // 64 MiB and the test's own: 16 MiB is under 25%
	collectUntil(t, "target between 10 and 25", func() bool {
		p := h.Target()
		return p > memlimit.MinPercent && p <= 25 && gogc() == p
	})
	runtime.KeepAlive(live)

	live = nil
	collectUntil(t, "gc_percent again", func() bool { return h.Target() == percent && gogc() == percent })

	h.Stop()
	debug.SetGCPercent(50) // someone else's target now
	big := make([]byte, 256<<20)
	for range 3 {
		runtime.GC()
	}
	runtime.KeepAlive(big)
	if got := gogc(); got != 50 {
		t.Fatalf("a stopped headroom set the target to %d", got)
	}
}
