package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MemoryLimit is server.memory_limit: "auto", a share of the available
// memory ("40%"), a size ("2GiB", "1500MB", "1073741824") or "off".
type MemoryLimit string

// MemoryLimitSpec is a parsed MemoryLimit: Off, or Bytes, or Fraction of
// the memory available to the process (the cgroup's limit, or the
// machine's memory).
type MemoryLimitSpec struct {
	Off      bool
	Bytes    int64
	Fraction float64
	// Auto: the fraction depends on where the limit comes from
	// (AutoCgroupFraction, AutoMachineFraction).
	Auto bool
}

// The shares of memory_limit "auto": a process with a cgroup memory limit
// (a container) is most likely alone in it; one without shares the
// machine.
const (
	AutoCgroupFraction  = 0.75
	AutoMachineFraction = 0.5
)

// MinMemoryLimit is the smallest size accepted: below it the collector
// would run nearly all the time.
const MinMemoryLimit = 64 << 20

var sizeUnits = []struct {
	suffix string
	mult   float64
}{ // longest suffixes first
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// Parse reads the setting.
func (m MemoryLimit) Parse() (MemoryLimitSpec, error) {
	s := strings.TrimSpace(string(m))
	switch strings.ToLower(s) {
	case "auto":
		return MemoryLimitSpec{Auto: true}, nil
	case "off":
		return MemoryLimitSpec{Off: true}, nil
	}
	if num, ok := strings.CutSuffix(s, "%"); ok {
		p, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(p > 0 && p <= 100) {
			return MemoryLimitSpec{}, fmt.Errorf("want a share within (0, 100]%%, got %q", s)
		}
		return MemoryLimitSpec{Fraction: p / 100}, nil
	}
	b, ok := parseSize(s)
	if !ok {
		return MemoryLimitSpec{}, fmt.Errorf(`want auto, off, a share such as "40%%" or a size such as "2GiB" or "1500MB", got %q`, s)
	}
	if b < MinMemoryLimit || b > math.MaxInt64/2 {
		return MemoryLimitSpec{}, fmt.Errorf("a size must be at least 64MiB, got %q", s)
	}
	return MemoryLimitSpec{Bytes: int64(b)}, nil
}

// parseSize reads a size such as "2GiB", "1500MB" or "1073741824".
func parseSize(s string) (float64, bool) {
	mult, num := 1.0, s
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			mult, num = u.mult, strings.TrimSpace(n)
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return f * mult, true
}

// GCHeadroom is server.gc_headroom: a size such as "512MiB", or "off".
type GCHeadroom string

// MinGCHeadroom is the smallest headroom accepted.
const MinGCHeadroom = 16 << 20

// Parse reads the setting: the headroom in bytes, 0 for "off".
func (h GCHeadroom) Parse() (int64, error) {
	s := strings.TrimSpace(string(h))
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	b, ok := parseSize(s)
	if !ok {
		return 0, fmt.Errorf(`want off or a size such as "512MiB", got %q`, s)
	}
	if b < MinGCHeadroom || b > math.MaxInt64/2 {
		return 0, fmt.Errorf("a size must be at least 16MiB, got %q", s)
	}
	return int64(b), nil
}
