package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/store"
)

// recordedTables are the table IDs memoria.tables records, sorted.
func recordedTables(t *testing.T, dir string) []string {
	t.Helper()
	var rec struct{ Tables map[string]json.RawMessage }
	b, err := os.ReadFile(filepath.Join(dir, "memoria.tables"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for id := range rec.Tables {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// storeTables are the IDs of the store's tables, sorted.
func storeTables(s *store.Store) []string {
	var ids []string
	for _, ti := range s.DB().Tables() {
		ids = append(ids, fmt.Sprint(ti.ID))
	}
	slices.Sort(ids)
	return ids
}

// The tables written while the store is open are checked in the
// background and recorded, so that the next open checks none of them in
// full; a damaged one is logged, left out of the record, and named by
// the next open.
func TestNewTablesAreCheckedInTheBackground(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var (
		s    *store.Store
		clk  *clock.Fake
		logs memorytest.LogBuffer
	)
	open := func() {
		t.Helper()
		clk = clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		o := smallOptions()
		o.Clock = clk
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		var err error
		if s, err = store.Open(dir, o); err != nil {
			t.Fatal(err)
		}
	}
	// write writes blocks and has them flushed and compacted into new
	// tables; it returns them.
	write := func(what string) []string {
		t.Helper()
		before := storeTables(s)
		for i := range 300 {
			b := []byte(fmt.Sprintf("block %d of %s, written while the store is open", i, what))
			if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutBlock(rawCID(t, b), b) }); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.GC(ctx, true); err != nil {
			t.Fatal(err)
		}
		var fresh []string
		for _, id := range storeTables(s) {
			if !slices.Contains(before, id) {
				fresh = append(fresh, id)
			}
		}
		if len(fresh) == 0 {
			t.Fatal("no new table")
		}
		return fresh
	}
	pass := func() {
		t.Helper()
		testutil.Eventually(t, "the check's timer", func() bool { return clk.Pending() == 1 })
		clk.Advance(time.Minute)
	}

	open()
	write("the first tables")
	tables := storeTables(s)
	if got := recordedTables(t, dir); len(got) != 0 {
		t.Fatalf("recorded %v before a pass", got)
	}
	pass()
	testutil.Eventually(t, "the new tables recorded", func() bool { return slices.Equal(recordedTables(t, dir), tables) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, reopened, err := openLogged(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if want := fmt.Sprintf("in_full=0 unchanged=%d", len(tables)); !strings.Contains(reopened.String(), want) {
		t.Fatalf("the open after the pass did not log %q:\n%s", want, reopened)
	}

	// A table damaged before its check.
	open()
	fresh := write("a table damaged before its check")[0]
	path := filepath.Join(dir, fmt.Sprintf("%06s.sst", fresh))
	testutil.FlipByte(t, path, 1.0/3, 0xff)
	pass()
	testutil.Eventually(t, "the damaged table logged", func() bool { return strings.Contains(logs.String(), "fails its check") })
	testutil.Eventually(t, "the pass over", func() bool { return clk.Pending() == 1 })
	if slices.Contains(recordedTables(t, dir), fresh) {
		t.Fatalf("the damaged table %s recorded as checked", fresh)
	}
	s.Close()
	if _, _, err = openLogged(t, dir); !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(path)) {
		t.Fatalf("open after a table was damaged: %v, want corruption of %s", err, filepath.Base(path))
	}
}

// manifestCompressions are how the manifest of the store in dir says
// each of its tables is compressed.
func manifestCompressions(t *testing.T, dir string) map[uint64]options.CompressionType {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bo := badger.DefaultOptions(dir)
	m, _, err := badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]options.CompressionType{}
	for id, tm := range m.Tables {
		out[id] = tm.Compression
	}
	return out
}

// A store whose tables are compressed (snappy: every build wrote them so
// before store.compression) opens with compression none. It reads them;
// its checks — the one a broken invariant runs (Explain) and the one in
// the background — check each table as it was written, the old ones as
// snappy and the new ones as none; it keeps its block cache while a
// compressed table remains, and opens without one once compactions have
// rewritten them all.
func TestCompressionChangesTableByTable(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var logs memorytest.LogBuffer
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func(c options.CompressionType) *store.Store {
		t.Helper()
		o := smallOptions()
		o.Compression, o.Clock = c, clk
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		s, err := store.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var blocks [][]byte
	write := func(s *store.Store, what string) {
		t.Helper()
		for i := range 300 {
			b := []byte(fmt.Sprintf("block %d of %s, %s", i, what, strings.Repeat("words that compress well ", 20)))
			if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutBlock(rawCID(t, b), b) }); err != nil {
				t.Fatal(err)
			}
			blocks = append(blocks, b)
		}
		if _, err := s.GC(ctx, true); err != nil { // flushed and compacted
			t.Fatal(err)
		}
	}
	readAll := func(s *store.Store) {
		t.Helper()
		err := s.View(func(r store.Reader) error {
			for _, b := range blocks {
				got, err := store.ReadBlock(r, rawCID(t, b))
				if err != nil {
					return err
				}
				if !bytes.Equal(got, b) {
					return fmt.Errorf("read %q, want %q", got, b)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	checks := func(s *store.Store) {
		t.Helper()
		broken := errors.New("an invariant broken")
		if err := s.Explain(broken); err != broken {
			t.Fatalf("the tables' check: %v", err)
		}
	}

	s := open(options.Snappy)
	write(s, "the snappy tables")
	s.Close()
	old := manifestCompressions(t, dir)
	if len(old) == 0 {
		t.Fatal("no table written")
	}
	for id, c := range old {
		if c != options.Snappy {
			t.Fatalf("table %d written with compression %d, want snappy", id, c)
		}
	}

	s = open(options.None)
	if want := fmt.Sprintf("rewritten uncompressed as compactions replace them\" tables=%d share_of_bytes=1.000 block_cache=true", len(old)); !strings.Contains(logs.String(), want) {
		t.Fatalf("the open did not log %q:\n%s", want, logs.String())
	}
	readAll(s)
	checks(s)
	if st := s.BlockCacheStats(); st.Hits+st.Misses == 0 {
		t.Fatal("the compressed tables read without the block cache")
	}
	write(s, "the tables of compression none")
	readAll(s)
	checks(s)
	testutil.Eventually(t, "the check's timer", func() bool { return clk.Pending() == 1 })
	clk.Advance(time.Minute)
	testutil.Eventually(t, "the new tables recorded", func() bool { return slices.Equal(recordedTables(t, dir), storeTables(s)) })
	if strings.Contains(logs.String(), "fails its check") {
		t.Fatalf("a table failed its check in the background:\n%s", logs.String())
	}
	s.Close()
	for id, c := range manifestCompressions(t, dir) {
		if _, before := old[id]; before {
			t.Fatalf("table %d of the snappy store not rewritten by the compaction", id)
		}
		if c != options.None {
			t.Fatalf("table %d written with compression %d, want none", id, c)
		}
	}

	s = open(options.None)
	defer s.Close()
	readAll(s)
	checks(s)
	if st := s.BlockCacheStats(); st != (store.CacheStats{}) {
		t.Fatalf("a block cache for uncompressed tables: %+v", st)
	}
}
