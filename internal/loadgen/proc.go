package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcMemory is a process's memory as Linux reports it in
// /proc/<pid>/status, in bytes.
type ProcMemory struct {
	// RSS is the resident set (VmRSS): Anon + File + Shmem.
	RSS int64 `json:"rss_bytes"`
	// Peak is the largest RSS so far (VmHWM).
	Peak int64 `json:"peak_rss_bytes"`
	// Anon is resident anonymous memory (RssAnon): the Go heap, stacks,
	// Badger's caches and memtables.
	Anon int64 `json:"anon_bytes"`
	// File is resident file-backed memory (RssFile): the pages of
	// Badger's memory-mapped tables and logs, which the kernel can drop.
	File int64 `json:"file_bytes"`
}

// ReadProcMemory reads /proc/<pid>/status.
func ReadProcMemory(pid int) (ProcMemory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcMemory{}, fmt.Errorf("loadgen: memory of process %d: %w", pid, err)
	}
	return parseProcStatus(b)
}

func parseProcStatus(b []byte) (ProcMemory, error) {
	var m ProcMemory
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.Peak, "RssAnon": &m.Anon, "RssFile": &m.File}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		dst := fields[name]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(rest) // "123456 kB"
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("loadgen: /proc status: unexpected %s line %q", name, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("loadgen: /proc status: %s: %w", name, err)
		}
		*dst = kb << 10
		seen++
	}
	if seen != len(fields) {
		return m, fmt.Errorf("loadgen: /proc status lacks VmRSS, VmHWM, RssAnon or RssFile")
	}
	return m, nil
}
