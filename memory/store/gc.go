package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/internal/clock"
)

// The store's garbage collection. Badger keeps values from 64 KiB (the
// large blocks: files) and the embeddings whatever their size
// (valueLogSpaces) in its value log, everything else in its LSM
// tree. The LSM tree collects its own garbage: its compactions drop the
// versions a newer one replaced and the keys deleted. The value log does
// not: a replaced or deleted value stays in its file until the file is
// rewritten without it (RunValueLogGC), and Badger picks a file to rewrite
// only by the garbage its compactions have counted in it, never the file
// being written. So a pass:
//
//  1. measures each key space (Spaces) and the files (DiskUsage);
//  2. when the value log holds more garbage than the last pass left (the
//     value log's size on disk less its live values), or on demand:
//     flushes the memtables into tables — the committer waits meanwhile,
//     since Badger refuses writes then — and compacts the tables into one
//     level (Flatten; writes go on), so that every replaced or deleted
//     value is counted;
//  3. rewrites every value-log file whose garbage is at least the discard
//     ratio, one file at a time (writes go on).
//
// A pass needs space for what it writes, and runs only where that leaves
// half the free-space reserve (Options.MinFreeBytes) — where a memtable
// flush still fits — so that it can free space while writes are refused.

// GCOptions schedule the passes in the background.
type GCOptions struct {
	// Interval between two passes; 0 runs none (GC on demand only).
	Interval time.Duration
	// DiscardRatio is the share of a value-log file that must be garbage
	// for the file to be rewritten, within (0, 1).
	DiscardRatio float64
}

// DiskUsage is what the store's files take on disk (blocks allocated: the
// value log and the write-ahead logs are sparse files, larger in name).
type DiskUsage struct {
	Tables   int64 // *.sst: the LSM tree
	ValueLog int64 // *.vlog
	WAL      int64 // *.mem: the memtables' write-ahead logs
	Other    int64 // the manifest, discard statistics, the acknowledged mark…
}

// Total is the store's size on disk.
func (d DiskUsage) Total() int64 { return d.Tables + d.ValueLog + d.WAL + d.Other }

// SpaceUsage is the live size of one key space: its keys and the
// lengths of their latest values, as stored (uncompressed). It counts
// no garbage and no compression, so it estimates the space's share of
// the disk rather than measuring it.
type SpaceUsage struct {
	// Space is the key's prefix up to its first '/' ("b/", "m/", …), or
	// "other".
	Space string
	Keys  int64
	Bytes int64
	// ValueLogBytes is the part of Bytes in values kept in the value log.
	ValueLogBytes int64
	// logged is what those values' entries take in the value log (with
	// their headers, versions and checksums): the live part of its size.
	logged int64
}

// GCReport is what one pass did.
type GCReport struct {
	Started time.Time
	Took    time.Duration
	// Compacted: the memtables were flushed and the tables compacted.
	Compacted bool
	// Rewritten counts the value-log files rewritten without their
	// garbage.
	Rewritten int
	// Before and After are the files' sizes around the pass. A rewritten
	// file is deleted once no read still uses it: a backup that reads
	// meanwhile delays that.
	Before, After DiskUsage
	// Spaces is the live size of each key space after the pass (measured
	// at its start when it compacted and rewrote nothing).
	Spaces []SpaceUsage
	// Skipped says what the pass left undone, and why (the free space).
	Skipped string
}

// Reclaimed is the space the pass freed (negative when the store grew
// meanwhile).
func (r GCReport) Reclaimed() int64 { return r.Before.Total() - r.After.Total() }

// GCStats sum up the passes since the store was opened.
type GCStats struct {
	// Passes counts them all; each is also one of Failed, Skipped (it
	// left something undone for want of space), Freeing (it freed space)
	// or none of these (nothing to collect).
	Passes, Failed, Skipped, Freeing int64
	// Rewritten counts value-log files rewritten; Reclaimed the bytes the
	// freeing passes freed.
	Rewritten, Reclaimed int64
	// Last is the last pass (nil before the first).
	Last *GCReport
}

