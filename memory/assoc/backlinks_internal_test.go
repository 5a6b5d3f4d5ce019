package assoc

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// applyEach is withHeld as it was: every link back applied to the list in
// the order it came (Put's rule: a link to a memory the list links to
// goes in only stronger, in the place of that one), the list cut once
// they all are — the reference heldTop's selection, and apply's bound,
// must give the same list as.
func applyEach(es []Entry, held []backLink) []Entry {
	ts := builtTargets{keep: true}
	for _, l := range held {
		i := slices.IndexFunc(es, func(e Entry) bool { d, ok := digestOf(e.Target); return ok && d == l.from })
		if i >= 0 {
			if es[i].Strength >= l.strength {
				continue
			}
			es = slices.Delete(es, i, i+1)
		}
		e := Entry{Target: ts.cid(l.from[:]), Type: typeCodes[l.typ], Strength: l.strength, UpdatedAt: l.at}
		j, _ := slices.BinarySearchFunc(es, e, strongerFirst)
		es = slices.Insert(es, j, e)
	}
	return es[:min(len(es), MaxLinks)]
}

// randomDigests are n random digests.
func randomDigests(rng *rand.Rand, n int) []digest {
	digests := make([]digest, n)
	for i := range digests {
		for j := range digests[i] {
			digests[i][j] = byte(rng.IntN(256))
		}
	}
	return digests
}

// TestHeldTopKeepsWhatApplyingEachKeeps: on random lists and links back —
// memories linking back more than once, with the strengths of others and
// of the list's own links, targets the links back never name — the list
// with only heldTop's links applied (withHeld, which chooses past
// MaxLinks, and heldTop offered every link), and the list every link is
// applied to within its bound (apply), are the list every link is
// applied to, then cut, link for link: target, type, strength and time.
func TestHeldTopKeepsWhatApplyingEachKeeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digests := randomDigests(rng, 80)
	strength := func() float64 { return float64(1+rng.IntN(8)) / 8 } // ties are common
	typ := func() byte { return byte(2 + rng.IntN(5)) }
	for trial := range 3000 {
		ts := builtTargets{keep: true}
		var es []Entry
		for _, d := range digests[:rng.IntN(len(digests))] {
			if len(es) == MaxLinks+8 || rng.IntN(3) > 0 { // past the bound: as an older build may have written
				continue
			}
			target := ts.cid(d[:])
			if rng.IntN(8) == 0 { // not of the memories' form: never a link back's
				target = append([]byte{0x01, 0x55}, target[2:]...)
			}
			es = append(es, Entry{Target: target, Type: typeCodes[typ()], Strength: strength(), UpdatedAt: rng.Int64N(100)})
		}
		slices.SortFunc(es, strongerFirst)
		held := make([]backLink, rng.IntN(4*MaxLinks))
		for i := range held {
			held[i] = backLink{from: digests[rng.IntN(len(digests))], strength: strength(), at: rng.Int64N(100), src: uint64(i), typ: typ()}
		}

		want := applyEach(slices.Clone(es), held)
		got := withHeld(slices.Clone(es), held, &builtTargets{keep: true})
		top := heldTop{}
		for _, l := range held {
			top = top.offer(l)
		}
		if len(top.links) > MaxLinks {
			t.Fatalf("trial %d: heldTop kept %d links back, more than %d", trial, len(top.links), MaxLinks)
		}
		offered := applyEach(slices.Clone(es), top.links)
		bounded := applyEach(slices.Clone(es), nil) // cut to the bound
		for _, l := range held {
			bounded = l.apply(bounded, &builtTargets{keep: true})
		}
		for name, list := range map[string][]Entry{"withHeld": got, "heldTop offered each": offered, "apply each": bounded} {
			if !slices.EqualFunc(list, want, func(a, b Entry) bool {
				return bytes.Equal(a.Target, b.Target) && a.Type == b.Type && a.Strength == b.Strength && a.UpdatedAt == b.UpdatedAt
			}) {
				t.Fatalf("trial %d (%d links, %d links back): %s gives\n%v\nwant\n%v", trial, len(es), len(held), name, list, want)
			}
		}
	}
}

// TestCollectKeepsWhatWithHeldApplies: what collect gives a view — links
// back held, being flushed and flushed but not yet seen, some made after
// the view, more than MaxLinks and fewer — applied to a list (withHeld) is
// the list all the links back the view sees give it; collect gives at most
// MaxLinks, and allocates nothing in room for them.
func TestCollectKeepsWhatWithHeldApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	digests := randomDigests(rng, 60)
	var to digest
	key := append(slices.Clip(KeyAssoc), to.cid()...)
	links := func() *backList {
		l := &backList{links: make([]backLink, rng.IntN(2*MaxLinks))}
		for i := range l.links {
			l.links[i] = backLink{from: digests[rng.IntN(len(digests))], strength: float64(1+rng.IntN(8)) / 8, at: rng.Int64N(100),
				src: uint64(i), told: uint64(rng.IntN(12)), typ: byte(2 + rng.IntN(5))}
		}
		return l
	}
	for trial := range 2000 {
		b := &backBuffer{held: backLists{to: links()}, flushing: backLists{to: links()}}
		for range rng.IntN(3) {
			b.written = append(b.written, heldBatch{lists: backLists{to: links(), digests[0]: links()}, told: uint64(rng.IntN(12))})
		}
		told := uint64(rng.IntN(12))
		var seen []backLists
		for _, h := range b.written {
			if told < h.told {
				seen = append(seen, h.lists)
			}
		}
		var all []backLink // every link back the view sees, in order
		for _, ls := range append(seen, b.flushing, b.held) {
			for _, l := range ls[to].links {
				if l.told <= told {
					all = append(all, l)
				}
			}
		}
		var es []Entry
		ts := builtTargets{keep: true}
		for _, d := range digests[:rng.IntN(MaxLinks)] {
			es = append(es, Entry{Target: ts.cid(d[:]), Type: typeCodes[2], Strength: float64(1+rng.IntN(8)) / 8, UpdatedAt: rng.Int64N(100)})
		}
		slices.SortFunc(es, strongerFirst)

		var room [MaxLinks]backLink
		got := b.collect(key, told, room[:0])
		if len(got) > MaxLinks || (len(all) <= MaxLinks && !slices.Equal(got, all)) {
			t.Fatalf("trial %d: %d links back collected of %d seen: %v", trial, len(got), len(all), got)
		}
		want := withHeld(slices.Clone(es), all, &builtTargets{keep: true})
		if list := withHeld(slices.Clone(es), got, &builtTargets{keep: true}); !slices.EqualFunc(list, want, func(a, b Entry) bool {
			return bytes.Equal(a.Target, b.Target) && a.Type == b.Type && a.Strength == b.Strength && a.UpdatedAt == b.UpdatedAt
		}) {
			t.Fatalf("trial %d (%d links back seen): the list\n%v\nwant\n%v", trial, len(all), list, want)
		}
		if n := testing.AllocsPerRun(5, func() { b.collect(key, told, room[:0]) }); n != 0 {
			t.Fatalf("trial %d: %v allocations collecting %d links back", trial, n, len(all))
		}
	}
}
