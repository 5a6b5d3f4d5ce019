package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/text"
)

// Text keeps the full-text index (memory/text) in step with the store,
// off the acknowledgement path (see the package doc).
type Text struct {
	st       *store.Store
	mems     *meta.Store
	sonas    *chain.Sonas
	o        Options
	rebuilds atomic.Int64 // times the index was found damaged and rebuilt

	imu sync.RWMutex // guards idx: held by searches, taken to swap it
	idx *text.Index  // nil while rebuilt, or when rebuilding failed

	mu        sync.Mutex
	cond      *sync.Cond
	following bool              // open: commits are queued
	queue     []string          // keys of the chain entries to index, in commit order
	forgotten []text.Doc        // forgotten memories to delete (by ID), in commit order
	watermark uint64            // log seq of the last new memory queued
	enqueued  uint64            // entries queued so far
	applied   uint64            // entries applied (or given up) so far
	latest    map[string]uint64 // position of each sona's latest entry (read-your-writes)
	closed    bool
	waiters   int   // readers waiting for a position (waitApplied)
	backlog   int   // below this many queued documents, index at a fifth of full pace
	broken    error // why the index is being rebuilt (nil: it is not)
	gaveUp    bool  // rebuilding failed: without the index until restart
	rebuildOn bool  // a rebuild is under way
	done      chan struct{}
	loaded    chan struct{} // closed when Open's load ended: idx set, or given up
	closing   chan struct{} // closed by Stop
	closeOnce sync.Once
}

// Options configure a Text.
type Options struct {
	// Dir is the index's directory.
	Dir string
	// K1 and B are BM25's parameters (recall.bm25_k1, recall.bm25_b).
	K1, B float64
	// Backlog: below this many queued entries the indexer works at a
	// fifth of full pace (index.text_backlog).
	Backlog int
	Logger  *slog.Logger
	// Clock times the pacing and the rebuilds.
	Clock clock.Clock
	// Progress, when set, is told how catching up advances.
	Progress func(stage string, done, total uint64)
}

// New follows the store st for the full-text index in o.Dir: it follows
// st's commits (store.Store.Follow: the indexer reads them in views), so
// call it before st's first write, and queues nothing until Open. mems
// reads the memories it indexes; sonas lists the chains it catches up.
func New(st *store.Store, mems *meta.Store, sonas *chain.Sonas, o Options) *Text {
	t := &Text{st: st, mems: mems, sonas: sonas, o: o, backlog: o.Backlog, done: make(chan struct{}),
		loaded: make(chan struct{}), closing: make(chan struct{}), latest: map[string]uint64{}}
	t.cond = sync.NewCond(&t.mu)
	st.Follow(t.follow)
	return t
}

// follow queues what a commit appended to the chains — each chain entry
// (c/) it wrote, whose memory came to exist (its q/ entry is then in the
// same commit) or joined another sona — and notes the sona's latest
// position. It runs on the committer's goroutine, before the commit's
// operations are acknowledged, and reads nothing: the indexer reads the
// memories.
func (t *Text) follow(e store.Event) {
	t.mu.Lock()
	if !t.following {
		t.mu.Unlock()
		return
	}
	queued := false
	for _, k := range e.Keys {
		switch {
		case strings.HasPrefix(k, chainPrefix):
			sona, ok := entrySona(k)
			if !ok {
				continue // not a chain entry: the indexer would fail on it
			}
			t.queue = append(t.queue, k)
			t.enqueued++
			t.latest[sona] = t.enqueued
			queued = true
		case strings.HasPrefix(k, logPrefix) && len(k) == len(logPrefix)+8:
			t.watermark = max(t.watermark, binary.BigEndian.Uint64([]byte(k[len(logPrefix):])))
		case strings.HasPrefix(k, tombPrefix):
			// A tombstone is written once, by the commit that forgets:
			// the memory's document goes.
			if mh, err := multihash.Cast([]byte(k[len(tombPrefix):])); err == nil {
				t.forgotten = append(t.forgotten, text.Doc{ID: cid.NewCidV1(cid.DagCBOR, mh).String()})
				t.enqueued++
				queued = true
			}
		}
	}
	t.mu.Unlock()
	if queued {
		t.cond.Broadcast()
	}
}

var (
	chainPrefix = string(chain.ChainPrefix)
	logPrefix   = string(chain.LogPrefix)
	tombPrefix  = string(store.PrefixTombstone)
)

// entrySona is the sona of the chain entry key k (c/ uuid 0x00 seq).
func entrySona(k string) (string, bool) {
	rest := k[len(chainPrefix):]
	i := strings.IndexByte(rest, 0)
	if i < 0 || len(rest)-i-1 != 8 {
		return "", false
	}
	return rest[:i], true
}

