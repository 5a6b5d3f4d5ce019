package recall

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"
	"weak"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
)

// wordSets gives each memory its own word set, kept (the same set the
// next time, not made again) until another memory's CID takes its slot —
// with two slots, forty memories asked in turn from four goroutines each
// get theirs; and none kept (nil) makes it every time.
func TestWordSetsKeepEachMemorysOwn(t *testing.T) {
	type memo struct {
		c cid.Cid
		m *model.Memory
	}
	var ms []memo
	for i := range 40 {
		text := fmt.Sprintf("Turn %d: the aurora was green, said speaker %d", i, i%3)
		mh, err := multihash.Sum([]byte(text), multihash.SHA2_256, -1)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, memo{cid.NewCidV1(cid.DagCBOR, mh), &model.Memory{Data: model.Data{Other: &model.OtherData{Content: text}}}})
	}
	var nilSets *wordSets
	if got, want := nilSets.of(ms[0].c, ms[0].m), wordSet(model.Said(ms[0].m)); !slices.Equal(got, want) {
		t.Fatalf("none kept: %v, want %v", got, want)
	}
	w := newWordSets(wordSetSlots)
	first := w.of(ms[1].c, ms[1].m)
	if again := w.of(ms[1].c, ms[1].m); &again[0] != &first[0] {
		t.Error("a memory's word set made again while kept")
	}
	w = newWordSets(2)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 50 {
				for i := range ms {
					x := ms[(i+g*7+round)%len(ms)]
					if got, want := w.of(x.c, x.m), wordSet(model.Said(x.m)); !slices.Equal(got, want) {
						t.Errorf("%s: %v, want %v", x.c, got, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// The word sets hold no CID: a CID shares the bytes it was read from (a
// memory's block, a block of the affinity walk's keys), and a slot that
// kept it kept them all. A CID the word sets were asked with is freed once
// no one else holds it.
func TestWordSetsHoldNoCID(t *testing.T) {
	w := newWordSets(wordSetSlots)
	mh, err := multihash.Sum([]byte("the aurora was green"), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	key := string(cid.NewCidV1(cid.DagCBOR, mh).Bytes()) // bytes of its own
	c, err := base.CID(key)
	if err != nil {
		t.Fatal(err)
	}
	held := weak.Make(unsafe.StringData(key))
	w.of(c, &model.Memory{Data: model.Data{Other: &model.OtherData{Content: "the aurora was green"}}})
	c, key = cid.Undef, "" // let go of them
	runtime.GC()
	if held.Value() != nil {
		t.Fatal("the word sets hold the CID they were asked with")
	}
	runtime.KeepAlive(w)
}

// A memory's word set is its Said text's, a self memory's parts read one
// by one (a newline joins them in the text, and ends a word as a part's
// end does): with words cut at the parts' ends, repeated across them,
// empty parts and none; allocating only the set.
func TestMemoryWordsAreItsSaidTexts(t *testing.T) {
	parts := []string{"", "Tomatoes", "in the raised bed,", "bed", "naïve CAFÉ", "東京 tokyo", "ends mid", "word"}
	name := "Ana"
	var ms []*model.Memory
	for i := range parts {
		for j := range parts {
			ms = append(ms, &model.Memory{Data: model.Data{Self: &model.SelfData{Parts: []model.Part{{Content: parts[i]}, {Content: parts[j]}, {Content: parts[i] + parts[j]}}}}})
		}
		ms = append(ms, &model.Memory{Data: model.Data{Other: &model.OtherData{Name: &name, Content: parts[i]}}},
			&model.Memory{Data: model.Data{Text: &model.TextData{Content: parts[i]}}})
	}
	ms = append(ms, &model.Memory{Data: model.Data{Self: &model.SelfData{}}})
	for _, m := range ms {
		if got, want := memoryWords(m), wordSet(model.Said(m)); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", model.Said(m), got, want)
		}
	}
	m := &model.Memory{Data: model.Data{Self: &model.SelfData{Parts: []model.Part{{Content: "which bed did"}, {Content: "I plant the tomatoes in"}}}}}
	text := model.Said(m)
	if n, set := testing.AllocsPerRun(100, func() { memoryWords(m) }), testing.AllocsPerRun(100, func() { wordSet(text) }); n != set {
		t.Errorf("%v allocations a self memory's word set, want %v (its set's, as of its text made already)", n, set)
	}
}
