package clock_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresDueTimersInOrder(t *testing.T) {
	c := clock.NewFake(t0)
	var fired []string
	var at []time.Duration
	note := func(name string) func() {
		return func() { fired = append(fired, name); at = append(at, c.Since(t0)) }
	}
	c.AfterFunc(3*time.Second, note("c"))
	c.AfterFunc(time.Second, note("a"))
	c.AfterFunc(time.Second, note("b")) // same time: in the order set
	late := c.AfterFunc(time.Hour, note("late"))
	c.Advance(2 * time.Second)
	if !slices.Equal(fired, []string{"a", "b"}) {
		t.Fatalf("after 2s fired %v, want [a b]", fired)
	}
	if !slices.Equal(at, []time.Duration{time.Second, time.Second}) {
		t.Fatalf("fired at %v: Now must read the due time while a timer fires", at)
	}
	if got := c.Since(t0); got != 2*time.Second {
		t.Fatalf("clock at %v, want 2s", got)
	}
	if !late.Stop() || late.Stop() {
		t.Fatal("Stop: true once for a pending timer, then false")
	}
	c.Advance(2 * time.Hour)
	if !slices.Equal(fired, []string{"a", "b", "c"}) {
		t.Fatalf("fired %v: a stopped timer must not fire", fired)
	}
	if c.Pending() != 0 {
		t.Fatalf("%d timers pending", c.Pending())
	}
}

func TestFakeFiresTimersSetWhileFiring(t *testing.T) {
	c := clock.NewFake(t0)
	n := 0
	var tick func()
	tick = func() { n++; c.AfterFunc(time.Second, tick) } // a periodic timer
	c.AfterFunc(time.Second, tick)
	c.Advance(5 * time.Second)
	if n != 5 {
		t.Fatalf("a 1 s periodic timer fired %d times in 5 s, want 5", n)
	}
	c.Set(t0) // back: nothing fires
	if c.Since(t0) != 0 || n != 5 {
		t.Fatalf("set back to t0: at %v, %d fired", c.Since(t0), n)
	}
}

func TestFakeTimerChannelAndReset(t *testing.T) {
	c := clock.NewFake(t0)
	tm := c.NewTimer(time.Minute)
	c.Advance(30 * time.Second)
	if tm.Reset(time.Minute) != true {
		t.Fatal("Reset of a pending timer reports it was pending")
	}
	c.Advance(59 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("fired before its reset due time")
	default:
	}
	c.Advance(time.Second)
	select {
	case got := <-tm.C():
		if want := t0.Add(90 * time.Second); !got.Equal(want) {
			t.Fatalf("fired with %v, want %v", got, want)
		}
	default:
		t.Fatal("did not fire at its due time")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reports true")
	}
}

func TestFakeFiresTimersOfNoDurationAtOnce(t *testing.T) {
	c := clock.NewFake(t0)
	select {
	case <-c.NewTimer(0).C():
	default:
		t.Fatal("a timer of 0 did not fire at once")
	}
	done := make(chan struct{})
	c.AfterFunc(-time.Second, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a deadline, not a wait for the outcome
		t.Fatal("an AfterFunc of no duration did not run")
	}
}

func TestFakeIsSafeForConcurrentUse(t *testing.T) {
	c := clock.NewFake(t0)
	var mu sync.Mutex
	fired := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.AfterFunc(time.Millisecond, func() { mu.Lock(); fired++; mu.Unlock() })
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	c.Advance(time.Second)
	if fired != 800 {
		t.Fatalf("%d of 800 timers fired", fired)
	}
}

func TestSystemClock(t *testing.T) {
	c := clock.Or(nil)
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a deadline, not a wait for the outcome
		t.Fatal("the wall clock's AfterFunc did not fire")
	}
	if c.Since(c.Now()) < 0 {
		t.Fatal("Since is negative")
	}
}