// settle waits until everything queued so far is searchable.
func (t *Text) settle(ctx context.Context) error {
	if err := t.waitLoaded(ctx); err != nil {
		return err
	}
	t.mu.Lock()
	pos := t.enqueued
	t.mu.Unlock()
	return t.waitApplied(ctx, pos)
}

// waitLoaded waits until Open's load of the index ended.
func (t *Text) waitLoaded(ctx context.Context) error {
	select {
	case <-t.loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Loading reports whether the index is still being loaded (Open): searches
// wait for it meanwhile.
func (t *Text) Loading() bool {
	select {
	case <-t.loaded:
		return false
	default:
		return true
	}
}

// waitApplied waits until the document at pos is searchable.
func (t *Text) waitApplied(ctx context.Context, pos uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.applied >= pos {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.waiters++
	defer func() { t.waiters-- }()
	t.cond.Broadcast() // wake a resting indexer: someone waits
	for t.applied < pos && !t.closed && t.broken == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		t.cond.Wait()
	}
	return nil
}

// ErrUnavailable: the index is being rebuilt; recall goes without it.
var ErrUnavailable = errors.New("memory: the full-text index is being rebuilt")

// Search waits until the index is loaded and sona's latest memory is
// searchable (so a sona always finds what it wrote) and searches the
// index, or returns ErrUnavailable while it is broken — also when this
// search is what finds it corrupt.
func (t *Text) Search(ctx context.Context, sona string, q string, opts text.SearchOptions) ([]text.Hit, error) {
	if err := t.waitLoaded(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	pos := t.latest[sona]
	t.mu.Unlock()
	if err := t.waitApplied(ctx, pos); err != nil {
		return nil, err
	}
	t.imu.RLock()
	idx := t.idx
	var hits []text.Hit
	err := ErrUnavailable
	if idx != nil && t.Broken() == nil {
		hits, err = idx.Search(q, opts)
	}
	t.imu.RUnlock()
	if errors.Is(err, text.ErrCorrupt) {
		t.markBroken(err)
		return nil, ErrUnavailable
	}
	return hits, err
}

// Broken is why the index is unavailable (being rebuilt, or rebuilding
// failed until the next start), or nil.
func (t *Text) Broken() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.broken
}

// markBroken takes the index out of recall and has the indexer rebuild it.
func (t *Text) markBroken(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return
	}
	t.broken = err
	t.o.Logger.Error("the full-text index is corrupt: recall goes on without BM25 while it is rebuilt from the store", "err", err)
	t.cond.Broadcast()
}

// rebuildIndex replaces a broken index with one built from the store.
func (t *Text) rebuildIndex() {
	t.mu.Lock()
	select {
	case <-t.closing: // closing: the next start rebuilds
		t.gaveUp = true
		t.mu.Unlock()
		return
	default:
	}
	t.rebuildOn = true
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.rebuildOn = false
		t.cond.Broadcast()
		t.mu.Unlock()
	}()
	start := t.o.Clock.Now()
	t.imu.Lock()
	old := t.idx
	t.idx = nil
	t.imu.Unlock()
	if old != nil {
		old.Discard() // damaged: whatever it says
	}
	idx, err := t.rebuild(t.closing)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.gaveUp = true
		if !errors.Is(err, base.ErrClosed) {
			t.o.Logger.Error("rebuilding the full-text index failed: recall goes on without BM25; it is rebuilt at the next start", "err", err)
		}
		return
	}
	t.imu.Lock()
	t.idx = idx
	t.imu.Unlock()
	t.broken = nil
	t.rebuilds.Add(1)
	t.o.Logger.Info("full-text index rebuilt", "took", t.o.Clock.Since(start))
	t.cond.Broadcast()
}

