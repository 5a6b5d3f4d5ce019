package memory_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/store"
)

// Opened with Prewarm, the self reads the newest memories — as many as
// store.memory_cache — into the memories' and metadata caches before any
// read asks: then reading the newest finds it cached, the oldest beyond
// the bound not; with a bound above the store, every memory is cached.
// Without Prewarm (the tools') nothing is read.
func TestPrewarmFillsTheCachesNewestFirst(t *testing.T) {
	dir := t.TempDir()
	s := memorytest.Open(t, memorytest.Config(dir), nil)
	o := memorytest.NewOwner(t, s, "warm")
	var cids []cid.Cid
	for i := range 300 {
		cids = append(cids, o.Text(fmt.Sprintf("memory %d of the warm sona", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	oldest, newest := cids[0], cids[len(cids)-1]

	open := func(cache int, prewarm bool) (*memory.Self, *memorytest.LogBuffer) {
		t.Helper()
		cfg := memorytest.Config(dir)
		cfg.Store.MemoryCache = cache
		logs := &memorytest.LogBuffer{}
		s, err := memorytest.OpenWith(memory.Options{Config: cfg, Logger: logs.Logger(), Prewarm: prewarm})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		select {
		case <-s.Warmed():
		case <-time.After(time.Minute):
			t.Fatal("the caches were not warmed within a minute")
		}
		return s, logs
	}
	cached := func(s *memory.Self, c cid.Cid) bool {
		t.Helper()
		before := s.CacheStats()
		err := s.Store().View(func(r store.Reader) error {
			if _, err := s.Memories.MetaIn(r, c); err != nil {
				return err
			}
			_, err := s.Memories.MemoryIn(r, c)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		after := s.CacheStats()
		mem := after["memories"].Hits > before["memories"].Hits
		meta := after["metadata"].Hits > before["metadata"].Hits
		if mem != meta {
			t.Fatalf("%s: a hit in one cache, not the other (memories %v, metadata %v)", c, mem, meta)
		}
		return mem
	}

	s, logs := open(100_000, true)
	stats := s.CacheStats()
	if stats["memories"].Entries != len(cids) || stats["metadata"].Entries != len(cids) {
		t.Fatalf("warmed with room for all: %d memories, %d metadata records cached, want %d", stats["memories"].Entries, stats["metadata"].Entries, len(cids))
	}
	if !strings.Contains(logs.String(), "caches warmed") || !cached(s, oldest) || !cached(s, newest) {
		t.Fatalf("warmed with room for all, the oldest and the newest not both cached; log:\n%s", logs)
	}
	s.Close()

	s, logs = open(128, true) // two a shard: the 128 newest
	if !strings.Contains(logs.String(), "memories=128") {
		t.Fatalf("warmed with room for 128, log:\n%s", logs)
	}
	if !cached(s, newest) || cached(s, oldest) {
		t.Fatal("warmed with room for 128: want the newest cached, not the oldest")
	}
	s.Close()

	s, _ = open(100_000, false)
	if n := s.CacheStats()["memories"].Entries; n != 0 {
		t.Fatalf("opened without prewarm, %d memories cached", n)
	}
	s.Close()

	// Closed at once, while it may still warm: Close waits for it.
	cfg := memorytest.Config(dir)
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Prewarm: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Warmed():
	default:
		t.Fatal("Close returned before the warming ended")
	}
}
