package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// The vector index is derived state, rebuilt from the stored embeddings
// when nothing better is at hand; a restart of a large store would then
// search the unbuilt backlog exactly until the graph is built again. So
// the index is written whole (vector.Index.Snapshot) to
// data_dir/vector/index.snap — every index.snapshot_interval when it
// changed, and at a clean shutdown — tagged with the insertion-log
// position it covers, the memory at that position, the store's id and
// the embedder. At open it is read back, and brought up to date from the
// store: the memories the log added after its position are added, and
// every forgotten memory (its tombstone) is removed, so that a snapshot
// taken before a forget never brings the memory back. A snapshot that is
// missing, damaged, of other index parameters, of another store or
// embedder, or beyond the store's log is not used: the index is rebuilt
// from the store, as without snapshots, and the log says why.

// vecSnapFormat names the layout of a snapshot's tag.
const vecSnapFormat = "memoria-vector-snapshot/1"

// vecSnapTag is what a snapshot covers.
type vecSnapTag struct {
	Format   string `json:"format"`
	StoreID  string `json:"store_id"`
	Embedder string `json:"embedder"`
	// LogSeq is the insertion-log position the index holds every memory
	// up to (and maybe some after); LogCID the memory at it (nil at 0).
	LogSeq uint64 `json:"log_seq"`
	LogCID []byte `json:"log_cid"`
	// Sonas is the sonas' members and centroid sums when the snapshot was
	// taken (chain.Sonas.EncodeMembers; absent in snapshots of older
	// binaries, which ignore it), so that a restart reads only the chain
	// entries after it.
	Sonas []byte `json:"sonas,omitempty"`
}

// VectorSnapshots writes the vector index's snapshot and restores the
// index from it (see above).
type VectorSnapshots struct {
	path     string // "": no snapshots (a store without a data directory)
	index    *vector.Index
	store    *store.Store
	embedder string
	covered  func() uint64
	members  func() []byte
	// memberChanges counts the changes of what members encodes.
	memberChanges func() uint64
	runs          func() []vector.Run // the sonas' runs, packed in the snapshot
	clock         clock.Clock
	log           *slog.Logger

	// mu serialises snapshots; changes is the index's Changes the last
	// one (or the one loaded) had; old: the one loaded is of an older
	// version (written again at the next Write).
	mu        sync.Mutex
	changes   uint64
	memberGen uint64
	old       bool
	// restored is the sonas' state of the snapshot restored (Restore),
	// until Members takes it.
	restored   []byte
	stop, done chan struct{}
}

// SnapshotOptions configure VectorSnapshots.
type SnapshotOptions struct {
	// Path is the snapshot's file (VectorSnapshotPath); "" keeps none.
	Path string
	// Embedder is the ID of the store's embedder, which a snapshot names.
	Embedder string
	// Covered is the insertion-log position the index holds every memory
	// up to.
	Covered func() uint64
	// Members, when set, encodes the sonas' members and centroids
	// (chain.Sonas.EncodeMembers) into each snapshot, and MemberChanges
	// counts their changes (a snapshot is written when they or the index
	// changed).
	Members       func() []byte
	MemberChanges func() uint64
	// Runs, when set, gives the sonas' members as runs of the index, whose
	// records each snapshot holds side by side (vector.SnapshotRuns): a
	// restore maps them as their packs.
	Runs   func() []vector.Run
	Clock  clock.Clock
	Logger *slog.Logger
}

// NewVectorSnapshots keeps the snapshots of ix, the vector index of st.
func NewVectorSnapshots(st *store.Store, ix *vector.Index, o SnapshotOptions) *VectorSnapshots {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &VectorSnapshots{path: o.Path, index: ix, store: st, embedder: o.Embedder, covered: o.Covered,
		members: o.Members, memberChanges: o.MemberChanges, runs: o.Runs, clock: clock.Or(o.Clock), log: o.Logger}
}

// Outdated makes the next Write write a snapshot even when the index did
// not change (the one restored lacked the sonas' state, or it did not fit).
func (s *VectorSnapshots) Outdated() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.old = true
}

// Members returns the sonas' state the restored snapshot held (nil when
// none was restored, or it held none), once.
func (s *VectorSnapshots) Members() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.restored
	s.restored = nil
	return m
}

// VectorSnapshotPath is where the vector index's snapshot of the data
// directory dir is kept.
func VectorSnapshotPath(dir string) string { return filepath.Join(dir, "vector", "index.snap") }

