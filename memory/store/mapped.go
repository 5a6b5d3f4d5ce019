package store

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// releaseValueLogPages lets go of the mapped pages of the value-log files
// in dir whose numbers are under below, and returns their bytes: at the
// open (all of them), then every releaseEvery (releaseWritten). To find where the
// newest file ends, the open reads it whole through its mapping (up to
// store.value_log_mb, 256 MiB, after a run of inserts), then writes to a
// new file; the pages it read stayed in the process's resident set for
// as long as it ran, though only the value log's GC reads that file
// again, and the embeddings it holds are in the vector index: 238 MiB of
// a restarted 1M store's RSS (issue 15, stop 101).
//
// Nothing may unmap a value-log file between the reading of the mappings
// and their advice, or another mapping made at the same address since
// (the Go heap's) would lose its pages: Badger unmaps a file when it
// deletes it, only once a GC pass of ours has had it rewritten (and the
// last iterator open then is closed), and when it finishes writing one
// (it may remap it elsewhere), before it writes the next. So at the open
// nothing can, and releaseWritten leaves out the newest file and waits
// for every rewritten file to be gone. MADV_DONTNEED over a shared
// file mapping takes the pages out of this process's page tables only:
// the page cache keeps them (dirty ones stay dirty, written back as
// before), and a later read maps them back without the disk. Without
// /proc (not Linux) it does nothing.
func releaseValueLogPages(dir string, below uint64) (int64, error) {
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
		if fid, ok := valueLogFid(filepath.Base(m.path)); !ok || fid >= below {
			continue
		}
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

// releaseEvery is how often the pages of the value log's files Badger
// has finished writing are let go (releaseWritten).
const releaseEvery = 30 * time.Second

// releaseWritten lets go of the pages mapped of the value log's files
// Badger no longer writes: it writes the newest through its mapping, and
// each page written stayed in the process's resident set until the next
// start (an embedding's 1.5 KB a memory: 1.4 GiB of a server that grew a
// store to 1M). It runs between the GC passes (gc.mu held: none has
// Badger rewrite a file meanwhile), and not while a file a pass rewrote
// is still in the directory: Badger may delete it, unmapping it, once the
// iterators open at its rewrite are closed.
func (s *Store) releaseWritten() {
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	names, err := valueLogFiles(s.dir)
	if err != nil {
		s.log.Warn("store: listing the value log", "err", err)
		return
	}
	gone := len(s.gc.seen)
	var newest uint64
	for _, n := range names {
		if s.gc.seen[n] {
			gone--
		}
		if fid, ok := valueLogFid(n); ok {
			newest = max(newest, fid)
		}
	}
	if gone != s.gc.rewrites || newest == 0 {
		return // a rewritten file may yet be deleted (more gone than rewritten: something else deletes them)
	}
	if n, err := releaseValueLogPages(s.dir, newest); err != nil {
		s.log.Warn("store: the value log's written pages stay mapped", "err", err)
	} else if n > 0 {
		s.log.Debug("store: released the value log's written pages", "mib", n>>20)
	}
}

// seeValueLog notes the value log's files before a pass has one
// rewritten (gc.mu held).
func (s *Store) seeValueLog() error {
	names, err := valueLogFiles(s.dir)
	if err != nil {
		return err
	}
	if s.gc.seen == nil {
		s.gc.seen = map[string]bool{}
	}
	for _, n := range names {
		s.gc.seen[n] = true
	}
	return nil
}

// valueLogFiles are the names of the value log's files in dir.
func valueLogFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if _, ok := valueLogFid(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// valueLogFid is the number of the value-log file named name (Badger's
// "000042.vlog").
func valueLogFid(name string) (uint64, bool) {
	num, ok := strings.CutSuffix(name, ".vlog")
	if !ok {
		return 0, false
	}
	fid, err := strconv.ParseUint(num, 10, 32)
	return fid, err == nil
}