// gcState is the Store's part of the collection.
type gcState struct {
	opts  GCOptions
	vlog  int64 // bytes of a value-log file (Options.ValueLogMB)
	clock clock.Clock
	mu    sync.Mutex // one pass at a time
	// residual is the value log's garbage the last compacting pass left:
	// a pass in the background compacts only when there is more.
	residual int64
	// told is the commits told (Store.told) at the last pass in the
	// background: a pass that finds few since, and the tables not in one
	// level, compacts them (idleCompaction).
	told     uint64
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	skipping atomic.Bool // the last pass skipped for want of space (logged once)

	smu   sync.Mutex
	stats GCStats

	// The value log's files a pass has had Badger rewrite (rewrites,
	// those whose rewrite failed included) and every file seen before
	// one (seen, by name): a file is deleted, and unmapped, only once
	// rewritten, so while fewer of seen are gone from the directory than
	// rewrites, one may be unmapped at any moment (releaseWritten). Under
	// mu.
	rewrites int
	seen     map[string]bool
}

// keyFlush is written and then dropped to have Badger flush its
// memtables (DropPrefix flushes them first, but only when the prefix it
// drops holds a key).
var keyFlush = []byte("x/gcflush")

// startGC starts the passes in the background (none when the interval is
// 0 or the store has no files).
func (s *Store) startGC(o Options) {
	s.gc.opts = o.GC
	s.gc.vlog = int64(o.ValueLogMB) << 20
	s.gc.clock = clock.Or(o.Clock)
	if o.GC.Interval <= 0 || s.DB() == nil {
		return
	}
	s.gc.stop, s.gc.done = make(chan struct{}), make(chan struct{})
	s.gc.told = s.told.Load()
	go s.gcLoop()
}

// stopGC stops the passes in the background, after the one running.
func (s *Store) stopGC() {
	if s.gc.stop != nil {
		s.gc.stopOnce.Do(func() { close(s.gc.stop) })
		<-s.gc.done
	}
}

func (s *Store) gcLoop() {
	defer close(s.gc.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.gc.stop:
			cancel()
		case <-s.gc.done:
		}
	}()
	t := s.gc.clock.NewTimer(s.gc.opts.Interval)
	defer t.Stop()
	rel := s.gc.clock.NewTimer(releaseEvery)
	defer rel.Stop()
	for {
		select {
		case <-s.gc.stop:
			return
		case <-rel.C():
			s.releaseWritten()
			rel.Reset(releaseEvery)
			continue
		case <-t.C():
		}
		idle := s.idleCompaction()
		rep, err := s.collect(ctx, idle, s.gcRatio())
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			s.log.Error("store gc failed", "err", err)
		case rep.Compacted || rep.Rewritten > 0:
			s.log.Info("store gc", "rewritten", rep.Rewritten, "compacted", rep.Compacted, "idle", idle,
				"reclaimed_mb", rep.Reclaimed()>>20, "took", rep.Took)
		}
		t.Reset(s.gc.opts.Interval)
	}
}

// GC runs one pass now: with compact, the memtables are flushed and the
// tables compacted first even when the value log seems to hold no new
// garbage (what `memoria gc` and POST /admin/gc do). One pass runs at a
// time: GC waits for one running in the background.
func (s *Store) GC(ctx context.Context, compact bool) (GCReport, error) {
	return s.collect(ctx, compact, s.gcRatio())
}

// idleCompaction reports whether the pass in the background about to run
// compacts the tables whatever the value log's garbage: the store quiet
// since the last pass — no more commits than one every quietEvery, the
// heartbeat's and the other background writers' trickle — and the tables
// not in one level below level 0. Badger looks for a key in every level
// that may hold it, and the keys rewritten most (metadata, hot state,
// co-access lists) have versions in several: a recall on the kept 100k
// bench store cost a fifth to a quarter less CPU once its tables were in
// one level (README: "The query log bounded; what a compacted tree is
// worth"). Once compacted, they stay in one level until the next writes
// fill a memtable.
func (s *Store) idleCompaction() bool {
	told := s.told.Load()
	commits := told - s.gc.told
	s.gc.told = told
	if commits > uint64(max(1, s.gc.opts.Interval/quietEvery)) {
		return false
	}
	levels := map[int]bool{}
	for _, t := range s.DB().Tables() {
		levels[t.Level] = true
	}
	return len(levels) > 1 || levels[0]
}

// quietEvery is how often a quiet store commits at most, on average (an
// idle server's background writers commit every 30 s or so).
const quietEvery = 10 * time.Second

// Purge runs a pass that compacts and rewrites every value-log file that
// holds any garbage, whatever the discard ratio, so that deleted values
// (forgotten blocks) leave the files: all but the value-log file Badger
// is writing, which it never rewrites (a large value written there stays
// until that file is full and a later pass, or until the store is opened
// again: Badger starts a new file at every open).
func (s *Store) Purge(ctx context.Context) (GCReport, error) {
	return s.collect(ctx, true, purgeRatio)
}