// run indexes what follow queues, until Close.
func (t *Text) run() {
	defer close(t.done)
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && len(t.forgotten) == 0 && !t.closed && (t.broken == nil || t.gaveUp) {
			t.cond.Wait()
		}
		if t.broken != nil && !t.gaveUp && !t.closed {
			t.mu.Unlock()
			t.rebuildIndex()
			continue
		}
		if len(t.queue) == 0 && len(t.forgotten) == 0 && t.closed {
			t.mu.Unlock()
			return
		}
		keys, wm, forgotten := t.queue, t.watermark, t.forgotten
		t.queue, t.forgotten = nil, nil
		idx := t.idx // only this goroutine changes it
		t.mu.Unlock()

		start := t.o.Clock.Now()
		var err error
		if idx != nil { // nil when rebuilding failed: the next start rebuilds
			var docs []text.Doc
			if docs, err = t.entryDocs(keys); err == nil {
				err = idx.Apply(docs, wm)
				if err != nil {
					err = idx.Apply(docs, wm) // one retry; then give up until restart
				}
			}
			if err == nil && len(forgotten) > 0 {
				err = idx.Delete(forgotten, wm)
			}
		}
		t.mu.Lock()
		t.applied += uint64(len(keys) + len(forgotten))
		t.mu.Unlock()
		t.cond.Broadcast()
		if errors.Is(err, base.ErrClosed) {
			// Commits that raced with closing: the next start catches
			// them up from the store.
			continue
		}
		if err != nil {
			// The index misses these documents: rebuilt from the store,
			// which has them, it will not.
			t.markBroken(err)
			continue
		}
		t.rest(restFactor * t.o.Clock.Since(start))
	}
}

