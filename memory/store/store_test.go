package store_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

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

// Then's function runs once the operation is done — after Done is
// closed, exactly once; one registered after runs at once.
func TestPendingThen(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	defer s.Close()
	release := make(chan struct{})
	p := s.Submit(func(tx store.Tx) error {
		<-release
		tx.Set([]byte("k"), []byte("v"))
		return nil
	})
	var calls atomic.Int32
	var afterDone atomic.Bool
	p.Then(func() {
		select {
		case <-p.Done():
			afterDone.Store(true)
		default:
		}
		calls.Add(1)
	})
	if calls.Load() != 0 {
		t.Fatal("called before the operation ran")
	}
	close(release)
	if err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); calls.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("not called once the operation was done")
		}
		runtime.Gosched()
	}
	if !afterDone.Load() {
		t.Fatal("called before Done was closed")
	}
	p.Then(func() { calls.Add(1) })
	if calls.Load() != 2 {
		t.Fatalf("%d calls; one registered after the operation was done runs at once", calls.Load())
	}
}
