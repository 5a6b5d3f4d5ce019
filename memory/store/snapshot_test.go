package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/config"
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

// While the committer's transaction commits, a view reads the snapshot
// the commit took as it began (Badger would have it wait for the commit's
// fsync); at other times it begins its own transaction. A write behind the
// committer's back shows which one a view read.
func TestViewDuringCommitReadsTheLastCommit(t *testing.T) {
	s, e := openBadger(t)
	if err := s.Update(context.Background(), func(tx Tx) error { tx.Set([]byte("k"), []byte("committed")); return nil }); err != nil {
		t.Fatal(err)
	}
	done := e.inFlight()
	if err := e.db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("behind")) }); err != nil {
		t.Fatal(err)
	}
	if got := viewGet(t, s, "k"); got != "committed" {
		t.Fatalf("during a commit: %q, want the snapshot of what was committed before", got)
	}
	done()
	if got := viewGet(t, s, "k"); got != "behind" {
		t.Fatalf("between commits: %q, want a transaction of its own", got)
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
