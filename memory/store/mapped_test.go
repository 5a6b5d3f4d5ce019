package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/memoria-ai/memoria/config"
)

// mappedTableKiB is how much of the tables of the store in dir the
// process has resident through their mappings (/proc/self/smaps).
func mappedTableKiB(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatalf("the test reads the process's mappings from /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var kib int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && strings.HasPrefix(fields[5], dir) && strings.HasSuffix(fields[5], ".sst")
		case in && fields[0] == "Rss:":
			n, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			kib += n
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kib
}

// fillTables writes n keys of 1 KiB values under prefix and has them
// flushed and compacted into tables.
func fillTables(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 500 {
		if err := s.Update(ctx, func(tx Tx) error {
			for j := i; j < min(i+500, n); j++ {
				tx.Set(fmt.Appendf(nil, "%s%06d", prefix, j), []byte(strings.Repeat(strconv.Itoa(j%10), 1024)))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(ctx, true); err != nil { // flushes the memtables and compacts the tables
		t.Fatal(err)
	}
}

// readAll reads the n keys fillTables wrote under prefix and checks their values.
func readAll(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	if err := s.View(func(r Reader) error {
		for j := range n {
			v, err := r.Get(fmt.Appendf(nil, "%s%06d", prefix, j))
			if err != nil {
				return err
			}
			if want := strings.Repeat(strconv.Itoa(j%10), 1024); string(v) != want {
				return fmt.Errorf("key %d: %d bytes, not the ones written", j, len(v))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseMappedFindsTheTables(t *testing.T) {
	dir := t.TempDir()
	o := OptionsOf(config.Default().Store)
	o.ReleaseMappedEvery = 0 // released by hand below
	o.GC.Interval = 0
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if rel, err := s.ReleaseMapped(); err != nil || rel.Tables != 0 {
		t.Fatalf("without the releases in the background, ReleaseMapped = %+v, %v; want nothing done", rel, err)
	}
	s.startRelease(Options{ReleaseMappedEvery: 1 << 62}) // finds the levels; never fires
	if s.release.levels == nil {
		t.Fatal("badgerLevels found no levels: Badger's layout changed (memory/store/mapped.go)")
	}

	const n = 20_000
	fillTables(t, s, "t/", n)
	tables := len(s.DB().Tables())
	if tables == 0 {
		t.Fatal("the store wrote no table")
	}
	readAll(t, s, "t/", n)
	before := mappedTableKiB(t, dir)
	if before < 1024 {
		t.Fatalf("reading %d keys left %d KiB of the tables mapped: the test measures nothing", n, before)
	}
	rel, err := s.ReleaseMapped()
	if err != nil {
		t.Fatal(err)
	}
	if rel.Tables != tables || rel.Mapped <= 0 {
		t.Fatalf("ReleaseMapped = %+v; want the store's %d tables", rel, tables)
	}
	if after := mappedTableKiB(t, dir); after > before/10 {
		t.Fatalf("after the release %d KiB of the tables stay mapped (%d before)", after, before)
	}
	readAll(t, s, "t/", n) // mapped back from the page cache, unchanged
	if again := mappedTableKiB(t, dir); again < 1024 {
		t.Fatalf("reading again mapped %d KiB: the reads did not go through the mappings released", again)
	}
}

// TestReleaseMappedBesideCompactions releases the tables' pages while
// writes, flushes and compactions add and delete tables: every table
// released is held, none is unmapped meanwhile, and what was written
// reads back whole (run it with -race).
func TestReleaseMappedBesideCompactions(t *testing.T) {
	dir := t.TempDir()
	o := OptionsOf(config.Default().Store)
	o.ReleaseMappedEvery = 0
	o.GC.Interval = 0
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.startRelease(Options{ReleaseMappedEvery: 1 << 62})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var releases int
	var relErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.ReleaseMapped(); err != nil {
				relErr = err
				return
			}
			releases++
		}
	})
	const n = 4_000
	for round := range 4 {
		fillTables(t, s, fmt.Sprintf("r%d/", round), n)
	}
	close(stop)
	wg.Wait()
	if relErr != nil {
		t.Fatal(relErr)
	}
	if releases == 0 {
		t.Fatal("no release ran beside the writes")
	}
	for round := range 4 {
		readAll(t, s, fmt.Sprintf("r%d/", round), n)
	}
}
