package store_test

import (
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
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
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
