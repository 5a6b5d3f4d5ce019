package chain_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

func TestDedupOnInsert(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "notes")
	ctx := context.Background()
	orig := o.Text("My sister Maya lives in Lisbon near the river")
	prep := func(content string, ts *int64) (*model.Prepared, *chain.Duplicate) {
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}, Timestamp: ts}
		p, dup, err := s.Chains.PrepareInsert(ctx, o.Sona, m, nil, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p, dup
	}
	// Bootstrap regime (a sona under 10 memories): 0.60 + log(3)·0.10.
	_, dup := prep("my sister Maya lives in Lisbon, near the river!", nil)
	if dup == nil || dup.Existing != orig || !dup.Threshold.Bootstrap || math.Abs(dup.Threshold.Value-(0.6+math.Log(3)*0.1)) > 1e-9 {
		t.Fatalf("near-duplicate not caught: %+v", dup)
	}
	if _, dup := prep("The train to Porto takes three hours", nil); dup != nil {
		t.Fatalf("distinct memory deduplicated against %s (%.3f ≥ %.3f)", dup.Existing, dup.Similarity, dup.Threshold.Value)
	}
	// A timestamped memory records an event: never a duplicate of another time.
	if _, dup := prep("my sister Maya lives in Lisbon, near the river!", proto.Int64(100)); dup != nil {
		t.Fatal("an event deduplicated against a timeless memory")
	}
	// Reinforcing the duplicate raises its importance and access.
	before, _ := s.Memories.Meta(orig)
	if err := s.Memories.ReinforceDuplicate(ctx, orig); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Memories.Meta(orig)
	if after.Importance <= before.Importance || after.AccessCount != before.AccessCount+1 {
		t.Fatalf("not reinforced: %v → %v", before, after)
	}
	// Live regime: with enough memories the sona's own distribution of
	// nearest-neighbour similarities sets the threshold.
	for i := 0; i < 12; i++ {
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("the parcel for order %d arrives at the depot by the river on day %s", i, strings.Repeat("x", i+1))}}}
		p, _, err := s.Chains.PrepareInsert(ctx, o.Sona, m, nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.AddPrepared(p)
	}
	stats, n, err := s.Chains.SimStats(o.Sona)
	if err != nil || n < 10 || stats.N < 10 {
		t.Fatalf("stats %+v over %d memories: %v", stats, n, err)
	}
	_, dup = prep("the parcel for order 3 arrives at the depot by the river on day xxxx!", nil)
	if dup == nil || dup.Threshold.Bootstrap {
		t.Fatalf("live regime: %+v (stats %+v)", dup, stats)
	}
	want := stats.Mean + math.Log(3)*stats.Std()
	if math.Abs(dup.Threshold.Value-want) > 1e-9 {
		t.Fatalf("threshold %v, want %v", dup.Threshold.Value, want)
	}
}

