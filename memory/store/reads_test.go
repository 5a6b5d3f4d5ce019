package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// An operation reads what is committed: a value written by a later
// commit, a key deleted, a commit refused (disk full) that leaves the
// value as it was, a write of the batch it is in, a write behind the
// committer — twice in a row, and the same after its caller scribbled
// over what the first read returned (a guard for any cache of the
// committer's reads; one was tried, see the README).
func TestOperationsReadWhatIsCommitted(t *testing.T) {
	o := store.OptionsOf(config.Default().Store)
	var free atomic.Uint64
	free.Store(1 << 40)
	o.FreeSpace = func() (uint64, error) { return free.Load(), nil }
	s, err := store.Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	key := []byte("s/some-sona")
	read := func(when, want string) {
		t.Helper()
		err := s.Update(ctx, func(tx store.Tx) error {
			for range 2 {
				v, err := tx.Get(key)
				got := string(v)
				if errors.Is(err, base.ErrNotFound) {
					got = "(none)"
				} else if err != nil {
					return err
				}
				if got != want {
					t.Errorf("%s: Get %q, want %q", when, got, want)
				}
				for i := range v {
					v[i] = '?' // the caller's to change
				}
				it, err := tx.Item(key)
				if errors.Is(err, base.ErrNotFound) {
					got = "(none)"
				} else if err != nil {
					return err
				} else if b, err := it.ValueCopy(nil); err != nil {
					return err
				} else {
					got = string(b)
				}
				if got != want {
					t.Errorf("%s: Item %q, want %q", when, got, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(val string) error {
		return s.Update(ctx, func(tx store.Tx) error {
			if val == "" {
				tx.Delete(key)
			} else {
				tx.Set(key, []byte(val))
			}
			return nil
		})
	}
	read("a new store", "(none)")
	if err := write("v1"); err != nil {
		t.Fatal(err)
	}
	read("written", "v1")
	if err := write("v2"); err != nil {
		t.Fatal(err)
	}
	read("written again", "v2")

	free.Store(0)
	if err := write("refused"); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("a write with no room: %v, want ErrDiskFull", err)
	}
	free.Store(1 << 40)
	read("after a refused commit", "v2")

	// Two operations of one batch (most likely): the second reads the
	// first's write; both are then committed.
	first := s.Submit(func(tx store.Tx) error { tx.Set(key, []byte("v3")); return nil })
	second := s.Submit(func(tx store.Tx) error {
		if v, err := tx.Get(key); err != nil || string(v) != "v3" {
			t.Errorf("after an operation that wrote it: %q, %v", v, err)
		}
		return nil
	})
	for _, p := range []*store.Pending{first, second} {
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read("written by a batch", "v3")
	if err := write(""); err != nil {
		t.Fatal(err)
	}
	read("deleted", "(none)")
	if err := write("v4"); err != nil {
		t.Fatal(err)
	}
	read("written after the deletion", "v4")
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set(key, []byte("behind")) }); err != nil {
		t.Fatal(err)
	}
	read("written behind the committer", "behind")
}
