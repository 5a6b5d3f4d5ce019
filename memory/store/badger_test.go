package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

func openTestStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(dir, store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rawCID(t *testing.T, b []byte) cid.Cid {
	t.Helper()
	h, err := multihash.Sum(b, multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	return cid.NewCidV1(0x55, h)
}

// TestCorruptBlockIsNotServed damages stored blocks two ways: a value
// overwritten in Badger behind the door's back, and a byte flipped in the
// value log file on disk. Both read as base.ErrCorrupt.
func TestCorruptBlockIsNotServed(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	ctx := context.Background()

	small := []byte("a small memory block")
	cs := rawCID(t, small)
	large := bytes.Repeat([]byte("memoria-large-block-"), 10_000) // 200 KB: value log
	cl := rawCID(t, large)
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutBlock(cs, small); err != nil {
			return err
		}
		return tx.PutBlock(cl, large)
	}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Block(cl); err != nil || !bytes.Equal(b, large) {
		t.Fatalf("before corruption: %v", err)
	}
	// Tamper with the small block through Badger directly.
	if err := s.DB().Update(func(txn *badger.Txn) error {
		return txn.Set(store.BlockKey(cs), []byte("a smell memory block"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(cs); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("tampered block: err = %v, want base.ErrCorrupt", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Flip one byte of the large block inside the value log on disk.
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	flipped := false
	for _, p := range vlogs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, large[:64]); i >= 0 {
			data[i+1000] ^= 0x01
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			flipped = true
		}
	}
	if !flipped {
		t.Fatal("large block not found in any value log file")
	}
	s = openTestStore(t, dir)
	defer s.Close()
	if b, err := s.Block(cl); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("flipped block: err = %v (%d bytes), want base.ErrCorrupt", err, len(b))
	}
}

func TestStoreDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	if _, err := store.Open(dir, store.OptionsOf(config.Default().Store)); !errors.Is(err, base.ErrLocked) {
		t.Fatalf("second open: err = %v, want base.ErrLocked", err)
	}
}