// A sona of unrelated memories has a low, narrow distribution of
// nearest-neighbour similarities; its live dedup threshold would make a
// new memory's nearest, however unlike, a duplicate. The bootstrap's
// threshold is the floor.
func TestDedupThresholdFloor(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "notes")
	ctx := context.Background()
	words := strings.Fields("apple river stone cloud piano garden winter lamp harbor violin desert candle " +
		"meadow engine copper lantern orchard glacier saddle thunder basket marble falcon quarry velvet " +
		"cactus ribbon tunnel walnut beacon")
	for i := range 30 { // four words each, few shared: far apart
		text := strings.Join([]string{words[i%len(words)], words[(i*7+3)%len(words)], words[(i*11+5)%len(words)], words[(i*13+9)%len(words)]}, " ")
		p, _, err := s.Chains.PrepareInsert(ctx, o.Sona, &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, nil, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.AddPrepared(p) // with its neighbours: the sona's distribution learns
	}
	stats, _, err := s.Chains.SimStats(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	live := assoc.EmergentThreshold(s.Config().Threshold, s.Config().Threshold.DedupBeta, stats, 30).Value
	boot := assoc.EmergentThreshold(s.Config().Threshold, s.Config().Threshold.DedupBeta, assoc.SimStats{}, 0).Value
	if live >= boot {
		t.Fatalf("the sona's live threshold %.3f is not below the bootstrap's %.3f: no floor to test", live, boot)
	}
	// A new memory sharing words with one stored, its nearest between the
	// live threshold and the bootstrap's.
	tried := 0
	for i := range 30 {
		for _, w := range words {
			text := strings.Join([]string{words[i%len(words)], words[(i*7+3)%len(words)], words[(i*11+5)%len(words)], w}, " ")
			p, dup, err := s.Chains.PrepareInsert(ctx, o.Sona, &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, nil, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Neighbors) == 0 || p.Neighbors[0].Sim < live || p.Neighbors[0].Sim >= boot {
				continue
			}
			tried++
			if dup != nil {
				t.Fatalf("%q deduplicated against %s at %.3f (threshold %+v; live %.3f)", text, dup.Existing, dup.Similarity, dup.Threshold, live)
			}
		}
	}
	if tried == 0 {
		t.Fatalf("no new memory with its nearest between %.3f and %.3f", live, boot)
	}
}

// A new memory's neighbours are its sona's nearest, however many closer
// memories other sonas hold: exactly among the sona's own memories when it
// is small; when it is larger than recall.exact_scan_max and the graph's
// nearest are all another sona's (as here, 40 of them against its 2),
// exactly after all — it was once nothing at all.
func TestNeighboursAreTheSonasNearest(t *testing.T) {
	for _, scanMax := range []int{20_000, 0} {
		t.Run(fmt.Sprintf("exact_scan_max=%d", scanMax), func(t *testing.T) {
			cfg := memorytest.Config(t.TempDir())
			cfg.Recall.ExactScanMax = scanMax
			s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
			defer s.Close()
			mine, other := memorytest.NewOwner(t, s, "mine"), memorytest.NewOwner(t, s, "other")
			near := mine.Text("apples grow in an orchard")
			mine.Text("the train to lisbon was late again")
			for i := range 40 { // 40 memories of another sona, closer to the query than near
				other.Text(fmt.Sprintf("apples grow in the orchard by the river %d", i))
			}
			vecs, err := s.Embed(context.Background(), "apples grow in the orchard by the river")
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Chains.Neighbors(vecs[0], mine.Sona, 1, cid.Undef)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].CID != near {
				t.Fatalf("neighbours %+v, want %s", got, near)
			}
		})
	}
}

// A new memory's neighbours leave out the archived ones however many of
// them are nearest: the index is asked for a few more than wanted, then
// for more while the archived took their room.
func TestNeighboursPastArchivedOnes(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "notes")
	var archived []cid.Cid
	for i := range 7 { // nearer to the query than the rest
		archived = append(archived, o.Text(fmt.Sprintf("apples grow in the orchard by the river %d", i)))
	}
	near := o.Text("apples grow in an orchard")
	far := o.Text("apples at the market")
	o.Text("the train to lisbon was late again")
	vecs, err := s.Embed(context.Background(), "apples grow in the orchard by the river")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Chains.Neighbors(vecs[0], o.Sona, 2, cid.Undef)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !slices.Contains(archived, got[0].CID) || !slices.Contains(archived, got[1].CID) {
		t.Fatalf("before archiving: neighbours %+v, want two of %v", got, archived)
	}
	if err := s.Store().Update(context.Background(), meta.Update(archived, func(m *messages.MemoryMeta, _ cid.Cid) { m.Archived = true })); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 2, 3} {
		got, err := s.Chains.Neighbors(vecs[0], o.Sona, k, cid.Undef)
		if err != nil {
			t.Fatal(err)
		}
		want := []cid.Cid{near, far} // then the train's
		if len(got) != k {
			t.Fatalf("k %d: %d neighbours, want %d", k, len(got), k)
		}
		for i, n := range got {
			if slices.Contains(archived, n.CID) {
				t.Fatalf("k %d: neighbour %d is archived", k, i)
			}
			if i < len(want) && n.CID != want[i] {
				t.Fatalf("k %d: neighbour %d is %s, want %s", k, i, n.CID, want[i])
			}
		}
	}
}