// Restore loads the vector snapshot into the empty index and adds
// what the store holds beyond it, reporting whether it did; false (the
// snapshot missing or unusable, and removed) leaves the index empty for a
// rebuild. end is the insertion log's end as txn sees it.
func (s *VectorSnapshots) Restore(txn store.Reader, end uint64) (bool, error) {
	path := s.path
	if path == "" {
		return false, nil
	}
	removeParts(filepath.Dir(path))
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		s.log.Info("vector index: no snapshot; rebuilding it from the store", "path", path)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	storeID, err := s.store.ID()
	if err != nil {
		return false, err
	}
	start := s.clock.Now()
	var tag vecSnapTag
	info, err := s.index.Restore(f, fi.Size(), func(b []byte) error {
		if err := json.Unmarshal(b, &tag); err != nil || tag.Format != vecSnapFormat {
			return fmt.Errorf("%w: a tag of another format", vector.ErrSnapshot)
		}
		switch {
		case tag.StoreID != storeID:
			return fmt.Errorf("%w: of store %s, this is %s", vector.ErrSnapshot, tag.StoreID, storeID)
		case tag.Embedder != s.embedder:
			return fmt.Errorf("%w: of embedder %q, the store's is %q", vector.ErrSnapshot, tag.Embedder, s.embedder)
		case tag.LogSeq > end:
			return fmt.Errorf("%w: it covers the insertion log up to %d, the store's ends at %d", vector.ErrSnapshot, tag.LogSeq, end)
		}
		if tag.LogSeq == 0 {
			return nil
		}
		var at []byte
		item, err := txn.Item(chain.LogKey(tag.LogSeq))
		if err == nil {
			at, err = item.ValueCopy(nil)
		}
		if err != nil || !bytes.Equal(at, tag.LogCID) {
			return fmt.Errorf("%w: the insertion log's memory at %d is not the snapshot's (%v)", vector.ErrSnapshot, tag.LogSeq, err)
		}
		return nil
	})
	if err != nil {
		s.log.Warn("vector index: snapshot not used; rebuilding the index from the store", "path", path, "err", err)
		os.Remove(path)
		return false, nil
	}
	loaded := s.clock.Now()

	// The memories committed after it, in the log's order.
	added, err := addLogged(txn, s.index, tag.LogSeq)
	if err != nil {
		return false, err
	}
	var removed int
	// The memories forgotten since (or before: Remove of a key not there
	// is nothing).
	err = store.Scan(txn, store.PrefixTombstone, func(_, v []byte) error {
		t := &messages.Tombstone{}
		if err := proto.Unmarshal(v, t); err != nil {
			return fmt.Errorf("%w: tombstone: %v", base.ErrCorrupt, err)
		}
		if t.Kind != forget.KindMemory {
			return nil
		}
		c, err := cid.Decode(t.Cid)
		if err != nil {
			return fmt.Errorf("%w: tombstone of %q: %v", base.ErrCorrupt, t.Cid, err)
		}
		if s.index.Remove(c.KeyString()) {
			removed++
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	s.changes, s.old = info.Changes, info.Version < vector.SnapshotVersion
	s.restored = tag.Sonas
	if s.memberChanges != nil {
		s.memberGen = s.memberChanges()
	}
	s.log.Info("vector index: snapshot loaded", "path", path, "log_seq", tag.LogSeq, "vectors", info.IDs-info.Removed,
		"pending", info.Pending, "added_since", added, "forgotten_since", removed, "mapped_bytes", info.Mapped,
		"packs", info.Packs, "took", s.clock.Now().Sub(start), "read", loaded.Sub(start))
	return true, nil
}

// addLogged adds to the index the vectors of the memories of the
// insertion log after position after, in its order (the forgotten ones
// have none), and returns how many it added.
func addLogged(txn store.Reader, ix *vector.Index, after uint64) (int, error) {
	var added int
	it := txn.NewIterator(store.IterOptions{Prefix: chain.LogPrefix, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Seek(chain.LogKey(after + 1)); it.Valid(); it.Next() {
		_, c, err := chain.LogEntry(it.Item())
		if err != nil {
			return added, err
		}
		ok, err := addStored(txn, ix, c)
		if err != nil {
			return added, err
		}
		if ok {
			added++
		}
	}
	return added, nil
}

// addStored adds c's stored vector to the index, reporting false when
// the store has none.
func addStored(txn store.Reader, ix *vector.Index, c cid.Cid) (bool, error) {
	v, err := txn.Get(meta.VectorKey(c))
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	vec, err := meta.DecodeVector(v)
	if err != nil {
		return false, err
	}
	if len(vec) != ix.Dims() {
		return false, fmt.Errorf("%w: vector of %s has %d dims, want %d", base.ErrCorrupt, c, len(vec), ix.Dims())
	}
	ix.Add(c.KeyString(), vec)
	return true, nil
}

// RebuildVectors adds every stored vector to the empty index ix: in the
// insertion log's order, the order the appends added them, so that the
// index is the one the appends built (and the one a snapshot restores);
// then any stored vector the log does not name. It returns how many.
func RebuildVectors(txn store.Reader, ix *vector.Index) (int, error) {
	n, err := addLogged(txn, ix, 0)
	if err != nil {
		return n, err
	}
	var errs []error
	err = store.Keys(txn, meta.VectorPrefix, func(k []byte) {
		c, err := cid.Cast(k[len(meta.VectorPrefix):])
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: vector key: %v", base.ErrCorrupt, err))
			return
		}
		if _, ok := ix.ID(c.KeyString()); ok {
			return
		}
		if _, err := addStored(txn, ix, c); err != nil {
			errs = append(errs, err)
		}
		n++
	})
	if err != nil {
		return n, err
	}
	return n, errors.Join(errs...)
}

// removeParts removes what an interrupted snapshot left in dir.
func removeParts(dir string) {
	parts, _ := filepath.Glob(filepath.Join(dir, ".index.snap.part-*"))
	for _, p := range parts {
		os.Remove(p)
	}
}

// Write writes the vector index's snapshot when the index changed since
// the last one (see Restore). It is safe to call at any time the store is
// open.
func (s *VectorSnapshots) Write() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Read first: the index holds every memory up to it once it is read
	// (it follows the commits, which move it after their index adds).
	seq := s.covered()
	var memberGen uint64
	if s.memberChanges != nil {
		memberGen = s.memberChanges()
	}
	if s.index.Changes() == s.changes && memberGen == s.memberGen && !s.old {
		return nil
	}
	storeID, err := s.store.ID()
	if err != nil {
		return err
	}
	tag := vecSnapTag{Format: vecSnapFormat, StoreID: storeID, Embedder: s.embedder, LogSeq: seq}
	if seq > 0 {
		err := s.store.View(func(txn store.Reader) error {
			item, err := txn.Item(chain.LogKey(seq))
			if err == nil {
				tag.LogCID, err = item.ValueCopy(nil)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("memory: vector snapshot: the insertion log at %d: %w", seq, err)
		}
	}
	var runs []vector.Run
	if s.members != nil {
		// Before the index is written: every vector id it names is in
		// the snapshot then.
		tag.Sonas = s.members()
	}
	if s.runs != nil {
		runs = s.runs()
	}
	raw, err := json.Marshal(tag)
	if err != nil {
		return err
	}
	path := s.path
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	start := s.clock.Now()
	var info vector.SnapshotInfo
	size, err := durable.Write(path, func(w io.Writer) error {
		var err error
		info, err = s.index.SnapshotRuns(w, raw, runs)
		return err
	})
	if err != nil {
		return fmt.Errorf("memory: vector snapshot: %w", err)
	}
	s.changes, s.memberGen, s.old = info.Changes, memberGen, false
	freed, err := s.adopt(path, info)
	if err != nil { // the vectors stay in the heap: the snapshot is whole all the same
		s.log.Warn("vector index: the snapshot's vectors not adopted", "path", path, "err", err)
	}
	s.log.Info("vector index: snapshot written", "path", path, "log_seq", seq, "vectors", info.IDs-info.Removed,
		"pending", info.Pending, "packs", info.Packs, "bytes", size, "heap_freed", freed, "took", s.clock.Now().Sub(start))
	return nil
}

// adopt has the index read the float32 vectors the snapshot at path
// holds from there, as a restore would, and free their heap copies.
func (s *VectorSnapshots) adopt(path string, info vector.SnapshotInfo) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return s.index.AdoptFloats(f, info)
}

// Start writes the snapshot every interval until Stop.
func (s *VectorSnapshots) Start(interval time.Duration) {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.loop(interval)
}

// Stop ends what Start started, after the snapshot being written (if
// any); without a Start it does nothing.
func (s *VectorSnapshots) Stop() {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
}

func (s *VectorSnapshots) loop(interval time.Duration) {
	defer close(s.done)
	for {
		t := s.clock.NewTimer(interval)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C():
		}
		if err := s.Write(); err != nil {
			s.log.Warn("vector index: snapshot failed", "err", err)
		}
	}
}
