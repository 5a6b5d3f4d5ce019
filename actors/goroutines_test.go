package actors

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"
)

// goroutineID is the number the runtime gives the calling goroutine.
func goroutineID(t *testing.T) uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf) // "goroutine 42 [running]: …"
	id, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		t.Errorf("reading the goroutine's number in %q: %v", buf, err)
	}
	return id
}

// waitIdle polls until n goroutines of g wait for work.
func waitIdle(t *testing.T, g *goroutines, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.idle.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait for work, want %d", g.idle.Load(), n)
		}
		runtime.Gosched()
	}
}

// run schedules fn on g and returns the number of the goroutine it ran on.
func run(t *testing.T, g *goroutines) uint64 {
	ran := make(chan uint64)
	g.Schedule(func() { ran <- goroutineID(t) })
	return <-ran
}

func TestGoroutinesRunTheNextWorkOnAWaitingOne(t *testing.T) {
	g := newGoroutines()
	defer g.stop()
	first := run(t, g)
	waitIdle(t, g, 1)
	if again := run(t, g); again != first {
		t.Errorf("ran on goroutine %d, want %d, which waited for work", again, first)
	}
	waitIdle(t, g, 1)
	if caller := goroutineID(t); first == caller {
		t.Errorf("ran on the caller's goroutine %d", caller)
	}
}

func TestGoroutinesKeepAtMostMaxIdle(t *testing.T) {
	g := newGoroutines()
	defer g.stop()
	base := runtime.NumGoroutine()
	const n = maxIdle + 20
	var started, finished sync.WaitGroup
	release := make(chan struct{})
	started.Add(n)
	finished.Add(n)
	for range n {
		g.Schedule(func() {
			defer finished.Done()
			started.Done()
			<-release // all n at once: none can take another's place
		})
	}
	started.Wait()
	close(release)
	finished.Wait()
	// The 20 beyond the bound end.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base+maxIdle {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d: %d of the scheduler's wait for work", runtime.NumGoroutine(), base+maxIdle, g.idle.Load())
		}
		runtime.Gosched()
	}
	waitIdle(t, g, maxIdle)
	for range 3 {
		run(t, g)
		waitIdle(t, g, maxIdle)
	}
}

func TestGoroutinesStopped(t *testing.T) {
	g := newGoroutines()
	run(t, g)
	waitIdle(t, g, 1)
	g.stop()
	waitIdle(t, g, 0)
	// Work after the stop still runs, each on a goroutine of its own that
	// then ends.
	for range 3 {
		run(t, g)
		waitIdle(t, g, 0)
	}
}

func TestGoroutinesKeepNothingOfTheirLastWork(t *testing.T) {
	g := newGoroutines()
	defer g.stop()
	ran := make(chan struct{})
	gone := scheduleHolding(g, ran)
	<-ran
	waitIdle(t, g, 1)
	runtime.GC()
	if gone.Value() != nil {
		t.Error("a waiting goroutine keeps what its last work held")
	}
}

// scheduleHolding schedules on g work that holds memory of its own,
// closing ran once it ran, and returns a weak pointer to that memory.
func scheduleHolding(g *goroutines, ran chan struct{}) weak.Pointer[[1 << 16]byte] {
	held := new([1 << 16]byte)
	g.Schedule(func() {
		held[0] = 1
		close(ran)
	})
	return weak.Make(held)
}

// The goroutines' work carries labels of its own in the profiles, not
// those of the goroutine whose Schedule started it (the store's committer
// or acknowledger, resuming an actor).
func TestGoroutinesWorkUnderTheirOwnLabels(t *testing.T) {
	g := newGoroutines()
	defer g.stop()
	started, hold := make(chan struct{}), make(chan struct{})
	defer close(hold)
	pprof.Do(context.Background(), pprof.Labels("memoria", "committer"), func(context.Context) {
		g.Schedule(func() { labelledWork(started, hold) })
	})
	<-started
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	for _, stack := range strings.Split(b.String(), "\n\n") {
		if !strings.Contains(stack, "labelledWork") {
			continue
		}
		if !strings.Contains(stack, `# labels: {"memoria":"actors"}`) {
			t.Fatalf("the work runs under other labels:\n%s", stack)
		}
		return
	}
	t.Fatalf("no goroutine runs the work:\n%s", b.String())
}

// labelledWork is work whose stack the test finds in the profile.
//
//go:noinline
func labelledWork(started chan<- struct{}, hold <-chan struct{}) {
	close(started)
	<-hold
}
