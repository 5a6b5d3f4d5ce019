package store

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseValueLogPages lets go of the pages of the value log's files that
// Badger's open left mapped, and returns their bytes. To find where the
// newest file ends, the open reads it whole through its mapping (up to
// store.value_log_mb, 256 MiB, after a run of inserts), then writes to a
// new file; the pages it read stayed in the process's resident set for
// as long as it ran, though only the value log's GC reads that file
// again, and the embeddings it holds are in the vector index: 238 MiB of
// a restarted 1M store's RSS (issue 15, stop 101).
//
// It must run before anything that may unmap a value-log file starts:
// Badger deletes one only after a GC pass of ours has rewritten it, so
// between its open and the store's start every range found here is still
// that file's mapping when it is advised. MADV_DONTNEED over a shared
// file mapping takes the pages out of this process's page tables only:
// the page cache keeps them (dirty ones stay dirty, written back as
// before), and a later read maps them back without the disk. Without
// /proc (not Linux) it does nothing.
func releaseValueLogPages(dir string) (int64, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	maps, err := mappedFiles(abs, ".vlog")
	if err != nil {
		return 0, err
	}
	var released int64
	for _, m := range maps {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %s: %w", filepath.Base(m.path), errno)
		}
		released += m.rss
	}
	return released, nil
}

// mapping is one of the process's mappings of a file.
type mapping struct {
	start, end uintptr
	path       string
	rss        int64 // bytes of it resident
}

// mappedFiles are the process's mappings of the files directly in dir
// (an absolute path, symbolic links resolved, as the kernel names them)
// whose names end in suffix, from /proc/self/smaps; none without it.
func mappedFiles(dir, suffix string) ([]mapping, error) {
	f, err := os.Open("/proc/self/smaps")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mapping
	cur := -1 // the mapping whose fields follow, when it is one of dir's
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rss, ok := strings.CutPrefix(line, "Rss:"); ok {
			if cur >= 0 {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(rss, "kB")), 10, 64)
				out[cur].rss = kb << 10
			}
			continue
		}
		// A mapping's first line: "start-end perms offset dev inode path",
		// the path (which may hold spaces) after the fifth field.
		fields := strings.Fields(line)
		if len(fields) < 5 || strings.HasSuffix(fields[0], ":") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		cur = -1
		rest := line
		for range 5 {
			rest = strings.TrimLeft(rest, " ")
			rest = rest[strings.IndexByte(rest+" ", ' '):]
		}
		path := strings.TrimLeft(rest, " ")
		if filepath.Dir(path) != dir || !strings.HasSuffix(path, suffix) {
			continue // anonymous, another file, or one deleted ("(deleted)" follows its path)
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, mapping{start: uintptr(start), end: uintptr(end), path: path})
		cur = len(out) - 1
	}
	return out, sc.Err()
}
