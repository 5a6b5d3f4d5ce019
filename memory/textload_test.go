package memory_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/text"
)

// textLoadChild opens the store while its full-text index loads, holds
// the load in the middle of its catch-up, writes n memories into a new
// sona (a vector snapshot after half of them), says DONE and waits to be
// killed.
func textLoadChild(t *testing.T, n int) {
	held := make(chan struct{})
	var once sync.Once
	s, err := memorytest.OpenWith(memory.Options{Config: memorytest.Config(os.Getenv("MEMORIA_FAULT_DIR")), Progress: func(stage string, done, total uint64) {
		if stage == "text index" && done < total {
			once.Do(func() { close(held) })
			select {} // the load never ends: the kill comes first
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	<-held
	o := memorytest.NewOwner(t, s, "during")
	for i := range n {
		if i == n/2 {
			if err := s.SnapshotVectors(); err != nil {
				t.Fatal(err)
			}
		}
		c := o.Text(fmt.Sprintf("written while the full-text index loads: quokka%d", i))
		fmt.Printf("ACK %s\n", c)
	}
	if !s.Text.Loading() {
		t.Fatal("the full-text index is not loading")
	}
	memorytest.AwaitKill(t)
}

// A kill -9 while the full-text index was still loading (held mid-way
// through rebuilding it from the store), after memories were acknowledged
// into a sona made meanwhile and a vector snapshot was written among
// them: the restart finds every memory, old and new, by full text and
// in the vector index.
func TestKillNineWhileTheTextIndexLoads(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		textLoadChild(t, memorytest.ChildN())
		return
	}
	dir := t.TempDir()
	s := memorytest.Open(t, memorytest.Config(dir), nil)
	o := memorytest.NewOwner(t, s, "before")
	var before []cid.Cid
	for i := range 600 { // more than a batch of the catch-up (512)
		before = append(before, o.Text(fmt.Sprintf("written before the restart: walrus%d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Without its files the index is rebuilt from the store at the next
	// open: a load with something to hold.
	if err := os.RemoveAll(filepath.Join(dir, "text")); err != nil {
		t.Fatal(err)
	}
	acked := killAfterWrites(t, t.Name(), dir, 100)

	s, logs := memorytest.OpenLogged(t, dir)
	defer s.Close()
	memorytest.MustLog(t, logs, "vector index: snapshot loaded", "added_since=50")
	ctx := context.Background()
	found := func(sona string, c cid.Cid) {
		t.Helper()
		if _, ok := s.Index().ID(c.KeyString()); !ok {
			t.Fatalf("%s is not in the vector index", c)
		}
		m, _, err := s.Memories.Get(c)
		if err != nil {
			t.Fatal(err)
		}
		word := m.Text()[strings.LastIndexByte(m.Text(), ' ')+1:]
		hits, err := s.Text.Search(ctx, sona, word, text.SearchOptions{K: 5, Sonas: []string{sona}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(hits, func(h text.Hit) bool { return h.ID == c.String() }) {
			t.Fatalf("%q does not find %s: %v", word, c, hits)
		}
	}
	during, err := s.Sonas.Resolve("during")
	if err != nil {
		t.Fatal(err)
	}
	for a := range acked {
		c, _ := cid.Decode(a)
		found(during.Uuid, c)
	}
	for _, c := range before {
		found(o.Sona, c)
	}
}