// purgeRatio is the discard ratio of a purge: any garbage at all (Badger
// refuses 0).
const purgeRatio = 1e-9

// GCStats sums up the passes so far.
func (s *Store) GCStats() GCStats {
	s.gc.smu.Lock()
	defer s.gc.smu.Unlock()
	st := s.gc.stats
	if st.Last != nil {
		last := *st.Last
		st.Last = &last
	}
	return st
}

func (s *Store) collect(ctx context.Context, force bool, ratio float64) (rep GCReport, err error) {
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	rep.Started = s.gc.clock.Now()
	defer func() {
		rep.Took = s.gc.clock.Since(rep.Started)
		s.noteGC(rep, err)
	}()
	db := s.DB()
	if db == nil {
		rep.Spaces, err = s.Spaces(ctx)
		return rep, err
	}
	// Views share no snapshot while a pass runs (badgerEngine): with them
	// shared, a pass run right after a commit found nothing to rewrite
	// about once in 150 runs of TestGCFreesDeletedData, never in 600
	// without (as never before they were shared).
	e := s.eng.(*badgerEngine)
	e.pause(true)
	defer e.pause(false)
	if rep.Before, err = s.DiskUsage(); err != nil {
		return rep, err
	}
	spaces, err := s.Spaces(ctx)
	if err != nil {
		return rep, err
	}
	garbage := valueLogGarbage(rep.Before, spaces)
	var skipped []string
	if force || garbage-s.gc.residual >= int64(s.gcRatio()*float64(s.gc.vlog)) {
		// The flush writes the memtables and the compaction rewrites the
		// tables at most once, before deleting what they replace.
		need := rep.Before.Tables + rep.Before.WAL
		if why := s.gcRoom(need); why != "" {
			skipped = append(skipped, "compaction: "+why)
		} else {
			if err := s.flushMemtables(ctx); err != nil {
				return rep, err
			}
			e.settle() // the compaction keeps no version older than a read's
			if err := db.Flatten(1); err != nil {
				return rep, fmt.Errorf("memory: gc: compacting the tables: %w", classifyBadger(err))
			}
			rep.Compacted = true
		}
	}
	for ctx.Err() == nil {
		// A rewrite writes the live part of one file at most.
		if why := s.gcRoom(int64((1 - ratio) * float64(s.gc.vlog))); why != "" {
			skipped = append(skipped, "value log: "+why)
			break
		}
		e.settle()
		if err := s.seeValueLog(); err != nil {
			return rep, fmt.Errorf("memory: gc: %w", err)
		}
		err := db.RunValueLogGC(ratio)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			break
		}
		s.gc.rewrites++ // failed too: a file may have been rewritten
		if err != nil {
			return rep, fmt.Errorf("memory: gc: rewriting the value log: %w", classifyBadger(err))
		}
		rep.Rewritten++
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	rep.Skipped = strings.Join(skipped, "; ")
	if rep.After, err = s.DiskUsage(); err != nil {
		return rep, err
	}
	rep.Spaces = spaces
	if rep.Compacted || rep.Rewritten > 0 {
		if rep.Spaces, err = s.Spaces(ctx); err != nil {
			return rep, err
		}
	}
	if rep.Compacted {
		s.gc.residual = valueLogGarbage(rep.After, rep.Spaces)
	}
	return rep, nil
}

// gcRatio is the discard ratio of the passes (Badger's default when the
// options have none).
func (s *Store) gcRatio() float64 {
	if r := s.gc.opts.DiscardRatio; r > 0 && r < 1 {
		return r
	}
	return 0.5
}

// gcRoom says why writing need bytes would take the file system below
// half the free-space reserve, or "" when it would not.
func (s *Store) gcRoom(need int64) string {
	if s.space.free == nil {
		return ""
	}
	free, err := s.space.free()
	if err != nil {
		return fmt.Sprintf("cannot read the free space: %v", err)
	}
	if floor := s.space.reserve / 2; free < floor+uint64(need) {
		why := fmt.Sprintf("it may write %.1f MiB and %.1f MiB are free, of which %.1f MiB (half of store.min_free_mb) are kept",
			mib(need), mib(int64(free)), mib(int64(floor)))
		if !s.gc.skipping.Swap(true) {
			s.log.Warn("store gc skipped: the disk is nearly full", "why", why)
		}
		return why
	}
	s.gc.skipping.Store(false)
	return ""
}

