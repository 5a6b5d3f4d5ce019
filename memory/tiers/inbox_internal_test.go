package tiers

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// withOneByOne is a cached inbox with each entry of es applied in turn,
// each to a copy: what a commit's patch did before its entries were
// applied at once.
func withOneByOne(in *cachedInbox, es []inboxEntry) *cachedInbox {
	for _, e := range es {
		i, found := slices.BinarySearch(in.seqs, e.seq)
		out := &cachedInbox{seqs: slices.Clone(in.seqs), raws: slices.Clone(in.raws)}
		switch {
		case e.raw == nil && found:
			out.seqs, out.raws = slices.Delete(out.seqs, i, i+1), slices.Delete(out.raws, i, i+1)
		case e.raw == nil:
		case found:
			out.raws[i] = e.raw
		default:
			out.seqs, out.raws = slices.Insert(out.seqs, i, e.seq), slices.Insert(out.raws, i, e.raw)
		}
		in = out
	}
	return in
}

// A commit's writes and deletions of an inbox's entries, applied at once,
// leave the cached inbox as applying them one by one does — entries new
// before, between and after those held, rewritten, deleted, deleted when
// absent, written then deleted and deleted then written within the
// commit — and the inbox patched is left as it was.
func TestInboxPatchedAtOnceAsOneByOne(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for round := range 3000 {
		in := &cachedInbox{}
		for seq := uint64(0); seq < 40; seq++ {
			if rng.Intn(3) == 0 {
				in.seqs = append(in.seqs, seq)
				in.raws = append(in.raws, []byte(fmt.Sprintf("held %d", seq)))
			}
		}
		before := &cachedInbox{seqs: slices.Clone(in.seqs), raws: slices.Clone(in.raws)}
		var es []inboxEntry
		for range rng.Intn(12) {
			e := inboxEntry{seq: uint64(rng.Intn(45))}
			if rng.Intn(2) == 0 {
				e.raw = []byte(fmt.Sprintf("written %d in round %d", e.seq, round))
			}
			es = append(es, e)
		}
		got, want := in.with(es), withOneByOne(in, es)
		if !slices.Equal(got.seqs, want.seqs) || !slices.EqualFunc(got.raws, want.raws, bytes.Equal) {
			t.Fatalf("round %d: %v on %v gave %v %q, want %v %q", round, es, in.seqs, got.seqs, got.raws, want.seqs, want.raws)
		}
		if !slices.Equal(in.seqs, before.seqs) || !slices.EqualFunc(in.raws, before.raws, bytes.Equal) {
			t.Fatalf("round %d: the inbox patched changed", round)
		}
	}
}
