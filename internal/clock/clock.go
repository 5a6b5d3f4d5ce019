// Package clock is time as an input (STYLE.md, "Time and chance are
// inputs"): everything that reads the time or waits for it takes a Clock,
// so that tests move time by hand (Fake) instead of sleeping.
//
// System is the wall clock. A Fake stands still until Advance or Set
// moves it; moving it fires the timers that fall due, in the order they
// fall due, on the goroutine that moved it.
package clock

import "time"

// Clock tells the time and makes timers (tailscale's tstime.Clock).
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// Since is the time elapsed since t.
	Since(t time.Time) time.Duration
	// AfterFunc calls f once d has elapsed (in its own goroutine on the
	// wall clock; on the goroutine that moves a Fake past it).
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer sends the time on its channel once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is a pending event of a Clock.
type Timer interface {
	// C is the channel a NewTimer timer fires on; nil for AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
	// Reset makes the timer fire d from now; false if it had fired or
	// been stopped.
	Reset(d time.Duration) bool
}

// System is the wall clock.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                  { return time.Now() }
func (systemClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}
func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// Or returns c, or System when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return System
	}
	return c
}
