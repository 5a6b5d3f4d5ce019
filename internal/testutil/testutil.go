// Package testutil holds the helpers the tests of several packages share.
package testutil

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/memoria-ai/memoria/llm"
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

// UnitVector reads the datadriven argument key=(x,y,…) as a vector scaled
// to unit length, as embeddings are: the golden tests give their
// embeddings so.
func UnitVector(t *testing.T, d *datadriven.TestData, key string) []float32 {
	t.Helper()
	var xs []string
	d.ScanArgs(t, key, &xs)
	v := make([]float32, len(xs))
	for i, x := range xs {
		f, err := strconv.ParseFloat(x, 32)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		v[i] = float32(f)
	}
	if !llm.Normalize(v) {
		d.Fatalf(t, "%s=%v has no direction", key, xs)
	}
	return v
}

// Golden runs every datadriven test file under dir, each against a
// fresh state: start makes the state of one file and returns its command
// runner. Regenerate the files with the test's -rewrite flag.
func Golden(t *testing.T, dir string, start func(t *testing.T) func(*testing.T, *datadriven.TestData) string) {
	t.Helper()
	datadriven.Walk(t, dir, func(t *testing.T, path string) {
		datadriven.RunTest(t, path, start(t))
	})
}

// ReportLatencies reports the median and 99th percentile of a
// benchmark's per-operation latencies as p50-µs and p99-µs. It sorts lat.
func ReportLatencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// HeapObjects is the heap's live objects after a collection: what a test
// of a structure's objects for the collector counts before and after.
func HeapObjects() uint64 { return heapStats().HeapObjects }

// HeapBytes is the bytes of the heap's objects after a collection.
func HeapBytes() uint64 { return heapStats().HeapAlloc }

func heapStats() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// FlipByte damages the file at path as a disk or a stray write would: the
// byte at frac of its length (0 the first; at or past 1, the last) has
// the bits of mask flipped.
func FlipByte(t testing.TB, path string, frac float64, mask byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatalf("%s is empty: nothing to damage", path)
	}
	b[min(int(float64(len(b))*frac), len(b)-1)] ^= mask
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
