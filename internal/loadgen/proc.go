package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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

// ProcSample is a process's CPU time and memory at one moment.
type ProcSample struct {
	At time.Time `json:"-"`
	// CPU is the process's user and system time so far (utime + stime of
	// /proc/<pid>/stat, all its threads; 10 ms resolution).
	CPU time.Duration `json:"-"`
	ProcMemory
}

// ReadProc reads a process's CPU time and memory from /proc.
func ReadProc(pid int) (ProcSample, error) {
	cpu, err := ReadProcCPU(pid)
	if err != nil {
		return ProcSample{}, err
	}
	m, err := ReadProcMemory(pid)
	return ProcSample{At: time.Now(), CPU: cpu, ProcMemory: m}, err
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 on every architecture Go supports but alpha.
const userHZ = 100

// ReadProcCPU reads the user and system CPU time a process has used, all
// its threads together, from /proc/<pid>/stat.
func ReadProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("loadgen: CPU time of process %d: %w", pid, err)
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (time.Duration, error) {
	// "pid (comm) state ppid …": comm may hold spaces and parentheses, so
	// the fields are counted from its last ')'. utime and stime are fields
	// 14 and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("loadgen: /proc stat: no command field")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("loadgen: /proc stat: %d fields after the command, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("loadgen: /proc stat: CPU time %q", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