// rest pauses the indexer after a batch — so that indexing takes a small
// share of a core from the writes it would otherwise compete with — unless
// a reader waits, the backlog is over its bound, or the indexer closes.
func (t *Text) rest(d time.Duration) {
	wake := t.o.Clock.AfterFunc(d, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer wake.Stop()
	deadline := t.o.Clock.Now().Add(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.waiters == 0 && len(t.queue) <= t.backlog && !t.closed && t.o.Clock.Now().Before(deadline) {
		t.cond.Wait()
	}
}

// Stop ends a rebuild of the index, if under way: before the store it
// reads closes.
func (t *Text) Stop() {
	t.closeOnce.Do(func() { close(t.closing) })
	t.mu.Lock()
	for t.rebuildOn {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// Close indexes what is queued, stops following the store and persists
// the index (discards it, when damaged: the next start rebuilds it). Call
// it after Stop and before the store closes: commits after it are caught
// up from the store at the next start.
func (t *Text) Close() error {
	t.mu.Lock()
	open := t.following
	t.following = false
	t.closed = true
	t.mu.Unlock()
	if !open {
		return nil
	}
	t.cond.Broadcast()
	<-t.done
	t.imu.Lock()
	defer t.imu.Unlock()
	if t.idx == nil {
		return nil
	}
	if t.Broken() != nil {
		return t.idx.Discard() // damaged: the next start rebuilds it
	}
	return t.idx.Close()
}

// Settle waits until everything submitted so far is durable and every
// memory acknowledged so far is searchable by full text. Recall in a
// sona already sees that sona's own writes; Settle is for callers that
// need the whole corpus in step (BM25 statistics span every sona), such
// as tests comparing recalls across a restart and offline evaluations.
func (t *Text) Settle(ctx context.Context) error {
	if err := t.st.Barrier(ctx); err != nil {
		return err
	}
	return t.settle(ctx)
}

// Len is the number of documents in the index (ErrUnavailable while it
// is loaded or rebuilt).
func (t *Text) Len() (uint64, error) {
	t.imu.RLock()
	defer t.imu.RUnlock()
	if t.idx == nil {
		return 0, ErrUnavailable
	}
	return t.idx.Len()
}

// Rebuilds is how many times the index was found damaged (or ahead of
// the store) and rebuilt, at open or while serving.
func (t *Text) Rebuilds() int64 { return t.rebuilds.Load() }

// Raw is the index as it is now, for tests and diagnostics, once Open's
// load ended: nil while it is rebuilt. Do not keep it.
func (t *Text) Raw() *text.Index {
	<-t.loaded
	t.imu.RLock()
	defer t.imu.RUnlock()
	return t.idx
}

// Open follows the store's commits from now on and loads the index in
// the background (load), so that a large store serves without waiting
// for it: searches wait until it is loaded, and the commits meanwhile are
// queued and indexed after. Call it once the sonas are loaded (the load
// lists their chains).
func (t *Text) Open() {
	text.SetBM25(t.o.K1, t.o.B)
	t.mu.Lock()
	t.following = true
	t.mu.Unlock()
	go t.load()
}

// load opens the index — rebuilding it when it is stale, damaged, or
// ahead of the store (which lost writes it held) —, replays the insertion
// log from its watermark, then indexes what was committed meanwhile
// (run). A commit is either in the store's state the replay reads or
// queued by follow, which Open started first (or both: indexing is
// idempotent), so nothing is missed. When loading fails the index is
// given up until the next start: recall goes on without BM25, as after a
// rebuild that failed.
func (t *Text) load() {
	start := t.o.Clock.Now()
	idx, wm, err := t.openIndex()
	if err == nil {
		if wm, err = t.catchUp(idx, wm, t.closing); err == nil {
			err = t.dropForgotten(idx, wm)
		}
		if err != nil {
			idx.Close()
		}
	}
	if err == nil {
		t.imu.Lock() // before mu, as searches take them
		t.idx = idx
		t.imu.Unlock()
	}
	t.mu.Lock()
	if err != nil {
		t.broken, t.gaveUp = err, true
		if !errors.Is(err, base.ErrClosed) {
			t.o.Logger.Error("loading the full-text index failed: recall goes on without BM25; it is loaded again at the next start", "err", err)
		}
	} else {
		t.watermark = max(t.watermark, wm)
	}
	close(t.loaded)
	t.mu.Unlock()
	t.cond.Broadcast()
	if err == nil {
		docs, _ := idx.Len()
		// The index serves every search from here: a readiness signal
		// (memoria bench's restart reads it).
		t.o.Logger.Info("full-text index loaded", "documents", docs, "watermark", wm, "took", t.o.Clock.Since(start))
	}
	t.run()
}

// openIndex opens the index and reads its watermark, starting a new
// index instead of one that cannot be used.
func (t *Text) openIndex() (*text.Index, uint64, error) {
	var end uint64
	if err := t.st.View(func(r store.Reader) error {
		var err error
		end, err = chain.LogEnd(r)
		return err
	}); err != nil {
		return nil, 0, err
	}
	dir := t.o.Dir
	idx, err := text.Open(dir)
	var wm uint64
	if err == nil {
		if wm, err = idx.Watermark(); err != nil {
			err = fmt.Errorf("%w: watermark: %v", text.ErrCorrupt, err)
		} else if wm > end {
			err = fmt.Errorf("%w: it holds the insertion log up to %d, the store's ends at %d", errAhead, wm, end)
		}
		if err != nil {
			idx.Discard()
		}
	}
	switch {
	case err == nil:
		return idx, wm, nil
	case errors.Is(err, text.ErrStale):
		t.o.Logger.Warn("rebuilding the full-text index", "reason", err)
	case errors.Is(err, text.ErrCorrupt), errors.Is(err, errAhead):
		t.o.Logger.Error("rebuilding the full-text index", "reason", err)
		t.rebuilds.Add(1)
	default:
		return nil, 0, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, 0, err
	}
	idx, err = text.Open(dir)
	return idx, 0, err
}

// errAhead: the full-text index holds memories the store does not, after
// the loss of acknowledged writes was accepted.
var errAhead = errors.New("memory: the full-text index is ahead of the store")

// rebuild deletes the index and builds it again from the store (while
// the server runs: the indexer's goroutine calls it), unless cancel
// closes first (ErrClosed).
func (t *Text) rebuild(cancel <-chan struct{}) (*text.Index, error) {
	if err := os.RemoveAll(t.o.Dir); err != nil {
		return nil, err
	}
	idx, err := text.Open(t.o.Dir)
	if err != nil {
		return nil, err
	}
	if _, err := t.catchUp(idx, 0, cancel); err != nil {
		idx.Discard()
		return nil, err
	}
	return idx, nil
}

// catchUp indexes the insertion log after watermark, unless cancel
// closes first (ErrClosed).
func (t *Text) catchUp(idx *text.Index, watermark uint64, cancel <-chan struct{}) (uint64, error) {
	var last uint64
	err := t.st.View(func(r store.Reader) error {
		var err error
		last, err = chain.LogEnd(r)
		return err
	})
	if err != nil || last <= watermark {
		return watermark, err
	}
	t.o.Logger.Info("catching up the full-text index", "from", watermark, "to", last)
	const batch = 512
	var docs []text.Doc
	err = t.st.View(func(r store.Reader) error {
		it := r.NewIterator(store.IterOptions{Prefix: chain.LogPrefix, PrefetchValues: true})
		defer it.Close()
		for it.Seek(chain.LogKey(watermark + 1)); it.Valid(); it.Next() {
			seq, c, err := chain.LogEntry(it.Item())
			if err != nil {
				return err
			}
			doc, err := t.doc(r, c)
			if errors.Is(err, base.ErrForgotten) {
				continue
			}
			if err != nil {
				return err
			}
			docs = append(docs, doc)
			if len(docs) == batch {
				select {
				case <-cancel:
					return base.ErrClosed
				default:
				}
				if err := idx.Apply(docs, seq); err != nil {
					return err
				}
				docs = docs[:0]
				watermark = seq
				if t.o.Progress != nil {
					t.o.Progress("text index", watermark, last)
				}
			}
		}
		if len(docs) > 0 {
			if err := idx.Apply(docs, last); err != nil {
				return err
			}
			watermark = last
		}
		return nil
	})
	if t.o.Progress != nil {
		t.o.Progress("text index", watermark, last)
	}
	if err != nil {
		return watermark, err
	}
	return watermark, t.catchUpJoins(idx, watermark)
}

// doc is the full-text document of a stored memory: its text and its
// sonas.
func (t *Text) doc(r store.Reader, c cid.Cid) (text.Doc, error) {
	m, err := t.mems.MemoryIn(r, c)
	if err != nil {
		return text.Doc{}, err // forgotten: base.ErrForgotten, which callers skip
	}
	md, err := t.mems.MetaIn(r, c)
	if err != nil {
		return text.Doc{}, err
	}
	return text.Doc{ID: c.String(), Text: m.Text(), Sonas: slices.Clone(md.Sonas)}, nil
}

// entryDocs reads the documents of the memories of the chain entries
// keys, in one snapshot.
func (t *Text) entryDocs(keys []string) ([]text.Doc, error) {
	docs := make([]text.Doc, 0, len(keys))
	err := t.st.View(func(r store.Reader) error {
		for _, k := range keys {
			v, err := r.Get([]byte(k))
			if err != nil {
				return fmt.Errorf("the chain entry %q of a commit: %w", k, err)
			}
			_, mem, _, err := chain.DecodeEntry(v)
			if err != nil {
				return err
			}
			doc, err := t.doc(r, mem)
			if errors.Is(err, base.ErrForgotten) {
				continue // forgotten since: its tombstone deletes it
			}
			if err != nil {
				return err
			}
			docs = append(docs, doc)
		}
		return nil
	})
	return docs, err
}

// catchUpJoins re-indexes the memories appended to chains at or after the
// watermark: among them, memories that joined another sona (which the
// insertion log does not record) after the index last persisted.
func (t *Text) catchUpJoins(idx *text.Index, watermark uint64) error {
	var docs []text.Doc
	err := t.st.View(func(r store.Reader) error {
		for _, id := range t.sonas.IDs() {
			p := chain.EntriesPrefix(id)
			it := r.NewIterator(store.IterOptions{Prefix: p, Reverse: true, PrefetchValues: true})
			for it.Seek(append(slices.Clone(p), 0xff)); it.Valid(); it.Next() {
				var mem cid.Cid
				var logSeq uint64
				if err := it.Item().Value(func(v []byte) error {
					var err error
					_, mem, logSeq, err = chain.DecodeEntry(v)
					return err
				}); err != nil {
					it.Close()
					return err
				}
				if logSeq < watermark {
					break
				}
				doc, err := t.doc(r, mem)
				if errors.Is(err, base.ErrForgotten) {
					continue
				}
				if err != nil {
					it.Close()
					return err
				}
				docs = append(docs, doc)
			}
			it.Close()
		}
		return nil
	})
	if err != nil || len(docs) == 0 {
		return err
	}
	return idx.Apply(docs, watermark)
}

// restFactor is how much longer than it worked the indexer rests below its
// backlog bound when no reader waits: it then takes at most
// 1/(1+restFactor) of a core.
const restFactor = 4

// dropForgotten deletes from idx the documents of forgotten memories it
// still holds: a forget whose deletion the index had not persisted when
// the process stopped.
func (t *Text) dropForgotten(idx *text.Index, watermark uint64) error {
	var ids []text.Doc
	err := t.st.View(func(r store.Reader) error {
		return store.Keys(r, store.PrefixTombstone, func(k []byte) {
			mh, err := multihash.Cast(k[len(store.PrefixTombstone):])
			if err != nil {
				return
			}
			id := cid.NewCidV1(cid.DagCBOR, mh).String()
			if ok, err := idx.Has(id); err == nil && ok {
				ids = append(ids, text.Doc{ID: id})
			}
		})
	})
	if err != nil || len(ids) == 0 {
		return err
	}
	t.o.Logger.Info("full-text index: deleting forgotten memories", "documents", len(ids))
	return idx.Delete(ids, watermark)
}

// Compact waits until the index has applied every commit so far (the
// deletions of forgotten memories among them) and rewrites its files, so
// that what the deleted documents said leaves them (text.Index.Compact).
func (t *Text) Compact(ctx context.Context) error {
	if err := t.settle(ctx); err != nil {
		return err
	}
	t.imu.RLock()
	defer t.imu.RUnlock()
	if t.idx == nil {
		return base.ErrClosed
	}
	return t.idx.Compact(ctx)
}
