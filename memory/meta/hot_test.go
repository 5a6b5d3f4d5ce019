package meta

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// written collects the keys every commit of st writes from now on.
func written(st *store.Store) func() []string {
	var mu sync.Mutex
	var keys []string
	st.Subscribe(func(e store.Event) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, e.Keys...)
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := keys
		keys = nil
		return out
	}
}

func spaces(keys []string) []string {
	var out []string
	for _, k := range keys {
		if p := k[:2]; !slices.Contains(out, p) && p != "x/" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// A memory's use — Touch, Reinforce, ReinforceDuplicate — writes its hot
// state (o/) and never its metadata record (m/); every reader, the cache
// included, sees the new values with the rest of the record.
func TestHotStateWritesOnlyItsRecord(t *testing.T) {
	st, m := open(t)
	ctx := context.Background()
	a := put(t, st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.2, AccessCount: 4, LastAccessTick: 3,
		Labels: map[string]string{"k": "v"}})
	b := put(t, st, "b, on a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.1}, a)
	keys := written(st)
	if got := metaOf(t, m, a); got.AccessCount != 4 || got.Importance != 0.2 { // cached now
		t.Fatalf("before: %v", got)
	}
	activity := func(string) (int64, bool) { return 7, true }
	if err := st.Update(ctx, Touch([]cid.Cid{a, b}, []string{"s", "s"}, activity)); err != nil {
		t.Fatal(err)
	}
	if sp := spaces(keys()); !slices.Equal(sp, []string{"o/"}) {
		t.Fatalf("Touch wrote %v", sp)
	}
	if err := m.Reinforce([]Used{{CID: b, Score: 1}}).Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.ReinforceDuplicate(ctx, a); err != nil {
		t.Fatal(err)
	}
	if sp := spaces(keys()); !slices.Equal(sp, []string{"o/"}) {
		t.Fatalf("Reinforce wrote %v", sp)
	}
	got := metaOf(t, m, a)
	if got.AccessCount != 6 || got.LastAccessTick != 7 || got.Importance <= 0.2 || got.Labels["k"] != "v" || got.Kind != "note" {
		t.Fatalf("through the cache: %v", got)
	}
	var read *messages.MemoryMeta
	st.View(func(r store.Reader) error {
		var err error
		read, err = Read(r, a)
		return err
	})
	if HotOf(read) != HotOf(got) || read.Labels["k"] != "v" {
		t.Fatalf("read %v, cached %v", read, got)
	}
}

// Update sees the hot state, and a change of it goes to the o/ record
// (which otherwise would hide it); a change of other fields leaves the
// hot state be.
func TestUpdateKeepsTheHotStateInStep(t *testing.T) {
	st, m := open(t)
	ctx := context.Background()
	a := put(t, st, "a", &messages.MemoryMeta{Kind: "note", Sonas: []string{"s"}, Importance: 0.2})
	if err := st.Update(ctx, UpdateHot([]cid.Cid{a}, func(h *Hot, _ cid.Cid) { h.AccessCount = 3 })); err != nil {
		t.Fatal(err)
	}
	keys := written(st)
	var seen Hot
	if err := st.Update(ctx, Update([]cid.Cid{a}, func(meta *messages.MemoryMeta, _ cid.Cid) {
		seen = HotOf(meta)
		meta.Archived = true
	})); err != nil {
		t.Fatal(err)
	}
	if seen.AccessCount != 3 {
		t.Fatalf("Update saw %v", seen)
	}
	if k := keys(); slices.ContainsFunc(k, func(k string) bool { return strings.HasPrefix(k, "o/") }) {
		t.Fatalf("an update of other fields wrote %v", spaces(k))
	}
	if err := st.Update(ctx, Update([]cid.Cid{a}, func(meta *messages.MemoryMeta, _ cid.Cid) {
		meta.Importance = max(meta.Importance, 0.9) // as the evaluation seeds it
	})); err != nil {
		t.Fatal(err)
	}
	if got := metaOf(t, m, a); got.Importance != 0.9 || got.AccessCount != 3 || !got.Archived {
		t.Fatalf("after the updates: %v", got)
	}
}
