package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/internal/torture"
)

// TestTortureShort kills a server five times under write load and checks
// that nothing acknowledged was lost (`memoria torture`, short).
func TestTortureShort(t *testing.T) {
	out, errOut, code := run(t, "torture", "--cycles", "5", "--writers", "4", "--sonas", "8", "--duration", "2s", "--seed", "1", "--json")
	var rep torture.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if code != 0 || rep.Losses != 0 || rep.Violations != 0 {
		t.Fatalf("exit %d, %d losses, %d violations (seed %d):\n%s\n%s", code, rep.Losses, rep.Violations, rep.Seed,
			strings.Join(rep.Problems, "\n"), errOut)
	}
	if rep.Cycles != 5 || len(rep.RestartMs) != 5 || rep.Inserts == 0 || rep.Chats == 0 ||
		rep.ACTs < int64(rep.Acknowledged) {
		t.Fatalf("report %+v", rep)
	}
	t.Logf("%d acknowledged, %d ACTs, restarts %v ms", rep.Acknowledged, rep.ACTs, rep.RestartMs)
}

// TestLoadShort runs `memoria load` for a few seconds with a few dozen
// clients: no request may fail, every route and the server's memory are
// reported, and the server wrote its profiles (--server-profiles).
func TestLoadShort(t *testing.T) {
	profiles := filepath.Join(t.TempDir(), "profiles")
	out, errOut, code := run(t, "load", "--clients", "24", "--duration", "3s", "--sonas", "4", "--json", "--server-profiles", profiles)
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if code != 0 || rep.Errors != 0 {
		t.Fatalf("exit %d, %d errors %v %v\n%s", code, rep.Errors, rep.ErrorsByStatus, rep.ErrorSamples, errOut)
	}
	if len(rep.Routes) != 5 || len(rep.Memory) != 3 || rep.Memory[0].At != "start" || rep.Memory[2].At != "end" {
		t.Fatalf("report %s", out)
	}
	for _, r := range rep.Routes {
		if r.Requests == 0 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
			t.Fatalf("route %+v", r)
		}
	}
	for _, m := range rep.Memory {
		if m.RSS <= 0 {
			t.Fatalf("memory %+v", rep.Memory)
		}
	}
	for _, name := range []string{"load.pprof", "load.heap.pprof"} { // gzipped protobuf, as pprof writes
		if b, err := os.ReadFile(filepath.Join(profiles, name)); err != nil || len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("--server-profiles: %s: %d bytes, %v", name, len(b), err)
		}
	}
}

// TestLoadFailsOnErrors: a load whose requests fail exits non-zero with
// one line naming the statuses.
func TestLoadFailsOnErrors(t *testing.T) {
	srv := startServer(t, t.TempDir(), "--config", writeConfig(t, "server:\n  max_body_bytes: 64\n"))
	_, errOut, code := run(t, "load", "--server", srv.url, "--clients", "2", "--duration", "1s", "--sonas", "1",
		"--seed-memories", "0", "--mix", "insert=1")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "413:") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestLoadAtARate: `memoria load --rate` offers its requests on a
// schedule: each one due in the window sent or counted as not sent; a rate
// below zero is refused in one line.
func TestLoadAtARate(t *testing.T) {
	srv := startServer(t, t.TempDir())
	out, errOut, code := run(t, "load", "--server", srv.url, "--clients", "4", "--rate", "30", "--duration", "2s", "--sonas", "1",
		"--seed-memories", "1", "--mix", "insert=1,get=1", "--json")
	var rep loadgen.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	if rep.Rate != 30 || rep.Requests+rep.Unsent != 60 || rep.Requests == 0 || rep.Errors != 0 {
		t.Fatalf("load at 30/s for 2 s: %s", out)
	}
	_, errOut, code = run(t, "load", "--server", srv.url, "--rate", "-1", "--duration", "1s")
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "rate") {
		t.Fatalf("--rate -1: exit %d, stderr %q", code, errOut)
	}
}

// TestLoadInStretches: `memoria load --every` prints each stretch of the
// load as it ends, on stderr, and all of them under the routes, each with
// the memories the server holds then (more and more: the load inserts); a
// stretch's length below zero, and --server-profiles of a server it did
// not start, are refused in one line.
func TestLoadInStretches(t *testing.T) {
	srv := startServer(t, t.TempDir())
	out, errOut, code := run(t, "load", "--server", srv.url, "--clients", "4", "--every", "1s", "--duration", "3s", "--sonas", "2",
		"--seed-memories", "1", "--mix", "insert=1,recall=1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rows := func(text string) [][]string {
		var rs [][]string
		for _, l := range strings.Split(text, "\n") {
			if f := strings.Fields(l); len(f) == 10 && f[0] != "until" {
				rs = append(rs, f)
			}
		}
		return rs
	}
	live, table := rows(errOut), rows(out)
	if len(table) < 3 || len(table) > 4 || !slices.EqualFunc(live, table, slices.Equal) ||
		strings.Count(errOut, "until s") != 1 || strings.Count(out, "until s") != 1 {
		t.Fatalf("stretches told %q, reported %q\n%s\n%s", live, table, errOut, out)
	}
	first, last := -1, 0
	for _, r := range table {
		memories, err := strconv.Atoi(r[9])
		if err != nil || memories < last || r[1] == "0" || r[6] != "-" { // no CPU figure: not its server
			t.Fatalf("stretch %q after %d memories", r, last)
		}
		if first < 0 {
			first = memories
		}
		last = memories
	}
	if last <= first { // a last stretch of a few milliseconds may insert none
		t.Fatalf("memories %d → %d over the stretches %q", first, last, table)
	}
	_, errOut, code = run(t, "load", "--server", srv.url, "--server-profiles", t.TempDir(), "--duration", "1s")
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "--server-profiles") {
		t.Fatalf("--server-profiles with --server: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = run(t, "load", "--server", srv.url, "--every", "-1s", "--duration", "1s")
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "stretches") {
		t.Fatalf("--every -1s: exit %d, stderr %q", code, errOut)
	}
}

// writeConfig writes a YAML config file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "memoria.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