// noteGC adds a pass to the stats.
func (s *Store) noteGC(rep GCReport, err error) {
	s.gc.smu.Lock()
	defer s.gc.smu.Unlock()
	st := &s.gc.stats
	st.Passes++
	st.Rewritten += int64(rep.Rewritten)
	if err != nil {
		st.Failed++
		return
	}
	n := rep.Reclaimed()
	if n > 0 && !rep.Before.zero() {
		st.Reclaimed += n
	}
	switch {
	case rep.Skipped != "":
		st.Skipped++
	case n > 0:
		st.Freeing++
	}
	st.Last = &rep
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func (d DiskUsage) zero() bool { return d == DiskUsage{} }

// valueLogGarbage is the value log's size on disk less its live values.
func valueLogGarbage(d DiskUsage, spaces []SpaceUsage) int64 {
	var live int64
	for _, sp := range spaces {
		live += sp.logged
	}
	return max(d.ValueLog-live, 0)
}

// flushMemtables has Badger write its memtables out as tables. Badger
// refuses writes while it does (they would fail, not wait), so it runs as
// an operation of the committer, which writes nothing else meanwhile.
// DropPrefix flushes the memtables first, when the prefix it drops holds
// a key: a marker, written straight to Badger, not counted as a commit
// (it is gone when the operation ends), so that it needs no room above
// the reserve. The operation writes nothing through the committer: run
// twice (a refused batch reruns such operations), it flushes twice.
func (s *Store) flushMemtables(ctx context.Context) error {
	e := s.eng.(*badgerEngine)
	return s.Update(ctx, func(Tx) error {
		err := e.update(func(txn *badger.Txn) error { return txn.Set(keyFlush, nil) })
		if err == nil {
			err = e.db.DropPrefix(keyFlush)
		}
		if err != nil {
			return fmt.Errorf("memory: gc: flushing the memtables: %w", classifyBadger(err))
		}
		return nil
	})
}

// DiskUsage measures the store's files (nothing for the in-memory
// backend).
func (s *Store) DiskUsage() (DiskUsage, error) {
	var d DiskUsage
	if s.DB() == nil {
		return d, nil
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return d, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted meanwhile (a compaction, a rewrite)
		}
		if err != nil {
			return d, err
		}
		n := fi.Size()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n = st.Blocks * 512
		}
		switch filepath.Ext(e.Name()) {
		case ".sst":
			d.Tables += n
		case ".vlog":
			d.ValueLog += n
		case ".mem":
			d.WAL += n
		default:
			d.Other += n
		}
	}
	return d, nil
}

// Spaces measures the live size of each key space from one snapshot: a
// walk of every key, reading no value (about a second per million keys).
func (s *Store) Spaces(ctx context.Context) ([]SpaceUsage, error) {
	by := map[string]*SpaceUsage{}
	err := s.View(func(r Reader) error {
		it := r.NewIterator(IterOptions{})
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			k := item.Key()
			prefix := keySpace(k)
			sp := by[string(prefix)]
			if sp == nil {
				sp = &SpaceUsage{Space: string(prefix)}
				by[sp.Space] = sp
			}
			v := item.ValueSize()
			sp.Keys++
			sp.Bytes += int64(len(k)) + v
			if n := loggedSize(item); n > 0 {
				sp.ValueLogBytes += int64(len(k)) + v
				sp.logged += n
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]SpaceUsage, 0, len(by))
	for _, sp := range by {
		out = append(out, *sp)
	}
	slices.SortFunc(out, func(a, b SpaceUsage) int { return strings.Compare(a.Space, b.Space) })
	return out, nil
}

// keySpace is the key space of k: its prefix through the first '/'
// within its first 8 bytes, else "other".
func keySpace(k []byte) []byte {
	for i := 0; i < len(k) && i < 8; i++ {
		if k[i] == '/' {
			return k[:i+1]
		}
	}
	return otherSpace
}

var otherSpace = []byte("other")

// FreeSpace is the free space on the store's file system and the reserve
// the committer keeps (Options.MinFreeBytes); ok is false where the free
// space is not known (the in-memory backend).
func (s *Store) FreeSpace() (free, reserve uint64, ok bool) {
	if s.space.free == nil {
		return 0, s.space.reserve, false
	}
	free, err := s.space.free()
	return free, s.space.reserve, err == nil
}
