package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/store"
)

// openKeySet opens a store on disk and a set of its keys under h/ that
// its commits are told to.
func openKeySet(t *testing.T) (*store.Store, *store.KeySet) {
	t.Helper()
	s, err := store.Open(t.TempDir(), store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ks := store.NewKeySet([]byte("h/"))
	s.Subscribe(ks.Told)
	return s, ks
}

// A key set answers only once loaded, only for keys under its prefix,
// only for a view that sees no commit it was not told of and an operation
// whose batch has not written the key; a deleted key stays in it.
func TestKeySetAnswersOnlyWhenSure(t *testing.T) {
	s, ks := openKeySet(t)
	ctx := context.Background()
	set := func(key string) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error { tx.Set([]byte(key), []byte("v")); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	absent := func(key string) (got bool) {
		t.Helper()
		if err := s.View(func(r store.Reader) error { got = ks.Absent([]byte(key), r); return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	set("h/before")
	if absent("h/none") {
		t.Fatal("a set not loaded answered")
	}
	if n, err := ks.Load(s); err != nil || n != 1 {
		t.Fatalf("Load: %d keys, %v; want 1", n, err)
	}
	set("h/after")
	if err := s.Update(ctx, func(tx store.Tx) error { tx.Delete([]byte("h/before")); return nil }); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"h/none": true, "h/before": false, "h/after": false, "a/none": false} {
		if got := absent(key); got != want {
			t.Errorf("absent %q: %v, want %v", key, got, want)
		}
	}
	// An operation: absent until its batch writes the key.
	if err := s.Update(ctx, func(tx store.Tx) error {
		if !ks.Absent([]byte("h/new"), tx) {
			t.Error("an operation's key the store does not hold is not absent")
		}
		tx.Set([]byte("h/new"), []byte("v"))
		if ks.Absent([]byte("h/new"), tx) {
			t.Error("a key the operation wrote is absent")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A set its store does not tell is sure of no view after its load.
	alone := store.NewKeySet([]byte("h/"))
	if _, err := alone.Load(s); err != nil {
		t.Fatal(err)
	}
	set("h/later")
	if err := s.View(func(r store.Reader) error {
		if alone.Absent([]byte("h/later"), r) {
			t.Error("a set not told of a commit answered a view that sees it")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A set of thousands of keys, loaded and told, holds every one of them and
// lacks the others.
func TestKeySetHoldsThousands(t *testing.T) {
	s, ks := openKeySet(t)
	write := func(from, to int) {
		t.Helper()
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			for i := from; i < to; i++ {
				tx.Set(fmt.Appendf(nil, "h/%d", i), []byte("v"))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 3000)
	if n, err := ks.Load(s); err != nil || n != 3000 {
		t.Fatalf("Load: %d keys, %v; want 3000", n, err)
	}
	write(3000, 6000)
	if n := ks.Len(); n != 6000 {
		t.Fatalf("%d keys after 3,000 more were told, want 6,000", n)
	}
	if err := s.View(func(r store.Reader) error {
		for i := range 12000 {
			if got, want := ks.Absent(fmt.Appendf(nil, "h/%d", i), r), i >= 6000; got != want {
				t.Fatalf("h/%d absent: %v, want %v", i, got, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
