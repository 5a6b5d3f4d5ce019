package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/text"
)

// textIndexer keeps the full-text index in step with the store, off the
// acknowledgement path: the committer enqueues every new memory (in
// insertion-log order) and every memory joining another sona, and the
// indexer applies whatever has accumulated as one batch. A sona remembers
// the position of its latest document and its recalls wait for the
// indexer to pass it, so a sona always finds what it wrote
// (read-your-writes) while writes never wait for the index.
//
// The index is derived from the store, so a damaged one is rebuilt: a
// search that finds it corrupt, or a batch that fails, marks it broken,
// recall goes on without its BM25 path, and the indexer's goroutine
// rebuilds it from the insertion log (rebuild) before it indexes
// anything more.
type textIndexer struct {
	imu   sync.RWMutex // guards idx: held by searches, taken to swap it
	idx   *text.Index  // nil while rebuilt, or when rebuilding failed
	log   *slog.Logger
	clock clock.Clock // times its pacing and rebuilds
	// rebuild deletes the index and builds it again from the store,
	// unless cancel closes first (ErrClosed).
	rebuild  func(cancel <-chan struct{}) (*text.Index, error)
	rebuilds *atomic.Int64 // the Self's count of rebuilds (metrics)

	mu        sync.Mutex
	cond      *sync.Cond
	queue     []text.Doc
	watermark uint64            // log seq of the last new memory enqueued
	enqueued  uint64            // docs enqueued so far
	applied   uint64            // docs applied (or given up) so far
	latest    map[string]uint64 // position of each sona's latest document (read-your-writes)
	closed    bool
	waiters   int   // readers waiting for a position (waitApplied)
	backlog   int   // below this many queued documents, index at a fifth of full pace
	broken    error // why the index is being rebuilt (nil: it is not)
	gaveUp    bool  // rebuilding failed: without the index until restart
	rebuildOn bool  // a rebuild is under way
	done      chan struct{}
	closing   chan struct{} // closed by stopBackground
	closeOnce sync.Once

	stop     chan struct{} // closed by stopPriming
	stopOnce sync.Once
	priming  sync.WaitGroup // the forward index's priming, when under way
}

func newTextIndexer(idx *text.Index, watermark uint64, backlog int, log *slog.Logger, clk clock.Clock,
	rebuild func(cancel <-chan struct{}) (*text.Index, error), rebuilds *atomic.Int64) *textIndexer {
	t := &textIndexer{idx: idx, log: log, clock: clk, watermark: watermark, backlog: backlog, done: make(chan struct{}), stop: make(chan struct{}),
		closing: make(chan struct{}), rebuild: rebuild, rebuilds: rebuilds, latest: map[string]uint64{}}
	t.cond = sync.NewCond(&t.mu)
	go t.run()
	return t
}

// enqueue adds the document of a memory appended to sona: a new memory
// with its log seq (in log order), or, with seq 0, a memory that joined
// another sona. The sona's searches wait for it.
func (t *textIndexer) enqueue(sona string, seq uint64, doc text.Doc) {
	t.mu.Lock()
	t.queue = append(t.queue, doc)
	if seq > 0 {
		t.watermark = seq
	}
	t.enqueued++
	t.latest[sona] = t.enqueued
	t.mu.Unlock()
	t.cond.Broadcast()
}

// settle waits until everything enqueued so far is searchable.
func (t *textIndexer) settle(ctx context.Context) error {
	t.mu.Lock()
	pos := t.enqueued
	t.mu.Unlock()
	return t.waitApplied(ctx, pos)
}

// waitApplied waits until the document at pos is searchable.
func (t *textIndexer) waitApplied(ctx context.Context, pos uint64) error {
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

// errTextUnavailable: the index is being rebuilt; recall goes without it.
var errTextUnavailable = errors.New("memory: the full-text index is being rebuilt")

// search waits until sona's latest document is searchable (so a sona
// always finds what it wrote) and searches the index, or returns
// errTextUnavailable while it is broken — also when this search is what
// finds it corrupt.
func (t *textIndexer) search(ctx context.Context, sona string, q string, opts text.SearchOptions) ([]text.Hit, error) {
	t.mu.Lock()
	pos := t.latest[sona]
	t.mu.Unlock()
	if err := t.waitApplied(ctx, pos); err != nil {
		return nil, err
	}
	t.imu.RLock()
	idx := t.idx
	var hits []text.Hit
	err := errTextUnavailable
	if idx != nil && t.status() == nil {
		hits, err = idx.Search(q, opts)
	}
	t.imu.RUnlock()
	if errors.Is(err, text.ErrCorrupt) {
		t.markBroken(err)
		return nil, errTextUnavailable
	}
	return hits, err
}

// status is why the index is unavailable, or nil.
func (t *textIndexer) status() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.broken
}

