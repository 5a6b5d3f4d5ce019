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
	deadline := time.Now().Add(Deadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
