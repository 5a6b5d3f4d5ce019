package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
)

// TestUnsyncedValueLogFailsTheCommit: Badger only logs a failed sync of
// its value log (valueLog.write, with this very format); the commit it
// happened in is refused, not acknowledged, and the next one goes on.
func TestUnsyncedValueLogFailsTheCommit(t *testing.T) {
	s, err := Open(t.TempDir(), OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set := func() error {
		return s.Update(context.Background(), func(tx Tx) error {
			tx.Set([]byte("v/x"), []byte("vector"))
			return nil
		})
	}
	s.DB().Opts().Logger.Errorf("Error while curlf sync: %v\n", errors.New("sync /data/000001.vlog: input/output error"))
	if err := set(); err == nil || !strings.Contains(err.Error(), "the value log was not synced: sync /data/000001.vlog: input/output error") {
		t.Fatalf("commit after a failed sync of the value log: %v", err)
	}
	if err := set(); err != nil {
		t.Fatalf("the next commit: %v", err)
	}
}

// TestWriteStallsCounted: Badger only logs that it held the writes back
// while level 0 of its tree was full (levelsController.addLevel0Table,
// with this very format, at info); the store warns and counts each stall
// and its length in CommitStats.
func TestWriteStallsCounted(t *testing.T) {
	var logs bytes.Buffer
	o := OptionsOf(config.Default().Store)
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c := s.CommitStats(); c.Stalls != 0 || c.Stalled != 0 {
		t.Fatalf("a new store has stalled: %+v", c)
	}
	lg := s.DB().Opts().Logger
	lg.Infof("L0 was stalled for %s\n", (1500 * time.Millisecond).Round(time.Millisecond))
	lg.Infof("L0 was stalled for %s\n", (250 * time.Millisecond).Round(time.Millisecond))
	lg.Infof("Lifetime L0 stalled for: %s\n", 1750*time.Millisecond) // at close: no stall of its own
	if c := s.CommitStats(); c.Stalls != 2 || c.Stalled != 1750*time.Millisecond {
		t.Errorf("after two stalls of 1.5 s and 250 ms: %d stalls, %v", c.Stalls, c.Stalled)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"writes stalled"); n != 2 || !strings.Contains(logs.String(), "stalled=1.5s") {
		t.Errorf("%d stalls warned, want 2 (the log: %s)", n, logs.String())
	}
}

// TestLiveEmbeddingsAreNoGarbage: a value log that holds only live
// embeddings measures no garbage (its size on disk less what its live
// entries take, headers and all, less a page of the file being written):
// counted by their keys and values alone, 10,000 embeddings would seem
// 180 KB of garbage, and millions a compaction's worth.
func TestLiveEmbeddingsAreNoGarbage(t *testing.T) {
	s, err := Open(t.TempDir(), OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	vec := make([]byte, 1536)
	for i := range 10 {
		if err := s.Update(context.Background(), func(tx Tx) error {
			for j := range 1000 {
				vec[0], vec[1] = byte(i), byte(j)
				tx.Set(fmt.Appendf(nil, "v/%02d-%04d", i, j), vec)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	disk, err := s.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	spaces, err := s.Spaces(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g := valueLogGarbage(disk, spaces); g > 8<<10 {
		t.Errorf("%d bytes of garbage in a value log of %d bytes holding only live embeddings", g, disk.ValueLog)
	}
}

// TestHeldTablesKeepTheirFiles: the tables the live checks read are held
// (holdTables): a compaction that replaces one meanwhile leaves its file
// whole until the hold is released. Badger truncates a replaced table's
// file before it removes it, and a read of the checker's own mapping of
// the file then faulted (SIGBUS) and ended the process, now and then
// under a steady load of writes.
func TestHeldTablesKeepTheirFiles(t *testing.T) {
	ctx := context.Background()
	o := OptionsOf(config.Default().Store)
	o.MemTableMB, o.ValueLogMB, o.MinFreeBytes, o.GC.Interval, o.SkipTableCheck = 1, 2, 2<<20, 0, true
	dir := t.TempDir()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// write writes the same keys again and has the tree compacted, so
	// that the tables holding them are replaced.
	write := func(round int) {
		t.Helper()
		for i := range 300 {
			err := s.Update(ctx, func(tx Tx) error {
				tx.Set([]byte(fmt.Sprintf("x/%04d", i)), bytes.Repeat([]byte{byte(round)}, 2048))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.GC(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	db := s.DB()
	held, release := holdTables(db)
	if len(held) == 0 {
		t.Fatal("no table held")
	}
	sizes := map[uint64]int64{}
	for id := range held {
		fi, err := os.Stat(table.NewFilename(id, dir))
		if err != nil {
			t.Fatal(err)
		}
		sizes[id] = fi.Size()
	}
	write(2)
	live := map[uint64]bool{}
	for _, ti := range db.Tables() {
		live[ti.ID] = true
	}
	var replaced []uint64
	for id := range held {
		if !live[id] {
			replaced = append(replaced, id)
		}
	}
	if len(replaced) == 0 {
		t.Fatal("no held table was replaced")
	}
	for _, id := range replaced {
		path := table.NewFilename(id, dir)
		if fi, err := os.Stat(path); err != nil || fi.Size() != sizes[id] {
			t.Fatalf("held table %d replaced: its file %v (%v), was %d bytes", id, fi, err, sizes[id])
		}
		if err := verifyTable(path, table.Options{ChkMode: options.OnTableRead, Compression: db.Opts().Compression, BlockSize: db.Opts().BlockSize}); err != nil {
			t.Fatalf("held table %d replaced: %v", id, err)
		}
	}
	release()
	for _, id := range replaced {
		if _, err := os.Stat(table.NewFilename(id, dir)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("replaced table %d released: its file is still there (%v)", id, err)
		}
	}
}

// Badger's block cache is kept for compressed tables: those the store
// writes, or old ones while they are a tenth or more of its tables' bytes.
// A few left in the last level would only have every read of the others
// ask it in vain.
func TestBlockCacheForCompressedTables(t *testing.T) {
	o := OptionsOf(config.Default().Store)
	full := int64(o.CacheMB) << 20
	for _, c := range []struct {
		setting options.CompressionType
		old     compressed
		want    int64
	}{
		{options.None, compressed{}, 0},
		{options.None, compressed{tables: 5, share: 0.02}, 0},
		{options.None, compressed{tables: 40, share: 0.1}, full},
		{options.None, compressed{tables: 262, share: 1}, full},
		{options.Snappy, compressed{}, full},
		{options.ZSTD, compressed{tables: 1, share: 0.01}, full},
	} {
		o.Compression = c.setting
		if got := blockCacheSize(o, c.old); got != c.want {
			t.Errorf("compression %d, old compressed tables %+v: block cache %d bytes, want %d", c.setting, c.old, got, c.want)
		}
	}
}

// writeEmbeddings writes 8,000 embeddings of 1.5 KB (12 MB of the value
// log), each telling its key and round.
func writeEmbeddings(t *testing.T, s *Store, round byte) {
	t.Helper()
	for i := range 8 {
		if err := s.Update(context.Background(), func(tx Tx) error {
			for j := range 1000 {
				v := make([]byte, 1536) // a value is not copied by Set
				v[0], v[1], v[2] = byte(i), byte(j), round
				tx.Set(fmt.Appendf(nil, "v/%02d-%04d", i, j), v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkEmbeddings reads some of writeEmbeddings' embeddings back.
func checkEmbeddings(t *testing.T, s *Store, round byte) {
	t.Helper()
	for i := range 8 {
		j := i * 137
		if err := s.View(func(r Reader) error {
			v, err := r.Get(fmt.Appendf(nil, "v/%02d-%04d", i, j))
			if err != nil {
				return err
			}
			if len(v) != 1536 || v[0] != byte(i) || v[1] != byte(j) || v[2] != round {
				return fmt.Errorf("v/%02d-%04d reads back as %d bytes beginning %x", i, j, len(v), v[:min(3, len(v))])
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// valueLogMapped is what of the value log of the store in dir is mapped:
// of its newest file, and of the others.
func valueLogMapped(t *testing.T, dir string) (older, newest int64) {
	t.Helper()
	abs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := mappedFiles(abs, ".vlog")
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) == 0 {
		t.Fatal("no value-log file of the store is mapped: nothing is checked")
	}
	var last uint64
	for _, m := range maps {
		fid, _ := valueLogFid(filepath.Base(m.path))
		last = max(last, fid)
	}
	for _, m := range maps {
		if fid, _ := valueLogFid(filepath.Base(m.path)); fid == last {
			newest += m.rss
		} else {
			older += m.rss
		}
	}
	return older, newest
}

// TestOpenLeavesNoValueLogPagesMapped: Badger's open reads the newest
// value-log file whole through its mapping; the store lets those pages go
// (releaseValueLogPages), and the values read back whole.
func TestOpenLeavesNoValueLogPagesMapped(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	writeEmbeddings(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The 12 MB written are in the newest file but one (the open begins a
	// new one), which the open read whole.
	if older, newest := valueLogMapped(t, dir); older+newest > 0 {
		t.Errorf("%d KiB of the value log's pages mapped after the open, want none", (older+newest)>>10)
	}
	checkEmbeddings(t, s, 1)
}

// TestWrittenValueLogPagesAreReleased: between the GC passes the pages of
// the value-log files Badger has finished writing are let go, the newest
// file's kept; not while more files were rewritten than are gone (one may
// yet be unmapped); and a real pass's rewrites, once deleted, count as
// gone. What was let go reads back whole.
func TestWrittenValueLogPagesAreReleased(t *testing.T) {
	fake := clock.NewFake(time.Unix(1e9, 0))
	o := OptionsOf(config.Default().Store)
	o.MemTableMB, o.ValueLogMB, o.MinFreeBytes = 4, 2, 2<<20
	o.GC.Interval = time.Hour
	o.Clock = fake
	dir := t.TempDir()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeEmbeddings(t, s, 1)
	older, _ := valueLogMapped(t, dir)
	if older < 4<<20 {
		t.Fatalf("%d KiB of finished value-log files mapped after 12 MB written: nothing is checked", older>>10)
	}

	// A file rewritten and still in the directory: nothing is let go.
	s.gc.mu.Lock()
	if err := s.seeValueLog(); err != nil {
		t.Fatal(err)
	}
	s.gc.rewrites++
	s.gc.mu.Unlock()
	s.releaseWritten()
	if now, _ := valueLogMapped(t, dir); now < older {
		t.Fatalf("pages let go (%d → %d KiB) while a rewritten file was still there", older>>10, now>>10)
	}

	// That file gone: the next tick lets go of all but the newest's.
	s.gc.mu.Lock()
	s.gc.seen["000000.vlog"] = true
	s.gc.mu.Unlock()
	fake.Advance(releaseEvery)
	for deadline := time.Now().Add(10 * time.Second); ; {
		older, newest := valueLogMapped(t, dir)
		if older == 0 {
			if newest == 0 {
				t.Error("the newest file's pages were let go too")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d KiB of finished value-log files still mapped 10 s after the tick", older>>10)
		}
		runtime.Gosched()
	}

	// A real pass: every value rewritten, the files full of garbage
	// rewritten by Badger and deleted, which the count sees.
	writeEmbeddings(t, s, 2)
	rep, err := s.GC(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rewritten == 0 {
		t.Fatal("the pass rewrote no value-log file: nothing is checked")
	}
	s.releaseWritten()
	if older, _ := valueLogMapped(t, dir); older != 0 {
		t.Errorf("%d KiB of finished value-log files mapped after the pass's rewrites were deleted", older>>10)
	}
	checkEmbeddings(t, s, 2)
}

// TestBatchGetCopiesItsPendingWrites: Badger gives a write transaction's
// read of a key it wrote the value as it was set; the batch's Get copies
// it, so that an operation that changes what it read does not change
// what an earlier operation of its batch wrote.
func TestBatchGetCopiesItsPendingWrites(t *testing.T) {
	s, err := Open(t.TempDir(), OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.eng.(*badgerEngine).begin()
	defer b.discard()
	val := []byte("pending")
	if err := b.set([]byte("m/new"), val); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get([]byte("m/new"))
	if err != nil || string(got) != "pending" {
		t.Fatalf("read %q, %v", got, err)
	}
	got[0] = 'P'
	if string(val) != "pending" {
		t.Fatalf("the batch's read shares its pending write: %q", val)
	}
}
