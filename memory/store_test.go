package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func openTestStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s *Store, key string) ([]byte, bool) {
	t.Helper()
	var v []byte
	err := s.View(func(txn Reader) error {
		item, err := txn.Item([]byte(key))
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func TestStoreOpsAreAtomicAndOrdered(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()

	// A failing op leaves nothing, even after it buffered writes.
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx *Tx) error {
		tx.Set([]byte("t/a"), []byte("1"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, ok := get(t, s, "t/a"); ok {
		t.Fatal("failed op left a write")
	}

	// Many concurrent ops: each is applied once, and an op sees the writes
	// of the ops before it (a counter incremented by all of them).
	var wg sync.WaitGroup
	const n = 200
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx *Tx) error {
				v, err := tx.Get([]byte("t/count"))
				if err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				var c int
				fmt.Sscan(string(v), &c)
				tx.Set([]byte("t/count"), []byte(fmt.Sprint(c+1)))
				tx.Set([]byte(fmt.Sprintf("t/item/%03d", i)), []byte("x"))
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if v, _ := get(t, s, "t/count"); string(v) != fmt.Sprint(n) {
		t.Fatalf("count = %s, want %d", v, n)
	}
}

func TestStoreSplitsOversizedBatches(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	// Each op writes 2 MiB into the LSM tree (32 values under the value-log
	// threshold); a Badger transaction holds about 9.6 MiB, so a batch of
	// them must be split across transactions.
	big := bytes.Repeat([]byte{7}, valueThreshold-1024)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(ctx, func(tx *Tx) error {
				for j := 0; j < 32; j++ {
					tx.Set([]byte(fmt.Sprintf("t/big/%02d/%02d", i, j)), big)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		if v, ok := get(t, s, fmt.Sprintf("t/big/%02d/31", i)); !ok || len(v) != len(big) {
			t.Fatalf("op %d not written", i)
		}
	}
	// One op too big for any transaction (values kept in the LSM tree,
	// under the value-log threshold) fails alone, writing nothing.
	inline := bytes.Repeat([]byte{8}, valueThreshold-1024)
	err := s.Update(ctx, func(tx *Tx) error {
		for i := 0; i < 200; i++ {
			tx.Set([]byte(fmt.Sprintf("t/huge/%d", i)), inline)
		}
		return nil
	})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if _, ok := get(t, s, "t/huge/0"); ok {
		t.Fatal("oversized op left a partial write")
	}
}

func TestStoreRefusesBadBlocks(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	c := mustCIDOf(t, CodecRaw, []byte("right"))
	if err := s.Update(ctx, func(tx *Tx) error { return tx.PutBlock(c, []byte("wrong")) }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
	if ok, _ := s.HasBlock(c); ok {
		t.Fatal("mismatched block was stored")
	}
	if _, err := s.Block(c); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// TestCorruptBlockIsNotServed damages stored blocks two ways: a value
// overwritten in Badger behind the door's back, and a byte flipped in the
// value log file on disk. Both read as ErrCorrupt.
func TestCorruptBlockIsNotServed(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	ctx := context.Background()

	small := []byte("a small memory block")
	cs := mustCIDOf(t, CodecRaw, small)
	large := bytes.Repeat([]byte("memoria-large-block-"), 10_000) // 200 KB: value log
	cl := mustCIDOf(t, CodecRaw, large)
	if err := s.Update(ctx, func(tx *Tx) error {
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
		return txn.Set(blockKey(cs), []byte("a smell memory block"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(cs); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered block: err = %v, want ErrCorrupt", err)
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
	if b, err := s.Block(cl); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped block: err = %v (%d bytes), want ErrCorrupt", err, len(b))
	}
}

func TestStoreClosedRefusesWrites(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestStoreDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	if _, err := OpenStore(dir, StoreOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
}