// markBroken takes the index out of recall and has the indexer rebuild it.
func (t *textIndexer) markBroken(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return
	}
	t.broken = err
	t.log.Error("the full-text index is corrupt: recall goes on without BM25 while it is rebuilt from the store", "err", err)
	t.cond.Broadcast()
}

// rebuildIndex replaces a broken index with one built from the store.
func (t *textIndexer) rebuildIndex() {
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
	t.stopPriming()
	start := t.clock.Now()
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
		if !errors.Is(err, ErrClosed) {
			t.log.Error("rebuilding the full-text index failed: recall goes on without BM25; it is rebuilt at the next start", "err", err)
		}
		return
	}
	t.imu.Lock()
	t.idx = idx
	t.imu.Unlock()
	t.broken = nil
	t.rebuilds.Add(1)
	t.log.Info("full-text index rebuilt", "took", t.clock.Since(start))
	t.cond.Broadcast()
}

func (t *textIndexer) run() {
	defer close(t.done)
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.closed && (t.broken == nil || t.gaveUp) {
			t.cond.Wait()
		}
		if t.broken != nil && !t.gaveUp && !t.closed {
			t.mu.Unlock()
			t.rebuildIndex()
			continue
		}
		if len(t.queue) == 0 && t.closed {
			t.mu.Unlock()
			return
		}
		docs, wm := t.queue, t.watermark
		t.queue = nil
		idx := t.idx // only this goroutine changes it
		t.mu.Unlock()

		start := t.clock.Now()
		var err error
		if idx != nil { // nil when rebuilding failed: the next start rebuilds
			err = idx.Apply(docs, wm)
			if err != nil {
				err = idx.Apply(docs, wm) // one retry; then give up until restart
			}
		}
		t.mu.Lock()
		t.applied += uint64(len(docs))
		t.mu.Unlock()
		t.cond.Broadcast()
		if err != nil {
			// The index misses these documents: rebuilt from the store,
			// which has them, it will not.
			t.markBroken(err)
			continue
		}
		t.rest(restFactor * t.clock.Since(start))
	}
}

