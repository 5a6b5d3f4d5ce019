package store_test

import (
	"testing"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/store/storetest"
)

func TestBadger(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o store.Options) *store.Store {
		s, err := store.Open(t.TempDir(), o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o store.Options) *store.Store {
		s, err := store.OpenMemory(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
