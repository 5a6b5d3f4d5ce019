package clock

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told: Advance and Set fire every
// timer that falls due, earliest first (ties in the order they were set),
// with Now reading each timer's due time while it fires. AfterFunc
// functions run on the goroutine that moves the clock, outside its lock:
// they may use the clock. A timer set for no time at all fires at once
// (an AfterFunc in its own goroutine), as the wall clock's do. Fake is
// safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // pending, unordered
	seq    uint64
}

// NewFake returns a Fake reading t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

type fakeTimer struct {
	clock *Fake
	due   time.Time
	seq   uint64 // order of setting, for ties
	f     func() // AfterFunc
	c     chan time.Time
	armed bool
}

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since implements Clock.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// AfterFunc implements Clock.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer { return f.add(d, fn, nil) }

// NewTimer implements Clock.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.add(d, nil, make(chan time.Time, 1)) }

func (f *Fake) add(d time.Duration, fn func(), c chan time.Time) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, f: fn, c: c}
	if d <= 0 { // due now: fires at once, as the wall clock's do
		if fn != nil {
			go fn()
		} else {
			c <- f.now
		}
		return t
	}
	f.arm(t, d)
	return t
}

// arm (with f.mu held) makes t due d from now.
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	f.seq++
	t.due, t.seq = f.now.Add(d), f.seq
	if !t.armed {
		t.armed = true
		f.timers = append(f.timers, t)
	}
}

// Pending is the number of timers set and not yet fired or stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// Advance moves the clock forward by d, firing the timers due meanwhile.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t, firing the timers due by then — also those
// that firing timers set, if due by t. Tests may set it back: nothing
// fires then.
func (f *Fake) Set(t time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 {
			f.now = t
			f.mu.Unlock()
			return
		}
		next := slices.MinFunc(f.timers, func(a, b *fakeTimer) int {
			if c := a.due.Compare(b.due); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		if next.due.After(t) {
			f.now = t
			f.mu.Unlock()
			return
		}
		f.now = next.due
		f.disarm(next)
		now := f.now
		f.mu.Unlock()
		if next.f != nil {
			next.f()
		} else {
			select {
			case next.c <- now:
			default: // like a time.Timer: a value not yet received is kept
			}
		}
	}
}

// disarm (with f.mu held) removes t from the pending timers.
func (f *Fake) disarm(t *fakeTimer) bool {
	if !t.armed {
		return false
	}
	t.armed = false
	f.timers = slices.DeleteFunc(f.timers, func(x *fakeTimer) bool { return x == t })
	return true
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	return t.clock.disarm(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	was := t.armed
	t.clock.arm(t, d)
	return was
}