// Large sonas' neighbours are searched on their packs (index.pack_mb):
// the same neighbours as without them, and the packs' bytes counted; the
// store opened again maps them from its vector snapshot (none in the
// heap); none at pack_mb 0.
func TestLargeSonasNeighboursPacked(t *testing.T) {
	const sonas, each = 5, 140 // past the 128 members a pack needs, one id in five
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
	owners := make([]*memorytest.Owner, sonas)
	for i := range owners {
		owners[i] = memorytest.NewOwner(t, s, fmt.Sprintf("sona %d", i))
	}
	for n := range each {
		for i, o := range owners {
			o.Text(fmt.Sprintf("note %d of sona %d about topic %d and %d", n, i, n%17, (n*i)%29))
		}
	}
	for step, packMB := range []int{256, 256, 0} {
		mapped := step == 1
		if step > 0 {
			s.Close()
			cfg.Index.PackMB = packMB
			logs := &memorytest.LogBuffer{}
			var err error
			if s, err = memorytest.OpenWith(memory.Options{Config: cfg, Logger: logs.Logger()}); err != nil {
				t.Fatal(err)
			}
			if mapped {
				memorytest.MustLog(t, logs, "vector index: snapshot loaded", fmt.Sprintf("packs=%d", sonas))
			}
		}
		vecs, err := s.Embed(context.Background(), "a note about topic 3 and 12")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range owners {
			got, err := s.Chains.Neighbors(vecs[0], o.Sona, 4, cid.Undef)
			if err != nil {
				t.Fatal(err)
			}
			want := s.Index().SearchAmong(vecs[0], vector.Unnamed(s.Sonas.Members(o.Sona, "", false)), 16)
			if len(got) != 4 {
				t.Fatalf("pack_mb %d: %d neighbours, want 4", packMB, len(got))
			}
			for i, n := range got {
				if n.CID.KeyString() != want[i].Key {
					t.Fatalf("pack_mb %d: neighbour %d is %s, not the sona's nearest", packMB, i, n.CID)
				}
			}
		}
		if b := s.Index().PackBytes(); (b > 0) != (packMB > 0 && !mapped) || b > int64(packMB)<<20 {
			t.Fatalf("the packs hold %d bytes of the heap at pack_mb %d (mapped: %v)", b, packMB, mapped)
		}
	}
	s.Close()
}

// Dedup and similar associations work on the sona-scoped neighbours, by
// either way of finding them: a new memory is a duplicate of its sona's
// copy and is linked as similar to its sona's nearest, never to another
// sona's memories, however close (exactly among the sona's own memories;
// through the graph, with another sona's few closer memories filtered
// out).
func TestInsertBesideAnotherSonasCloserMemories(t *testing.T) {
	for _, c := range []struct{ scanMax, others int }{{20_000, 40}, {0, 3}} {
		t.Run(fmt.Sprintf("exact_scan_max=%d", c.scanMax), func(t *testing.T) {
			cfg := memorytest.Config(t.TempDir())
			cfg.Recall.ExactScanMax = c.scanMax
			s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
			defer s.Close()
			mine, other := memorytest.NewOwner(t, s, "mine"), memorytest.NewOwner(t, s, "other")
			ctx := context.Background()
			near := mine.Text("apples grow in an old orchard")
			mine.Text("the train to lisbon was late again")
			theirs := map[cid.Cid]bool{}
			for i := range c.others { // closer to what is inserted than near
				theirs[other.Text(fmt.Sprintf("apples grow in an orchard by the river %d", i))] = true
			}
			insert := func(text string, dedup bool) (*model.Prepared, *chain.Duplicate) {
				p, dup, err := s.Chains.PrepareInsert(ctx, mine.Sona, &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, nil, dedup, nil)
				if err != nil {
					t.Fatal(err)
				}
				return p, dup
			}
			if _, dup := insert("Apples grow in an OLD orchard!", true); dup == nil || dup.Existing != near {
				t.Fatalf("the sona's copy is no duplicate: %+v", dup)
			}
			p, dup := insert("apples grow in an orchard by the river", false)
			if dup != nil || len(p.Neighbors) == 0 || p.Neighbors[0].CID != near {
				t.Fatalf("neighbours %+v (duplicate %+v), want %s first", p.Neighbors, dup, near)
			}
			mine.AddPrepared(p)
			links, err := s.Assoc.Associations(p.CID)
			if err != nil {
				t.Fatal(err)
			}
			similar := false
			for _, l := range links {
				if theirs[l.Target] {
					t.Fatalf("linked to another sona's memory: %+v", l)
				}
				similar = similar || l.Target == near && l.Type == assoc.Similar
			}
			if !similar {
				t.Fatalf("no similar link to %s: %+v", near, links)
			}
		})
	}
}
