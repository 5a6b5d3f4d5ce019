package store

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"
	"golang.org/x/sys/unix"

	"github.com/memoria-ai/memoria/internal/clock"
)

// The pages of Badger's tables the process maps. Badger reads its tables
// in place, through a mapping of each file (mmap), and a page the process
// touched stays mapped — counted in its resident set (RSS) — for as long
// as the table lives. The kernel maps more than what is read: a fault on a
// page of a file in the page cache maps its cached neighbours too (fault-
// around, 64 KiB), so a point read of a 4 KiB block maps up to 16 pages.
// At 1M memories a server's open and its caches' warming map 0.5–0.8 GiB
// of table pages, and a minute of recalls 1.2 GiB, most of it read once
// (README, issue 15).
//
// releaseMapped lets them go: madvise(MADV_DONTNEED) over every table's
// mapping drops the process's mapping of its pages, not the pages — the
// files are Badger's, immutable once written and mapped shared, so the
// page cache keeps them and a read that touches one again maps it back
// without reading the disk (a minor fault). What a process maps of them
// is then what it read since the last release.
//
// Badger keeps its tables' mappings to itself; the levels' table lists are
// reached by reflection (badgerLevels), and a table is held (IncrRef)
// while its mapping is advised, so that no compaction unmaps it
// meanwhile: the advice is never given to an address the table no longer
// owns. The layout is Badger's v4.9 (go.mod pins it;
// TestReleaseMappedFindsTheTables fails when it changes): a store whose
// Badger has another logs so once and keeps its pages mapped.

// levelRef is one level of Badger's tree: its lock and its tables.
type levelRef struct {
	mu     *sync.RWMutex
	tables *[]*table.Table
}

// errLayout: Badger's structures are not the ones badgerLevels knows.
var errLayout = errors.New("store: badger's levels are not where this build looks for them")

// badgerLevels finds the levels of db's tree (db.lc.levels, each a
// levelHandler: an embedded RWMutex guarding tables).
func badgerLevels(db *badger.DB) ([]levelRef, error) {
	lc := reflect.ValueOf(db).Elem().FieldByName("lc")
	if lc.Kind() != reflect.Pointer || lc.IsNil() || lc.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: DB.lc", errLayout)
	}
	levels := lc.Elem().FieldByName("levels")
	if levels.Kind() != reflect.Slice || levels.Type().Elem().Kind() != reflect.Pointer {
		return nil, fmt.Errorf("%w: levelsController.levels", errLayout)
	}
	out := make([]levelRef, 0, levels.Len())
	for i := range levels.Len() {
		h := levels.Index(i)
		if h.IsNil() || h.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("%w: level %d", errLayout, i)
		}
		mu, tables := h.Elem().FieldByName("RWMutex"), h.Elem().FieldByName("tables")
		if mu.Type() != reflect.TypeFor[sync.RWMutex]() || tables.Type() != reflect.TypeFor[[]*table.Table]() {
			return nil, fmt.Errorf("%w: levelHandler", errLayout)
		}
		out = append(out, levelRef{
			mu:     (*sync.RWMutex)(unsafe.Pointer(mu.UnsafeAddr())),
			tables: (*[]*table.Table)(unsafe.Pointer(tables.UnsafeAddr())),
		})
	}
	return out, nil
}

// MappedRelease is what one release let go.
type MappedRelease struct {
	Tables int   // the tables whose mappings were advised
	Mapped int64 // the bytes of those mappings (what they may map, not what they did)
}

// releaseMapped drops the process's mappings of the pages of every table
// in levels (see the top of this file).
func releaseMapped(levels []levelRef) (MappedRelease, error) {
	var r MappedRelease
	var errs []error
	for _, l := range levels {
		l.mu.RLock()
		ts := slices.Clone(*l.tables)
		for _, t := range ts {
			t.IncrRef() // a table in a level's list holds a reference: never 0 here
		}
		l.mu.RUnlock()
		for _, t := range ts {
			if len(t.Data) > 0 {
				if err := unix.Madvise(t.Data, unix.MADV_DONTNEED); err != nil {
					errs = append(errs, fmt.Errorf("store: releasing table %d's pages: %w", t.ID(), err))
				} else {
					r.Tables++
					r.Mapped += int64(len(t.Data))
				}
			}
			if err := t.DecrRef(); err != nil { // the last reference deletes a table compacted away meanwhile
				errs = append(errs, err)
			}
		}
	}
	return r, errors.Join(errs...)
}

// releaseState is the Store's part of the releases.
type releaseState struct {
	levels   []levelRef // nil: none (no Badger, or a layout this build does not know)
	interval time.Duration
	clock    clock.Clock
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startRelease finds Badger's levels and, with an interval, releases the
// tables' pages every interval in the background.
func (s *Store) startRelease(o Options) {
	db := s.DB()
	if db == nil || o.ReleaseMappedEvery <= 0 {
		return
	}
	levels, err := badgerLevels(db)
	if err != nil {
		s.log.Warn("the tables' mapped pages are kept: this Badger is not the one the store knows", "err", err)
		return
	}
	s.release.levels, s.release.interval, s.release.clock = levels, o.ReleaseMappedEvery, clock.Or(o.Clock)
	s.release.stop, s.release.done = make(chan struct{}), make(chan struct{})
	go s.releaseLoop()
}

// stopRelease stops the releases in the background, after the one running.
func (s *Store) stopRelease() {
	if s.release.stop != nil {
		s.release.stopOnce.Do(func() { close(s.release.stop) })
		<-s.release.done
	}
}

func (s *Store) releaseLoop() {
	defer close(s.release.done)
	t := s.release.clock.NewTimer(s.release.interval)
	defer t.Stop()
	for {
		select {
		case <-s.release.stop:
			return
		case <-t.C():
		}
		if _, err := s.ReleaseMapped(); err != nil {
			s.log.Warn("releasing the tables' mapped pages", "err", err)
		}
		t.Reset(s.release.interval)
	}
}

// ReleaseMapped drops the process's mappings of the pages of Badger's
// tables now (the page cache keeps them); what the background does every
// Options.ReleaseMappedEvery. Without them (no Badger, or one of another
// layout) it does nothing.
func (s *Store) ReleaseMapped() (MappedRelease, error) {
	if s.release.levels == nil {
		return MappedRelease{}, nil
	}
	return releaseMapped(s.release.levels)
}
