package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
)

func openBadger(t *testing.T) (*Store, *badgerEngine) {
	t.Helper()
	s, err := Open(t.TempDir(), OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s.eng.(*badgerEngine)
}

func viewGet(t *testing.T, s *Store, key string) string {
	t.Helper()
	var v []byte
	if err := s.View(func(r Reader) error {
		var err error
		v, err = r.Get([]byte(key))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// While the committer is busy, views share a read transaction — a
// commit replaces it with one begun after it, and when there is none the
// first view begins it and offers it — so that they do not each begin
// one; a write behind the committer withdraws it; one that missed a
// commit is never read; and while the committer is idle views begin
// their own and none is held, so that none holds back the versions Badger
// may drop. A write behind the committer's back shows which one a view
// read.
func TestViewsShareASnapshotWhileTheCommitterIsBusy(t *testing.T) {
	s, e := openBadger(t)
	if err := s.Update(context.Background(), func(tx Tx) error { tx.Set([]byte("k"), []byte("committed")); return nil }); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); e.busy.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("the committer, with nothing queued, is still busy")
		}
		runtime.Gosched()
	}
	behind := func(v string) {
		t.Helper()
		if err := e.update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	behind("behind")
	if got := viewGet(t, s, "k"); got != "behind" || e.snap.Load() != nil {
		t.Fatalf("the committer idle: %q, snapshot offered %v; want a transaction of the view's own, not offered", got, e.snap.Load() != nil)
	}
	e.working(true) // as the committer does when it takes a batch
	if got := viewGet(t, s, "k"); got != "behind" || e.snap.Load() == nil {
		t.Fatalf("the committer busy: %q, snapshot offered %v", got, e.snap.Load() != nil)
	}
	behind("behind again")
	if got := viewGet(t, s, "k"); got != "behind" {
		t.Fatalf("the committer busy: %q, want the snapshot the view before offered", got)
	}
	e.renew() // as a commit does
	if sn := e.snap.Load(); sn == nil || sn.commits != e.commits.Load() {
		t.Fatal("after a commit, the committer busy: no snapshot offered that counts it")
	}
	if got := viewGet(t, s, "k"); got != "behind again" {
		t.Fatalf("after a commit: %q, want a snapshot that has it", got)
	}
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("written behind")) }); err != nil {
		t.Fatal(err)
	}
	if got := viewGet(t, s, "k"); got != "written behind" {
		t.Fatalf("after WriteBehind: %q", got)
	}
	// A snapshot offered that missed a commit (an offer that raced the
	// commit's withdrawal) is never read.
	stale := e.snapshot(1)
	behind("after the stale one")
	e.done()
	e.offer(stale)
	if got := viewGet(t, s, "k"); got != "after the stale one" {
		t.Fatalf("with a stale snapshot offered: %q", got)
	}
	e.working(false) // as the committer does with nothing queued
	if e.snap.Load() != nil {
		t.Fatal("the committer idle, a snapshot is still offered")
	}
	behind("while idle")
	e.renew() // a commit the committer idle (a barrier's)
	if got := viewGet(t, s, "k"); got != "while idle" || e.snap.Load() != nil {
		t.Fatalf("after a commit, the committer idle: %q, snapshot offered %v; want none offered", got, e.snap.Load() != nil)
	}
}

// Read-your-writes while commits are in flight all the time: every
// writer reads its acknowledged write back at once (run with -race: views
// share snapshots with each other and with their replacement).
func TestReadYourWritesWhileCommitting(t *testing.T) {
	s, _ := openBadger(t)
	ctx := context.Background()
	stop := make(chan struct{})
	var busy sync.WaitGroup
	busy.Add(1)
	go func() { // keeps the committer committing
		defer busy.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.Update(ctx, func(tx Tx) error { tx.Set([]byte(fmt.Sprintf("busy/%d", i%100)), []byte("x")); return nil })
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []byte(fmt.Sprintf("w/%d", w))
			for i := range 100 {
				val := fmt.Sprint(i)
				if err := s.Update(ctx, func(tx Tx) error { tx.Set(key, []byte(val)); return nil }); err != nil {
					errs <- err
					return
				}
				var got []byte
				if err := s.View(func(r Reader) error {
					var err error
					got, err = r.Get(key)
					return err
				}); err != nil || string(got) != val {
					errs <- fmt.Errorf("writer %d read %q after writing %q: %v", w, got, val, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	busy.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A view of a closed store is refused (ErrClosed): it does not begin a
// transaction of the closed Badger, which would wait for its stopped
// watermark goroutine.
func TestViewAfterCloseIsRefused(t *testing.T) {
	s, _ := openBadger(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.View(func(Reader) error { return nil }); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("a view after Close: %v, want ErrClosed", err)
	}
}

// A read sees the version it began at through compactions while it is
// open (Badger is told to keep it: settle), and once no read needs the
// older versions a compaction drops them. Without the reads counted, the
// open read finds the key gone: its version was compacted away.
func TestCompactionsKeepWhatOpenReadsSee(t *testing.T) {
	s, e := openBadger(t)
	ctx := context.Background()
	set := func(v string) {
		t.Helper()
		if err := s.Update(ctx, func(tx Tx) error { tx.Set([]byte("k"), []byte(v)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	compact := func() {
		t.Helper()
		if err := s.flushMemtables(ctx); err != nil {
			t.Fatal(err)
		}
		e.settle()
		if err := e.db.Flatten(1); err != nil {
			t.Fatal(err)
		}
	}
	versions := func() (n int) {
		t.Helper()
		txn := e.db.NewTransactionAt(e.version.Load(), false)
		defer txn.Discard()
		it := txn.NewKeyIterator([]byte("k"), badger.IteratorOptions{AllVersions: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return n
	}
	set("first")
	old, done := e.read(false)
	for _, v := range []string{"second", "third"} {
		set(v)
		compact() // each commit settles too
	}
	if st := s.CommitStats(); st.ReadsOpen < 1 || st.OldestReadBehind < 2 {
		t.Fatalf("with a read open two commits back: %d reads open, the oldest %d commits behind", st.ReadsOpen, st.OldestReadBehind)
	}
	item, err := old.Get([]byte("k"))
	if err != nil {
		t.Fatalf("the open read, after compactions: %v", err)
	}
	if v, _ := item.ValueCopy(nil); string(v) != "first" {
		t.Fatalf("the open read sees %q, want first", v)
	}
	if n := versions(); n < 2 {
		t.Fatalf("%d versions of k kept while a read needs an old one", n)
	}
	done()
	set("fourth")
	for deadline := time.Now().Add(10 * time.Second); s.CommitStats().OldestReadBehind != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the read ended, the committer done: the oldest read still %d commits behind", s.CommitStats().OldestReadBehind)
		}
		runtime.Gosched()
	}
	compact()
	if n := versions(); n != 1 {
		t.Fatalf("%d versions of k kept once no read needs them, want 1", n)
	}
	if got := viewGet(t, s, "k"); got != "fourth" {
		t.Fatalf("after the compactions: %q", got)
	}
}
