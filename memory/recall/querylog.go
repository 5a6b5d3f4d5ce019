package recall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// The query log (recall.query_log, XmetaV's memory_queries): l/ time (ns,
// 8 bytes BE) sona uuid → messages.QueryLog, a record of each recall that
// leaves a trace. It keeps the latest recall.query_log_keep records
// (queryLogKeeper). They stay in Badger's tree, not its value log: their
// keywords may be a forgotten memory's words (ForgetQueries), and a purge
// cannot take a value out of the value-log file being written.
var prefixQueryLog = []byte("l/")

func queryLogKey(ns int64, sona string) []byte {
	return base.Join(prefixQueryLog, base.U64(uint64(ns)), []byte(sona))
}

// QueryLogEntry is one logged recall.
type QueryLogEntry = messages.QueryLog

// queryLogOp records a recall in the query log.
func (s *Recaller) queryLogOp(q Query, out []*Recalled) store.Op {
	e := &messages.QueryLog{Sona: q.Sona, AgentId: q.AgentID, Keywords: tiers.ContentWords(q.Text), Time: s.clock.Now().UnixNano()}
	for _, r := range out {
		e.Cids = append(e.Cids, r.CID.String())
		e.Scores = append(e.Scores, r.Score)
	}
	raw, err := proto.Marshal(e)
	return func(tx store.Tx) error {
		if err != nil {
			return err
		}
		tx.Set(queryLogKey(e.Time, q.Sona), raw)
		if s.queries != nil {
			tx.OnCommit(s.queries.logged)
		}
		return nil
	}
}

// QueryLog returns the latest logged recalls, newest first.
func (s *Recaller) QueryLog(limit int) ([]*QueryLogEntry, error) {
	var out []*QueryLogEntry
	err := s.store.View(func(txn store.Reader) error {
		it := txn.NewIterator(store.IterOptions{Prefix: prefixQueryLog, Reverse: true, PrefetchValues: true})
		defer it.Close()
		for it.Seek(append(bytes.Clone(prefixQueryLog), 0xff)); it.Valid() && len(out) < limit; it.Next() {
			e := &QueryLogEntry{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, e) }); err != nil {
				return fmt.Errorf("%w: query log: %v", base.ErrCorrupt, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// ForgetQueries deletes, in tx, the logged recalls that returned a memory
// forgotten reports (by its CID's string): their keywords are words of the
// query, which may be the forgotten memory's own text (a chat's input is
// its recall's query).
func ForgetQueries(tx store.Tx, forgotten func(cid string) bool) error {
	var doomed [][]byte
	err := store.Scan(tx, prefixQueryLog, func(k, v []byte) error {
		e := &messages.QueryLog{}
		if err := proto.Unmarshal(v, e); err != nil {
			return fmt.Errorf("%w: query log: %v", base.ErrCorrupt, err)
		}
		if slices.ContainsFunc(e.Cids, forgotten) {
			doomed = append(doomed, bytes.Clone(k))
		}
		return nil
	})
	for _, k := range doomed {
		tx.Delete(k)
	}
	return err
}

// queryLogKeeper keeps the query log to its latest keep records, which a
// store that runs for months would otherwise gather without end (1.6 KB a
// recall; the kept 100k bench store held 415,000, three quarters of its
// tables). It counts them — once, in the background from the start (0.9
// s of walking 415,000 of them, which the start does not wait for), then
// one more for each logged recall committed — and once they are keep and
// a hundredth more, deletes the oldest down to keep from a goroutine of
// its own, pruneOps records to an operation.
type queryLogKeeper struct {
	keep int64
	c    store.Committer
	log  *slog.Logger
	// n is the records held, about: a forget's deletions (ForgetQueries)
	// are not counted, so a prune may leave fewer than keep; nor are those
	// of a recall committed between the start and the count's view, so
	// they may be counted twice.
	n       atomic.Int64
	counted chan struct{} // closed once the count at the start is in n
	stop    atomic.Bool   // Close: the count gives up
	busy    atomic.Bool   // a prune runs
	// from is where the next prune starts (past the last key deleted:
	// not through their tombstones again); the prune's operations and
	// their commits alone touch it, on the committer's goroutine.
	from []byte
}

// pruneOps is the most records one prune operation deletes.
const pruneOps = 1000

// newQueryLogKeeper starts counting the records of st; nil when keep is 0
// or st cannot be written. It deletes nothing until a logged recall is
// committed: the self is open by then (a write made while it opens would
// come before its subscribers are all there).
func newQueryLogKeeper(st store.Viewer, keep int, log *slog.Logger) *queryLogKeeper {
	c, ok := st.(store.Committer)
	if keep <= 0 || !ok {
		return nil
	}
	k := &queryLogKeeper{keep: int64(keep), c: c, log: log, from: prefixQueryLog, counted: make(chan struct{})}
	go func() {
		defer close(k.counted)
		err := st.View(func(r store.Reader) error {
			it := r.NewIterator(store.IterOptions{Prefix: prefixQueryLog})
			defer it.Close()
			n := int64(0)
			for it.Rewind(); it.Valid(); it.Next() {
				if n++; n%1024 == 0 && k.stop.Load() {
					return base.ErrClosed
				}
			}
			k.n.Add(n)
			return nil
		})
		if err != nil && !errors.Is(err, base.ErrClosed) {
			log.Error("query log: counting its records: it is not kept to recall.query_log_keep until the next start", "err", err)
			k.n.Store(math.MinInt64 / 2) // never over: nothing deleted on a wrong count
		}
	}()
	return k
}

// Close stops the count at the start, if it still runs, and waits for it:
// it reads the store outside the committer, which must not close under it.
// A prune in progress ends at its next write, refused by the store closed.
func (k *queryLogKeeper) Close() {
	k.stop.Store(true)
	<-k.counted
}

// logged counts a logged recall committed (an OnCommit hook).
func (k *queryLogKeeper) logged() {
	if k.n.Add(1) <= k.keep+k.keep/100 {
		return
	}
	select {
	case <-k.counted:
		k.prune()
	default: // a later one prunes, once the count is in
	}
}

// prune deletes the oldest records down to keep in the background,
// unless a prune runs already.
func (k *queryLogKeeper) prune() {
	if !k.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer k.busy.Store(false)
		if err := k.Prune(context.Background()); err != nil && !errors.Is(err, base.ErrClosed) {
			k.log.Warn("query log: deleting the oldest records", "keep", k.keep, "err", err)
		}
	}()
}

// Prune deletes the oldest records until keep are left, once they are
// counted. Its operations count what they delete as they commit, so that
// two prunes at once (the background's, a caller's) delete no more than
// the excess.
func (k *queryLogKeeper) Prune(ctx context.Context) error {
	select {
	case <-k.counted:
	case <-ctx.Done():
		return ctx.Err()
	}
	for k.n.Load() > k.keep {
		err := k.c.Update(ctx, func(tx store.Tx) error {
			want := min(pruneOps, int(k.n.Load()-k.keep))
			it := tx.NewIterator(store.IterOptions{Prefix: prefixQueryLog})
			defer it.Close()
			var last []byte
			deleted := 0
			for it.Seek(k.from); it.Valid() && deleted < want; it.Next() {
				last = it.Item().KeyCopy(nil)
				tx.Delete(last)
				deleted++
			}
			tx.OnCommit(func() {
				if want > 0 && deleted == 0 {
					k.n.Store(k.keep) // fewer than counted: a forget deleted some
					return
				}
				k.n.Add(-int64(deleted))
				if last != nil {
					k.from = append(last, 0)
				}
			})
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
