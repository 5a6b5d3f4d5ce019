package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// A tombstone is seen wherever it was written: by the operation that
// wrote it, the operations and views after its commit, after a reopen, and
// after a write behind the committer — the reads that skip Badger for the
// tombstones a store does not hold never skip one it holds.
func TestTombstonesSeenWhereverWritten(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	ctx := context.Background()
	gone, behind, never := rawCID(t, []byte("gone")), rawCID(t, []byte("behind")), rawCID(t, []byte("never"))
	check := func(s *store.Store, when string, want map[cid.Cid]bool) {
		t.Helper()
		for c, w := range want {
			if got, err := s.Forgotten(c); err != nil || got != w {
				t.Fatalf("%s: a view says forgotten %v (%v) for %s, want %v", when, got, err, c, w)
			}
			err := s.Update(ctx, func(tx store.Tx) error {
				if got, err := tx.Has(store.TombstoneKey(c)); err != nil || got != w {
					t.Errorf("%s: an operation says forgotten %v (%v) for %s, want %v", when, got, err, c, w)
				}
				_, err := tx.Get(store.TombstoneKey(c))
				if w == errors.Is(err, base.ErrNotFound) {
					t.Errorf("%s: an operation's Get: %v", when, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	check(s, "a new store", map[cid.Cid]bool{gone: false, behind: false, never: false})
	if err := s.Update(ctx, func(tx store.Tx) error {
		tx.Set(store.TombstoneKey(gone), []byte{})
		if ok, err := tx.Has(store.TombstoneKey(gone)); err != nil || !ok {
			t.Errorf("the operation that wrote it: forgotten %v (%v)", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A later operation of the same batch reads it before the commit.
	first := s.Submit(func(tx store.Tx) error { tx.Set(store.TombstoneKey(behind), []byte{}); return nil })
	second := s.Submit(func(tx store.Tx) error {
		if ok, err := tx.Has(store.TombstoneKey(behind)); err != nil || !ok {
			t.Errorf("an operation after the one that wrote it: forgotten %v (%v)", ok, err)
		}
		tx.Delete(store.TombstoneKey(behind))
		return nil
	})
	for _, p := range []*store.Pending{first, second} {
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check(s, "after the commits", map[cid.Cid]bool{gone: true, behind: false, never: false})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestStore(t, dir)
	defer s.Close()
	check(s, "reopened", map[cid.Cid]bool{gone: true, behind: false, never: false})
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set(store.TombstoneKey(behind), []byte{}) }); err != nil {
		t.Fatal(err)
	}
	check(s, "written behind the committer", map[cid.Cid]bool{gone: true, behind: true, never: false})
}
