package memory

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/text"
)

// textIndexer keeps the full-text index in step with the store. The
// committer enqueues every new memory (in insertion-log order) and gates
// each batch's acknowledgement on the indexer having applied it, so every
// acknowledged memory is searchable (read-your-writes) while indexing runs
// beside the group commit rather than inside it.
type textIndexer struct {
	idx *text.Index
	log *slog.Logger

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []text.Doc
	queueEnd uint64 // log seq of the last enqueued doc
	indexed  uint64 // log seq up to which the index is applied (or given up)
	closed   bool
	failed   error // last failure; the watermark stays behind, restart catches up
	done     chan struct{}
}

func newTextIndexer(idx *text.Index, watermark uint64, log *slog.Logger) *textIndexer {
	t := &textIndexer{idx: idx, log: log, queueEnd: watermark, indexed: watermark, done: make(chan struct{})}
	t.cond = sync.NewCond(&t.mu)
	go t.run()
	return t
}

// enqueue adds a new memory; called in insertion-log order.
func (t *textIndexer) enqueue(seq uint64, c cid.Cid, content string) {
	t.mu.Lock()
	t.queue = append(t.queue, text.Doc{ID: c.String(), Text: content})
	t.queueEnd = seq
	t.mu.Unlock()
	t.cond.Broadcast()
}

// gate returns a wait for everything enqueued so far (an AckGate).
func (t *textIndexer) gate() func() {
	t.mu.Lock()
	target := t.queueEnd
	ready := t.indexed >= target
	t.mu.Unlock()
	if ready {
		return nil
	}
	return func() {
		t.mu.Lock()
		for t.indexed < target && !t.closed {
			t.cond.Wait()
		}
		t.mu.Unlock()
	}
}

func (t *textIndexer) run() {
	defer close(t.done)
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.closed {
			t.cond.Wait()
		}
		if len(t.queue) == 0 && t.closed {
			t.mu.Unlock()
			return
		}
		docs, end := t.queue, t.queueEnd
		t.queue = nil
		t.mu.Unlock()

		err := t.idx.Apply(docs, end)
		if err != nil {
			err = t.idx.Apply(docs, end) // one retry; then give up until restart
		}
		t.mu.Lock()
		if err != nil {
			t.failed = err
			t.log.Error("full-text indexing failed; the index catches up at the next start", "docs", len(docs), "err", err)
		}
		t.indexed = end
		t.mu.Unlock()
		t.cond.Broadcast()
	}
}

// close indexes what is queued and stops.
func (t *textIndexer) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cond.Broadcast()
	<-t.done
}

// status reports the indexer's position and last failure.
func (t *textIndexer) status() (indexed uint64, failed error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.indexed, t.failed
}

// openText opens the full-text index under dir, rebuilding it when it is
// stale, and replays the insertion log from its watermark.
func (s *Self) openText(dir string) error {
	idx, err := text.Open(dir)
	if errors.Is(err, text.ErrStale) {
		s.log.Warn("rebuilding the full-text index", "reason", err)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		idx, err = text.Open(dir)
	}
	if err != nil {
		return err
	}
	wm, err := idx.Watermark()
	if err != nil {
		idx.Close()
		return fmt.Errorf("%w: full-text watermark: %v", ErrCorrupt, err)
	}
	if wm, err = s.catchUpText(idx, wm); err != nil {
		idx.Close()
		return err
	}
	s.text = newTextIndexer(idx, wm, s.log)
	s.store.SetAckGate(s.text.gate)
	return nil
}

// catchUpText indexes the insertion log after watermark.
func (s *Self) catchUpText(idx *text.Index, watermark uint64) (uint64, error) {
	var last uint64
	err := s.store.View(func(txn *badger.Txn) error {
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
	err = s.store.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixLog, PrefetchValues: true})
		defer it.Close()
		for it.Seek(logKey(watermark + 1)); it.Valid(); it.Next() {
			seq := decodeLogKey(it.Item().Key())
			var c cid.Cid
			if err := it.Item().Value(func(v []byte) error {
				var err error
				c, err = cid.Cast(v)
				return err
			}); err != nil {
				return fmt.Errorf("%w: insertion log %d: %v", ErrCorrupt, seq, err)
			}
			m, err := s.loadMemory(txn, c)
			if err != nil {
				return err
			}
			docs = append(docs, text.Doc{ID: c.String(), Text: m.Text()})
			if len(docs) == batch {
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
	return watermark, err
}

func decodeLogKey(k []byte) uint64 {
	var seq uint64
	for _, b := range k[len(prefixLog):] {
		seq = seq<<8 | uint64(b)
	}
	return seq
}

// logEnd reads the last insertion-log position.
func logEnd(txn *badger.Txn) (uint64, error) {
	item, err := txn.Get(keyMemSeq)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var n uint64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: insertion log counter", ErrCorrupt)
		}
		for _, b := range v {
			n = n<<8 | uint64(b)
		}
		return nil
	})
	return n, err
}
