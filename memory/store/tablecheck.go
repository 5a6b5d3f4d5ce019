package store

import (
	"errors"
	"math"
	"os"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/table"

	"github.com/memoria-ai/memoria/internal/clock"
)

// The tables Badger writes while the store is open — memtable flushes and
// compactions — are checked in the background, one at a time, a pass
// every tableCheckInterval, and recorded in checkedFile as the check at
// open records the tables it passes (verifyTables). A restart then only
// reads and sums them, where it would otherwise check every table
// written since the last open in full: after a run whose compactions
// rewrote most of a 1M-memory store's tree, 130 of its 197 tables and
// 3.4 s of the restart here. A table that fails its check is logged and
// left out of the record, so that the next open checks it again and, if
// it is still damaged, refuses to serve naming it.

// tableCheckInterval is how long a pass waits after the last one.
const tableCheckInterval = time.Minute

// tableChecks is the Store's part of the checks in the background.
type tableChecks struct {
	clock    clock.Clock
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// known is the record: what passed, by table ID (the tables a
	// compaction removed are dropped at the next pass); failed what did
	// not (checked again at the next open only).
	known  map[uint64]tableSum
	failed map[uint64]bool
}

func (s *Store) startTableChecks(o Options) {
	if o.SkipTableCheck || s.DB() == nil {
		return
	}
	t := &s.tables
	t.clock = clock.Or(o.Clock)
	t.known, t.failed = readChecked(s.dir), map[uint64]bool{}
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	go s.tableCheckLoop()
}

func (s *Store) stopTableChecks() {
	if t := &s.tables; t.stop != nil {
		t.stopOnce.Do(func() { close(t.stop) })
		<-t.done
	}
}

func (s *Store) tableCheckLoop() {
	t := &s.tables
	defer close(t.done)
	timer := t.clock.NewTimer(tableCheckInterval)
	defer timer.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-timer.C():
		}
		s.checkNewTables()
		timer.Reset(tableCheckInterval)
	}
}

// checkNewTables checks the tables of the store not yet in the record,
// and writes the record when it changed.
func (s *Store) checkNewTables() {
	t := &s.tables
	db, bo := s.DB(), s.DB().Opts()
	live := map[uint64]bool{}
	changed := false
	for _, ti := range db.Tables() {
		live[ti.ID] = true
		if _, ok := t.known[ti.ID]; ok || t.failed[ti.ID] {
			continue
		}
		select {
		case <-t.stop:
			return
		default:
		}
		// Held for its own check only: a hold keeps every table and
		// memtable the tree had, which a pass over many new tables would
		// keep for seconds.
		held, release := holdTables(db)
		var sum tableSum
		err := os.ErrNotExist // compacted away meanwhile
		if held[ti.ID] {
			sum, err = checkTable(table.NewFilename(ti.ID, s.dir), s.eng.(*badgerEngine).compressionOf(ti.ID), bo.BlockSize, true)
		}
		release()
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			t.failed[ti.ID] = true
			s.log.Error("store: a table fails its check; the next start checks it again", "table", ti.ID, "err", err)
		default:
			t.known[ti.ID], changed = sum, true
		}
	}
	for id := range t.known {
		if !live[id] {
			delete(t.known, id)
			changed = true
		}
	}
	if changed {
		if err := writeChecked(s.dir, t.known); err != nil {
			s.log.Warn("store: the record of checked tables not written; the next start checks them in full", "err", err)
		}
	}
}

// holdTables has Badger keep the files of the tables in its tree while
// they are read through mappings of their own (verifyTable): a compaction
// that replaces a table truncates its file before it removes it, and a
// read of another mapping of the file then faults (SIGBUS), which ended
// the process under a steady load of writes. An iterator holds a
// reference on every table in the tree when it is made, and Badger
// deletes a table's file only when its last reference goes. held are the
// tables in the tree both before and after it was made — so in the tree
// when it was: a table leaves the tree once, for good —; release lets
// them go.
func holdTables(db *badger.DB) (held map[uint64]bool, release func()) {
	before := map[uint64]bool{}
	for _, ti := range db.Tables() {
		before[ti.ID] = true
	}
	txn := db.NewTransactionAt(math.MaxUint64, false) // it reads nothing
	it := txn.NewIterator(badger.IteratorOptions{})
	held = map[uint64]bool{}
	for _, ti := range db.Tables() {
		if before[ti.ID] {
			held[ti.ID] = true
		}
	}
	return held, func() {
		it.Close()
		txn.Discard()
	}
}
