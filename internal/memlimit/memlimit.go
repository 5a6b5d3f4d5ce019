// Package memlimit sets the Go runtime's soft memory limit from
// server.memory_limit: it finds the memory available to the process (its
// cgroup's limit, v2 or v1, or the machine's memory) and applies the
// configured share or size, unless GOMEMLIMIT is set.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/memoria-ai/memoria/config"
)

// ErrUnknown means the memory available could not be found (no
// /proc/meminfo): a share cannot be computed.
var ErrUnknown = errors.New("memlimit: the memory available is unknown")

// Limit is what Apply decided.
type Limit struct {
	// Bytes is the limit set, 0 when none was.
	Bytes int64
	// Source says where it comes from: "GOMEMLIMIT" (left to the
	// runtime), "off", "configured", or "cgroup" / "machine" with the
	// share and the memory it is a share of.
	Source string
}

// Apply sets the runtime's memory limit for spec unless getenv reports
// GOMEMLIMIT. root is the file system holding /proc and /sys (os.DirFS("/")).
func Apply(ml config.MemoryLimit, getenv func(string) string, root fs.FS) (Limit, error) {
	if v := getenv("GOMEMLIMIT"); v != "" {
		return Limit{Bytes: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT=" + v}, nil
	}
	l, err := Resolve(ml, root)
	if err != nil {
		return l, err
	}
	if l.Bytes > 0 {
		debug.SetMemoryLimit(l.Bytes)
	} else {
		debug.SetMemoryLimit(math.MaxInt64) // the runtime's "no limit"
	}
	return l, nil
}

// Resolve turns the setting into bytes (0: no limit) without applying it.
func Resolve(ml config.MemoryLimit, root fs.FS) (Limit, error) {
	spec, err := ml.Parse()
	if err != nil {
		return Limit{}, fmt.Errorf("memlimit: server.memory_limit: %w", err)
	}
	switch {
	case spec.Off:
		return Limit{Source: "off"}, nil
	case spec.Bytes > 0:
		return Limit{Bytes: spec.Bytes, Source: "configured"}, nil
	}
	avail, from, err := Available(root)
	if err != nil {
		return Limit{}, err
	}
	frac := spec.Fraction
	if spec.Auto {
		frac = config.AutoMachineFraction
		if from == "cgroup" {
			frac = config.AutoCgroupFraction
		}
	}
	return Limit{
		Bytes:  int64(float64(avail) * frac),
		Source: fmt.Sprintf("%g%% of the %s's %d MiB", frac*100, from, avail>>20),
	}, nil
}

// Available returns the memory the process may use and where that comes
// from: "cgroup" when its cgroup (v2 memory.max or v1
// memory.limit_in_bytes) sets a limit below the machine's memory, else
// "machine" (MemTotal of /proc/meminfo).
func Available(root fs.FS) (int64, string, error) {
	total, err := memTotal(root)
	if err != nil {
		return 0, "", err
	}
	if lim, ok := cgroupLimit(root); ok && lim < total {
		return lim, "cgroup", nil
	}
	return total, "machine", nil
}

func memTotal(root fs.FS) (int64, error) {
	b, err := fs.ReadFile(root, "proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnknown, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && kb > 0 {
				return kb << 10, nil
			}
		}
		return 0, fmt.Errorf("%w: bad MemTotal line %q", ErrUnknown, sc.Text())
	}
	return 0, fmt.Errorf("%w: no MemTotal in /proc/meminfo", ErrUnknown)
}

// cgroupLimit reads the memory limit of the process's cgroup: its own
// directory under /sys/fs/cgroup (from /proc/self/cgroup) first, then the
// root of the mount (inside a container's cgroup namespace, the
// container's own). "max", absent files and v1's "unlimited" (a huge
// number) are no limit.
func cgroupLimit(root fs.FS) (int64, bool) {
	var candidates []string
	if b, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 || strings.Contains(parts[2], "..") {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "": // v2
				candidates = append(candidates, path.Join("sys/fs/cgroup", parts[2], "memory.max"))
			case hasController(parts[1], "memory"): // v1
				candidates = append(candidates, path.Join("sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes"))
			}
		}
	}
	candidates = append(candidates, "sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, name := range candidates {
		b, err := fs.ReadFile(root, name)
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			continue
		}
		if n >= 1<<60 { // v1 writes "unlimited" as a page-rounded MaxInt64
			return 0, false
		}
		return n, true
	}
	return 0, false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
