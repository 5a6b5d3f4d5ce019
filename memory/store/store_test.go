package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"
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

// The commits made while the acknowledger records a mark share its next
// record, of the latest mark: none of their writes is acknowledged before
// it is durable, and the file holds the last commit's mark.
func TestQueuedCommitsShareOneMark(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir)
	defer s.Close()
	var (
		mu      sync.Mutex
		marks   []uint64
		holding = make(chan struct{})
		hold    = make(chan struct{})
		release = sync.OnceFunc(func() { close(hold) })
	)
	defer release() // before Close, which waits for the acknowledger
	store.SetBeforeMark(s, func(commits uint64) {
		mu.Lock()
		marks = append(marks, commits)
		first := len(marks) == 1
		mu.Unlock()
		if first {
			close(holding)
			<-hold
		}
	})
	set := func(k string) store.Op {
		return func(tx store.Tx) error { tx.Set([]byte(k), []byte("v")); return nil }
	}
	committed := func(n uint64) {
		t.Helper()
		testutil.EventuallyShow(t, fmt.Sprintf("%d commits", n), func() (bool, string) {
			c := s.CommitStats().Commits
			return c >= n, fmt.Sprint(c)
		})
	}
	before := s.CommitStats().Commits
	ps := []*store.Pending{s.Submit(set("a"))}
	<-holding
	ps = append(ps, s.Submit(set("b")))
	committed(before + 2)
	ps = append(ps, s.Submit(set("c")))
	committed(before + 3)
	for i, p := range ps {
		select {
		case <-p.Done():
			t.Fatalf("write %d acknowledged while the first mark was being recorded", i)
		default:
		}
	}
	release()
	for _, p := range ps {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := slices.Clone(marks)
	mu.Unlock()
	if len(got) != 2 || got[1] != got[0]+2 {
		t.Fatalf("marks recorded %v, want the first commit's and then one for the two after it", got)
	}
	file, err := os.ReadFile(filepath.Join(dir, store.AckFileName))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("commits=%020d", got[1]); !strings.Contains(string(file), want) {
		t.Fatalf("the acknowledged mark is %q, want %s", file, want)
	}
}
