package memlimit_test

import (
	"errors"
	"math"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/memlimit"
)

const meminfo = "MemTotal:       16384000 kB\nMemFree:         1000 kB\n"

const machine = 16384000 << 10

func files(kv ...string) fstest.MapFS {
	fs := fstest.MapFS{}
	for i := 0; i+1 < len(kv); i += 2 {
		fs[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
	}
	return fs
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name   string
		fs     fstest.MapFS
		limit  config.MemoryLimit
		bytes  int64
		source string
	}{
		{"machine, auto", files("proc/meminfo", meminfo), "auto", machine / 2, "machine"},
		{"machine, share", files("proc/meminfo", meminfo), "25%", machine / 4, "machine"},
		{"size", files(), "2GiB", 2 << 30, "configured"},
		{"off", files(), "off", 0, "off"},
		{"cgroup v2 of the process", files("proc/meminfo", meminfo, "proc/self/cgroup", "0::/svc/memoria\n",
			"sys/fs/cgroup/svc/memoria/memory.max", "4294967296\n"), "auto", 3 << 30, "cgroup"},
		{"cgroup v2 namespaced root", files("proc/meminfo", meminfo, "proc/self/cgroup", "0::/\n",
			"sys/fs/cgroup/memory.max", "2147483648\n"), "50%", 1 << 30, "cgroup"},
		{"cgroup v2 without a limit", files("proc/meminfo", meminfo, "proc/self/cgroup", "0::/\n",
			"sys/fs/cgroup/memory.max", "max\n"), "auto", machine / 2, "machine"},
		{"cgroup v1 limit", files("proc/meminfo", meminfo, "proc/self/cgroup", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "1073741824\n"), "auto", 3 << 28, "cgroup"},
		{"cgroup v1 unlimited", files("proc/meminfo", meminfo, "proc/self/cgroup", "4:memory:/x\n",
			"sys/fs/cgroup/memory/x/memory.limit_in_bytes", "9223372036854771712\n"), "auto", machine / 2, "machine"},
		{"cgroup above the machine", files("proc/meminfo", meminfo, "proc/self/cgroup", "0::/\n",
			"sys/fs/cgroup/memory.max", "1099511627776\n"), "auto", machine / 2, "machine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := memlimit.Resolve(tc.limit, tc.fs)
			if err != nil {
				t.Fatal(err)
			}
			if l.Bytes != tc.bytes || !strings.Contains(l.Source, tc.source) {
				t.Fatalf("got %d (%s), want %d from %s", l.Bytes, l.Source, tc.bytes, tc.source)
			}
		})
	}
	if _, err := memlimit.Resolve("auto", files()); !errors.Is(err, memlimit.ErrUnknown) {
		t.Fatalf("no /proc/meminfo: %v", err)
	}
	if _, err := memlimit.Resolve("auto", files("proc/meminfo", "MemTotal: lots\n")); !errors.Is(err, memlimit.ErrUnknown) {
		t.Fatalf("bad /proc/meminfo: %v", err)
	}
}

func TestApply(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	noEnv := func(string) string { return "" }
	if _, err := memlimit.Apply("1GiB", noEnv, files()); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("limit %d after 1GiB", got)
	}
	// GOMEMLIMIT wins: the runtime's limit is left alone.
	l, err := memlimit.Apply("2GiB", func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}, files())
	if err != nil || debug.SetMemoryLimit(-1) != 1<<30 || !strings.HasPrefix(l.Source, "GOMEMLIMIT") {
		t.Fatalf("with GOMEMLIMIT: %+v, %v", l, err)
	}
	if _, err := memlimit.Apply("off", noEnv, files()); err != nil || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("off: %v", err)
	}
}