// rest pauses the indexer after a batch — so that indexing takes a small
// share of a core from the writes it would otherwise compete with — unless
// a reader waits, the backlog is over its bound, or the indexer closes.
func (t *textIndexer) rest(d time.Duration) {
	wake := t.clock.AfterFunc(d, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer wake.Stop()
	deadline := t.clock.Now().Add(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.waiters == 0 && len(t.queue) <= t.backlog && !t.closed && t.clock.Now().Before(deadline) {
		t.cond.Wait()
	}
}

// stopBackground ends the forward index's priming and a rebuild of the
// index, if under way: before the store they read closes.
func (t *textIndexer) stopBackground() {
	t.stopPriming()
	t.closeOnce.Do(func() { close(t.closing) })
	t.mu.Lock()
	for t.rebuildOn {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// stopPriming ends the forward index's priming, if under way: before the
// store it reads closes.
func (t *textIndexer) stopPriming() {
	t.stopOnce.Do(func() { close(t.stop) })
	t.priming.Wait()
}

// close indexes what is queued and stops.
func (t *textIndexer) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cond.Broadcast()
	<-t.done
}

// Settle waits until everything submitted so far is durable and every
// memory acknowledged so far is searchable by full text. Recall in a
// sona already sees that sona's own writes; Settle is for callers that
// need the whole corpus in step (BM25 statistics span every sona), such
// as tests comparing recalls across a restart and offline evaluations.
func (s *Self) Settle(ctx context.Context) error {
	if err := s.store.Barrier(ctx); err != nil {
		return err
	}
	return s.text.settle(ctx)
}

// closeIndex persists and closes the index (after close).
func (t *textIndexer) closeIndex() error {
	t.imu.Lock()
	defer t.imu.Unlock()
	if t.idx == nil {
		return nil
	}
	if t.status() != nil {
		return t.idx.Discard() // damaged: the next start rebuilds it
	}
	return t.idx.Close()
}

// len is the number of documents in the index.
func (t *textIndexer) len() (uint64, error) {
	t.imu.RLock()
	defer t.imu.RUnlock()
	if t.idx == nil {
		return 0, errTextUnavailable
	}
	return t.idx.Len()
}

// openText opens the full-text index under dir — rebuilding it when it
// is stale, damaged, or ahead of the store (which lost writes it held) —
// and replays the insertion log from its watermark.
func (s *Self) openText(dir string) error {
	text.SetBM25(s.cfg.Recall.BM25K1, s.cfg.Recall.BM25B)
	idx, wm, err := s.openTextIndex(dir)
	if err != nil {
		return err
	}
	opened := wm
	if wm, err = s.catchUpText(idx, wm, nil); err != nil {
		idx.Close()
		return err
	}
	s.text = newTextIndexer(idx, wm, s.cfg.Index.TextBacklog, s.log, s.clock, func(cancel <-chan struct{}) (*text.Index, error) {
		return s.rebuildText(dir, cancel)
	}, &s.textRebuilds)
	if opened == 0 {
		idx.MarkPrimed() // a new index: everything in it went through Apply
		return nil
	}
	s.text.priming.Add(1)
	go func() {
		defer s.text.priming.Done()
		start := s.clock.Now()
		if err := s.primeText(idx, opened, s.text.stop); errors.Is(err, ErrClosed) {
			return
		} else if err != nil {
			s.log.Warn("full-text forward index not primed; BM25 takes its slower path", "err", err)
			return
		}
		idx.MarkPrimed()
		s.log.Info("full-text forward index primed", "documents", opened, "took", s.clock.Since(start))
	}()
	return nil
}

// openTextIndex opens the index and reads its watermark, starting a new
// index instead of one that cannot be used.
func (s *Self) openTextIndex(dir string) (*text.Index, uint64, error) {
	var end uint64
	if err := s.store.View(func(txn Reader) error {
		var err error
		end, err = logEnd(txn)
		return err
	}); err != nil {
		return nil, 0, err
	}
	idx, err := text.Open(dir)
	var wm uint64
	if err == nil {
		if wm, err = idx.Watermark(); err != nil {
			err = fmt.Errorf("%w: watermark: %v", text.ErrCorrupt, err)
		} else if wm > end {
			err = fmt.Errorf("%w: it holds the insertion log up to %d, the store's ends at %d", errTextAhead, wm, end)
		}
		if err != nil {
			idx.Discard()
		}
	}
	switch {
	case err == nil:
		return idx, wm, nil
	case errors.Is(err, text.ErrStale):
		s.log.Warn("rebuilding the full-text index", "reason", err)
	case errors.Is(err, text.ErrCorrupt), errors.Is(err, errTextAhead):
		s.log.Error("rebuilding the full-text index", "reason", err)
		s.textRebuilds.Add(1)
	default:
		return nil, 0, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, 0, err
	}
	idx, err = text.Open(dir)
	return idx, 0, err
}

// TextIndexRebuilds is how many times the full-text index was found
// damaged (or ahead of the store) and rebuilt, at open or while serving.
func (s *Self) TextIndexRebuilds() int64 { return s.textRebuilds.Load() }

// errTextAhead: the full-text index holds memories the store does not,
// after the loss of acknowledged writes was accepted.
var errTextAhead = errors.New("memory: the full-text index is ahead of the store")

// rebuildText deletes the full-text index and builds it again from the
// store (while the server runs: the indexer's goroutine calls it), unless
// cancel closes first (ErrClosed).
func (s *Self) rebuildText(dir string, cancel <-chan struct{}) (*text.Index, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	idx, err := text.Open(dir)
	if err != nil {
		return nil, err
	}
	if _, err := s.catchUpText(idx, 0, cancel); err != nil {
		idx.Discard()
		return nil, err
	}
	idx.MarkPrimed()
	return idx, nil
}

// primeText gives the forward index of a text index opened from disk the
// documents it held at open — the insertion log up to its watermark then
// (documents since went through Apply) — reading a batch per transaction.
func (s *Self) primeText(idx *text.Index, upTo uint64, stop <-chan struct{}) error {
	const batch = 1024
	for next := uint64(1); next <= upTo; {
		select {
		case <-stop:
			return ErrClosed
		default:
		}
		var docs []text.Doc
		err := s.store.View(func(txn Reader) error {
			it := txn.NewIterator(IterOptions{Prefix: prefixLog, PrefetchValues: true})
			defer it.Close()
			for it.Seek(logKey(next)); it.Valid() && len(docs) < batch; it.Next() {
				seq, c, err := logEntry(it.Item())
				if err != nil {
					return err
				}
				if seq > upTo {
					break
				}
				next = seq + 1
				m, err := readMemory(txn, c) // not through the cache: this is a scan
				if err != nil {
					return err
				}
				docs = append(docs, text.Doc{ID: c.String(), Text: m.Text()})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return nil
		}
		if err := idx.Prime(docs); err != nil {
			return err
		}
	}
	return nil
}

// catchUpText indexes the insertion log after watermark, unless cancel
// closes first (ErrClosed).
func (s *Self) catchUpText(idx *text.Index, watermark uint64, cancel <-chan struct{}) (uint64, error) {
	var last uint64
	err := s.store.View(func(txn Reader) error {
		var err error
		last, err = logEnd(txn)
		return err
	})
	if err != nil || last <= watermark {
		return watermark, err
	}
	s.log.Info("catching up the full-text index", "from", watermark, "to", last)
	const batch = 512
	var docs []text.Doc
	err = s.store.View(func(txn Reader) error {
		it := txn.NewIterator(IterOptions{Prefix: prefixLog, PrefetchValues: true})
		defer it.Close()
		for it.Seek(logKey(watermark + 1)); it.Valid(); it.Next() {
			seq, c, err := logEntry(it.Item())
			if err != nil {
				return err
			}
			doc, err := s.textDoc(txn, c)
			if err != nil {
				return err
			}
			docs = append(docs, doc)
			if len(docs) == batch {
				select {
				case <-cancel:
					return ErrClosed
				default:
				}
				if err := idx.Apply(docs, seq); err != nil {
					return err
				}
				docs = docs[:0]
				watermark = seq
				if s.progress != nil {
					s.progress("text index", watermark, last)
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
	if s.progress != nil {
		s.progress("text index", watermark, last)
	}
	if err != nil {
		return watermark, err
	}
	return watermark, s.catchUpJoins(idx, watermark)
}

// textDoc is the full-text document of a stored memory.
func (s *Self) textDoc(txn Reader, c cid.Cid) (text.Doc, error) {
	m, err := s.Memories.MemoryIn(txn, c)
	if err != nil {
		return text.Doc{}, err
	}
	meta, err := s.Memories.MetaIn(txn, c)
	if err != nil {
		return text.Doc{}, err
	}
	return s.docOf(c, m, meta.Sonas), nil
}

// docOf builds a memory's full-text document.
func (s *Self) docOf(c cid.Cid, m *Memory, sonas []string) text.Doc {
	return text.Doc{ID: c.String(), Text: m.Text(), Sonas: slices.Clone(sonas)}
}

// catchUpJoins re-indexes the memories appended to chains at or after the
// watermark: among them, memories that joined another sona (which the
// insertion log does not record) after the index last persisted.
func (s *Self) catchUpJoins(idx *text.Index, watermark uint64) error {
	var docs []text.Doc
	err := s.store.View(func(txn Reader) error {
		for _, id := range s.Sonas.IDs() {
			p := chainPrefix(id)
			it := txn.NewIterator(IterOptions{Prefix: p, Reverse: true, PrefetchValues: true})
			for it.Seek(append(slices.Clone(p), 0xff)); it.Valid(); it.Next() {
				var mem cid.Cid
				var logSeq uint64
				if err := it.Item().Value(func(v []byte) error {
					var err error
					_, mem, logSeq, err = decodeChainEntry(v)
					return err
				}); err != nil {
					it.Close()
					return err
				}
				if logSeq < watermark {
					break
				}
				doc, err := s.textDoc(txn, mem)
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
