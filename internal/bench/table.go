package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// WriteTable prints a report for people: the machine, one line per
// measurement, the restarts' times, the notes.
func WriteTable(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "memoria bench, %s, %d CPUs (%s), %.1f GiB, %s; load %.1f at the start, %.1f at the end; %.0f s\n",
		rep.StartedAt.Format("2006-01-02 15:04 MST"), m.CPUs, m.CPUModel, float64(m.MemoryBytes)/(1<<30), m.GoVersion,
		m.LoadStart[0], m.LoadEnd[0], rep.Seconds)
	fmt.Fprintf(w, "corpus %s, seed %d, windows of %.0f s\n\n", rep.Settings.Corpus, rep.Settings.Seed, rep.Settings.DurationSeconds)
	fmt.Fprintf(w, "%-8s %-38s %6s %7s %9s %8s %8s %8s %8s %7s  %-19s %s\n",
		"scenario", "what", "size", "clients", "ops", "per s", "p50 ms", "p99 ms", "max ms", "CPU/op", "RSS MiB", "")
	var restarts []Result
	for _, r := range rep.Results {
		if r.Restart != nil {
			restarts = append(restarts, r)
			continue
		}
		rss := ""
		if r.RSS != nil {
			rss = fmt.Sprintf("%.0f→%.0f→%.0f", mib(r.RSS.Start), mib(r.RSS.Peak), mib(r.RSS.End))
		}
		fmt.Fprintf(w, "%-8s %-38s %6s %7d %9d %8.1f %8.2f %8.2f %8.1f %7.2f  %-19s %s\n",
			r.Scenario, clip(r.Name, 38), FormatSize(r.StoreSize), r.Clients, r.Ops, r.PerSecond, r.P50Ms, r.P99Ms, r.MaxMs,
			r.CPUMsPerOp, rss, extras(r))
	}
	if len(restarts) > 0 {
		fmt.Fprintf(w, "\nrestart (s from the process's start)  stop     text   loaded  healthz    graph   steady     idle   CPU s  ref p50 ms  RSS MiB healthz→steady→idle\n")
		for _, r := range restarts {
			f := r.Restart
			fmt.Fprintf(w, "  %6s after %-16s %6.1f %8.1f %8.1f %8.1f %8.1f %8s %8.1f %7.1f %11.2f  %.0f→%.0f→%.0f\n",
				FormatSize(r.StoreSize), f.Signal, f.StopMs/1000, f.TextLoadedMs/1000, f.LoadedMs/1000, f.HealthzMs/1000, f.GraphBuiltMs/1000,
				steady(f.SteadyMs), f.IdleMs/1000, f.CPUSeconds, f.ReferenceP50Ms, mib(f.RSSHealthz), mib(f.RSSSteady), mib(f.RSSIdle))
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, r := range rep.Results {
		for _, s := range r.ErrorSamples {
			fmt.Fprintf(w, "error (%s %s): %s\n", r.Scenario, r.Name, s)
		}
	}
}

func steady(ms float64) string {
	if ms < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f", ms/1000)
}

func extras(r Result) string {
	var parts []string
	if r.Rate > 0 {
		parts = append(parts, fmt.Sprintf("offered %g/s (open loop)", r.Rate))
		if r.Unsent > 0 {
			parts = append(parts, fmt.Sprintf("%d due but not sent: the server behind the rate", r.Unsent))
		}
	}
	if r.Errors > 0 {
		parts = append(parts, fmt.Sprintf("%d errors (%s)", r.Errors, r.ErrorStatuses))
	}
	if r.HitRate != nil {
		parts = append(parts, fmt.Sprintf("hit %.2f", *r.HitRate))
	}
	if r.RecallAt10 != nil {
		parts = append(parts, fmt.Sprintf("recall@10 %.3f", *r.RecallAt10))
	}
	if r.BuildSeconds != nil {
		parts = append(parts, fmt.Sprintf("built in %.1f s", *r.BuildSeconds))
	}
	if n := min(len(r.Stretches), windowTenths); n > 1 {
		// The tenth is the last: an eleventh holds only the requests
		// that were in flight when the window ended.
		first, last := r.Stretches[0], r.Stretches[n-1]
		parts = append(parts, fmt.Sprintf("first tenth %.1f /s %.2f ms CPU/op, last %.1f /s %.2f ms CPU/op p99 %.1f ms RSS %.0f MiB",
			first.PerSecond, first.ServerCPUPerRequestMs, last.PerSecond, last.ServerCPUPerRequestMs, last.P99Ms, mib(last.RSS)))
	}
	if r.ServerP50Ms > 0 {
		parts = append(parts, fmt.Sprintf("server p50 %.2f p99 %.2f ms", r.ServerP50Ms, r.ServerP99Ms))
	}
	if r.RSS != nil && r.RSS.EndFile > 0 {
		parts = append(parts, fmt.Sprintf("of the end's RSS %.0f MiB mapped files", mib(r.RSS.EndFile)))
	}
	if len(r.CacheHits) > 0 {
		var hits []string
		for _, name := range slices.Sorted(maps.Keys(r.CacheHits)) {
			hits = append(hits, fmt.Sprintf("%s %.0f%%", name, 100*r.CacheHits[name]))
		}
		parts = append(parts, "cache hits "+strings.Join(hits, " "))
	}
	var misses []string
	for _, name := range slices.Sorted(maps.Keys(r.CacheMissesPerOp)) {
		if m := r.CacheMissesPerOp[name]; m >= 0.05 {
			misses = append(misses, fmt.Sprintf("%s %.1f", name, m))
		}
	}
	if len(misses) > 0 {
		parts = append(parts, "store reads/op for the caches' misses "+strings.Join(misses, " "))
	}
	if c := r.Committer; c != nil {
		parts = append(parts, fmt.Sprintf("committer busy %.0f%%, %.0f commits/s of %.1f ops, %.1f ms in Badger", 100*c.Busy, c.PerSecond, c.OpsPerCommit, c.CommitMs))
		if c.BatchesOver100ms > 0 {
			parts = append(parts, fmt.Sprintf("%d batches over 100 ms (%d over 500)", c.BatchesOver100ms, c.BatchesOver500ms))
		}
		if w := c.WriteWaits; w != nil {
			parts = append(parts, fmt.Sprintf("a write waited %.1f ms queued, %.1f in its batch, %.1f for its acknowledgement (means)", w.QueuedMs, w.BatchMs, w.AcknowledgeMs))
		}
		if c.StalledS > 0 {
			parts = append(parts, fmt.Sprintf("writes stalled %.1f s", c.StalledS))
		}
	}
	if w := writtenNote(r.WrittenPerOp, r.WrittenKeysPerOp); w != "" {
		parts = append(parts, w)
	}
	if c := r.Collector; c != nil {
		parts = append(parts, fmt.Sprintf("GC %.0f%% of the CPU, %d cycles, %.0f KB allocated/op, %.0f MB live", 100*c.CPUShare, c.Cycles, c.AllocKBPerOp, float64(c.LiveBytes)/1e6))
	}
	if r.PackBytes > 0 {
		parts = append(parts, fmt.Sprintf("packs %.0f MiB", mib(r.PackBytes)))
	}
	if r.ClientCPUMsPerOp > 0 {
		parts = append(parts, fmt.Sprintf("client CPU/op %.2f", r.ClientCPUMsPerOp))
	}
	return strings.Join(parts, ", ")
}

// writtenNote tells what an operation wrote into the store: the total
// and its keys, then the spaces of a twentieth of the bytes or more, the
// most first, each with its keys.
func writtenNote(perOp, keysPerOp map[string]float64) string {
	var total, keys float64
	for _, b := range perOp {
		total += b
	}
	for _, k := range keysPerOp {
		keys += k
	}
	if total < 1 {
		return ""
	}
	spaces := slices.SortedFunc(maps.Keys(perOp), func(a, b string) int {
		return cmp.Or(cmp.Compare(perOp[b], perOp[a]), strings.Compare(a, b))
	})
	var big []string
	for _, sp := range spaces {
		if perOp[sp] >= total/20 {
			big = append(big, fmt.Sprintf("%s %.1f%s", sp, perOp[sp]/1000, inKeys(keysPerOp[sp])))
		}
	}
	return fmt.Sprintf("written/op %.1f KB%s (%s)", total/1000, inKeys(keys), strings.Join(big, ", "))
}

// inKeys is " in N keys" for the keys of a figure of written bytes, or
// nothing when a server does not count them.
func inKeys(n float64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" in %.1f keys", n)
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
