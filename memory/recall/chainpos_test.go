package recall

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// The positions follow a sona's members as the registry changes them:
// extended in place on an append, rebuilt for a new slice (a forget), a
// memory appended twice keeping its first place.
func TestChainPositions(t *testing.T) {
	c := newChainPositions()
	members := make([]uint64, 3, 8)
	copy(members, []uint64{7, 3, 9})
	p := c.chain("s", members)
	for vid, want := range map[uint64]int{7: 0, 3: 1, 9: 2} {
		if got, ok := p.position(vid); !ok || got != want {
			t.Errorf("position(%d) = %d, %v; want %d", vid, got, ok, want)
		}
	}
	if _, ok := p.position(4); ok {
		t.Error("4 is no member but has a position")
	}
	members = append(members, 4, 7) // appended in place; 7 again
	if q := c.chain("s", members); q != p {
		t.Fatal("an append rebuilt the positions")
	}
	if got, ok := p.position(4); !ok || got != 3 {
		t.Errorf("position(4) = %d, %v; want 3", got, ok)
	}
	if got, _ := p.position(7); got != 0 {
		t.Errorf("position(7) = %d after it was appended again; want its first, 0", got)
	}
	// An older, shorter view of the same slice uses the same positions.
	if q := c.chain("s", members[:3]); q != p {
		t.Error("a shorter view of the same slice rebuilt the positions")
	}
	// A forget: a new slice without 3.
	forgotten := slices.Clone([]uint64{7, 9, 4})
	q := c.chain("s", forgotten)
	if q == p {
		t.Fatal("a new slice kept the old positions")
	}
	if _, ok := q.position(3); ok {
		t.Error("the forgotten 3 still has a position")
	}
	if got, _ := q.position(4); got != 2 {
		t.Errorf("after the forget position(4) = %d; want 2", got)
	}
	if c.chain("none", nil) != nil {
		t.Error("a sona without members has a chain")
	}
}

// While a sona's ids ascend its positions are found in its members, no
// map kept; an id out of order (a memory of another sona's, a memory
// appended again) turns them into one, every position as before.
func TestChainPositionsOfAscendingIDs(t *testing.T) {
	c := newChainPositions()
	members := make([]uint64, 3, 16)
	copy(members, []uint64{2, 5, 9})
	p := c.chain("s", members)
	check := func(stage string, want map[uint64]int, absent ...uint64) {
		t.Helper()
		for vid, at := range want {
			if got, ok := p.position(vid); !ok || got != at {
				t.Errorf("%s: position(%d) = %d, %v; want %d", stage, vid, got, ok, at)
			}
		}
		for _, vid := range absent {
			if got, ok := p.position(vid); ok {
				t.Errorf("%s: %d is no member but has position %d", stage, vid, got)
			}
		}
	}
	check("ascending", map[uint64]int{2: 0, 5: 1, 9: 2}, 1, 3, 10)
	members = append(members, 11, 12)
	if q := c.chain("s", members); q != p {
		t.Fatal("an append rebuilt the positions")
	}
	check("appended", map[uint64]int{2: 0, 9: 2, 11: 3, 12: 4}, 10, 13)
	if p.pos != nil {
		t.Fatalf("a map of %d positions kept for ascending ids", len(p.pos))
	}
	// A shorter view does not shrink what is covered.
	c.chain("s", members[:2])
	check("a shorter view", map[uint64]int{12: 4})
	members = append(members, 7, 5) // out of order, then 5 again
	c.chain("s", members)
	if p.pos == nil {
		t.Fatal("ids out of order searched as if they ascended")
	}
	check("out of order", map[uint64]int{2: 0, 5: 1, 9: 2, 11: 3, 12: 4, 7: 5}, 3, 13)
}

// A body kept for a vector id (its time, whether it asks, its speaker) is
// there for the next recall; speakers are kept once, up to maxSpeakers.
func TestBodyFacts(t *testing.T) {
	f := newBodyFacts()
	if _, ok := f.body(1); ok {
		t.Error("a body is kept before any was read")
	}
	f.set(1, body{time: 1234, question: true, speaker: []string{"caroline"}})
	f.set(2, body{time: 99, speaker: []string{"caroline"}})
	f.set(5, body{time: 0}) // a time of 0 is a time
	if tm, ok := f.time(1); !ok || tm != 1234 {
		t.Errorf("time(1) = %d, %v; want 1234", tm, ok)
	}
	if _, ok := f.time(3); ok {
		t.Error("time(3) was never set but is kept")
	}
	if _, ok := f.time(5); !ok {
		t.Error("time(5), 0, is not kept")
	}
	b1, ok1 := f.body(1)
	b2, ok2 := f.body(2)
	if !ok1 || b1.time != 1234 || !b1.question || !slices.Equal(b1.speaker, []string{"caroline"}) {
		t.Errorf("body(1) = %+v, %v; want time 1234, a question, caroline", b1, ok1)
	}
	if !ok2 || b2.time != 99 || b2.question || !slices.Equal(b2.speaker, []string{"caroline"}) {
		t.Errorf("body(2) = %+v, %v; want time 99, no question, caroline", b2, ok2)
	}
	if len(f.speakers) != 2 {
		t.Errorf("%d speakers kept for one, want it once (and none)", len(f.speakers)-1)
	}
	if _, ok := f.body(3); ok {
		t.Error("body(3) was never read but is kept")
	}
	if f.known != 3 {
		t.Errorf("%d bodies counted, want 3", f.known)
	}
	// Past maxSpeakers speakers a new one's body is not kept; a known
	// one's still is.
	for i := range maxSpeakers {
		f.set(0, body{time: 1, speaker: []string{"s", strconv.Itoa(i)}})
	}
	if len(f.speakers) != maxSpeakers+1 {
		t.Fatalf("%d speakers kept, want %d", len(f.speakers)-1, maxSpeakers)
	}
	f.set(0, body{time: 5, speaker: []string{"one", "more"}})
	if b, ok := f.body(0); ok && b.time == 5 {
		t.Errorf("a speaker past %d kept: %+v", maxSpeakers, b)
	}
	f.set(0, body{time: 6, speaker: []string{"caroline"}})
	if b, ok := f.body(0); !ok || b.time != 6 || !slices.Equal(b.speaker, []string{"caroline"}) {
		t.Errorf("a known speaker's body not kept past the bound: %+v, %v", b, ok)
	}
}

// sessionSums: each memory's session is the memories within the gap of it
// in time (not chained on: a memory 2 gaps away is another session); its
// sum leaves itself out.
func TestSessionSums(t *testing.T) {
	ts := []int64{0, 10, 20, 100, 105, 1000}
	rel := []float64{1, 0.5, 0.25, 0.8, 0.1, 1}
	got := sessionSums(ts, rel, 10)
	want := []float64{0.5, 1.25, 0.5, 0.1, 0.8, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("sessionSums[%d] = %v, want %v (all %v)", i, got[i], want[i], got)
		}
	}
}
