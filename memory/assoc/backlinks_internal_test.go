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

// TestHeldTopKeepsWhatApplyingEachKeeps: on random lists and links back —
// memories linking back more than once, with the strengths of others and
// of the list's own links, targets the links back never name — the list
// with only heldTop's links applied (withHeld, which chooses past
// MaxLinks, and heldTop offered every link), and the list every link is
// applied to within its bound (apply), are the list every link is
// applied to, then cut, link for link: target, type, strength and time.
func TestHeldTopKeepsWhatApplyingEachKeeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digests := make([]digest, 80)
	for i := range digests {
		for j := range digests[i] {
			digests[i][j] = byte(rng.IntN(256))
		}
	}
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
