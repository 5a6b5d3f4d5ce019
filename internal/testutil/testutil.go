// Package testutil holds the helpers the tests of several packages share.
package testutil

import (
	"testing"
	"time"
)

// Deadline is how long Eventually waits: a ceiling for slow, shared
// machines, not an expectation.
const Deadline = 30 * time.Second

// Eventually polls cond until it holds, failing the test when Deadline
// passes first. It waits for an outcome that other goroutines bring
// about; the pause between polls is a polling interval, not a guess at
// how long the outcome takes.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyShow(t, what, func() (bool, string) { return cond(), "" })
}

// EventuallyShow is Eventually for a cond that also describes the state
// it saw: the last description is in the failure.
func EventuallyShow(t testing.TB, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(Deadline)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if state != "" {
				t.Fatalf("timed out waiting for %s (last: %s)", what, state)
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
