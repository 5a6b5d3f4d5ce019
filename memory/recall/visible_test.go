package recall_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// countingMemories counts the metadata reads recall asks for, and the
// bodies it reads by CID.
type countingMemories struct {
	recall.Memories
	metas atomic.Int64
	mu    sync.Mutex
	reads map[cid.Cid]int
}

func (c *countingMemories) MetaIn(r store.Reader, id cid.Cid) (*messages.MemoryMeta, error) {
	c.metas.Add(1)
	return c.Memories.MetaIn(r, id)
}

func (c *countingMemories) MemoryIn(r store.Reader, id cid.Cid) (*model.Memory, error) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
	return c.Memories.MemoryIn(r, id)
}

// countingRecaller is a recaller of its own over s, counting its reads.
func countingRecaller(s *memory.Self, cfg config.Config, clk clock.Clock) (*recall.Recaller, *countingMemories) {
	mems := &countingMemories{Memories: s.Memories, reads: map[cid.Cid]int{}}
	cfg.Recall.QueryLogKeep = 0 // the self's recaller keeps the query log: no count of its own to close
	return recall.New(s.Store(), recall.Env{
		Sonas: s.Sonas, Memories: mems, Text: s.Text, Profiles: s.Evals, Vectors: s.Index(),
		BackboneSona: s.Backbone.Sona, Embed: s.Embed, Count: func() int64 { _, n := s.Counts(); return n },
	}, recall.Options{Config: cfg, Clock: clk}), mems
}

// countedRecall is rc's recall of q: what each memory recalled was scored
// by, and how many metadata reads it asked for.
func countedRecall(t *testing.T, rc *recall.Recaller, mems *countingMemories, q recall.Query) (map[cid.Cid]recall.Explain, int64) {
	t.Helper()
	before := mems.metas.Load()
	rs, _, err := rc.Recall(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return evidenceOf(rs), mems.metas.Load() - before
}

// The context evidence reads a neighbour's metadata (whether recall may
// see it) once: a later recall knows it plain without a read, and scores
// alike — until its metadata is written again (here: archived), after
// which it is read again and lends nothing.
func TestContextKnowsPlainNeighboursWithoutReading(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	// (Made before the memories are written: it subscribes to the commits.)
	rc, mems := countingRecaller(s, cfg, clk)
	o, m := contextSona(t, s, clk)

	// a1 (aurora) and a2 (green) are next to each other in their session:
	// each lends the other context.
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Context: 1}, Fusion: "weighted"}
	q := recall.Query{Sona: o.Sona, Text: "aurora green", Paths: &paths, Peek: true, Expand: new(0)}
	ask := func() (map[cid.Cid]recall.Explain, int64) { return countedRecall(t, rc, mems, q) }
	cold, coldReads := ask()
	if cold[m["a2"]].Evidence.Context <= 0 || cold[m["a1"]].Evidence.Context <= 0 {
		t.Fatalf("a1 and a2 lend each other no context: %+v", cold)
	}
	warm, warmReads := ask()
	if warmReads >= coldReads {
		t.Errorf("the warm recall read %d metadata, the cold one %d: the neighbours were read again", warmReads, coldReads)
	}
	for c, e := range cold {
		if warm[c].Evidence != e.Evidence || warm[c].Fused != e.Fused {
			t.Errorf("%s scores otherwise warm: %+v, cold %+v", c, warm[c], e)
		}
	}

	if err := s.Store().Update(context.Background(), meta.Update([]cid.Cid{m["a1"]}, func(mm *messages.MemoryMeta, _ cid.Cid) { mm.Archived = true })); err != nil {
		t.Fatal(err)
	}
	after, _ := ask()
	if _, ok := after[m["a1"]]; ok {
		t.Fatalf("archived a1 recalled")
	}
	if e, ok := after[m["a2"]]; !ok || e.Evidence.Context != 0 {
		t.Errorf("a2 after a1 was archived: %+v (recalled %v), want no context", e, ok)
	}
}

// A recall that excludes memories (every chat's excludes its input) knows
// its plain neighbours as one that excludes none does, reading no more
// metadata and scoring alike — but an excluded neighbour is read, and
// lends no context.
func TestContextWithAnExclusionKnowsPlainNeighbours(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	rc, mems := countingRecaller(s, cfg, clk)
	o, m := contextSona(t, s, clk)
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Context: 1}, Fusion: "weighted"}
	ask := func(exclude ...cid.Cid) (map[cid.Cid]recall.Explain, int64) {
		t.Helper()
		return countedRecall(t, rc, mems, recall.Query{Sona: o.Sona, Text: "aurora green", Paths: &paths, Peek: true, Expand: new(0), Exclude: exclude})
	}
	ask() // cold: the neighbours read once
	warm, warmReads := ask()
	// a5 (another session, none of the query's words) is no candidate;
	// nor is a memory never stored (the index holds no vector of it, as
	// of a chat's input whose append is in flight).
	unknown, err := cid.Decode("bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy")
	if err != nil {
		t.Fatal(err)
	}
	excluding, excludingReads := ask(m["a5"], unknown)
	if excludingReads > warmReads {
		t.Errorf("excluding a5 the recall read %d metadata, without %d: the known neighbours were read again", excludingReads, warmReads)
	}
	if len(excluding) != len(warm) {
		t.Errorf("excluding a5: %d recalled, without %d", len(excluding), len(warm))
	}
	for c, e := range warm {
		if excluding[c].Evidence != e.Evidence || excluding[c].Fused != e.Fused {
			t.Errorf("%s scores otherwise excluding a5: %+v, without %+v", c, excluding[c], e)
		}
	}
	// With the dense path a neighbour that is no candidate has a relevance
	// of its own (its cosine), so an excluded one would lend context if
	// it were taken as visible: a2's context excluding a1 is what it is
	// once a1 is archived (hidden by its metadata), not what it is with a1
	// there.
	paths.Weights.Dense = 1
	withA1, _ := ask()
	noA1, _ := ask(m["a1"])
	if _, ok := noA1[m["a1"]]; ok {
		t.Fatal("excluded a1 recalled")
	}
	if err := s.Store().Update(context.Background(), meta.Update([]cid.Cid{m["a1"]}, func(mm *messages.MemoryMeta, _ cid.Cid) { mm.Archived = true })); err != nil {
		t.Fatal(err)
	}
	archived, _ := ask()
	got, want := noA1[m["a2"]].Evidence.Context, archived[m["a2"]].Evidence.Context
	if got != want || want >= withA1[m["a2"]].Evidence.Context {
		t.Errorf("a2's context: %v excluding a1, %v with a1 archived, %v with a1 there", got, want, withA1[m["a2"]].Evidence.Context)
	}
}

// What the open's scan of the metadata tells (KnowPlain) spares a
// restarted server's first recalls the neighbours' reads, and changes no
// score.
func TestKnowPlainSparesTheFirstRecall(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o, _ := contextSona(t, s, clk)
	cold, coldMems := countingRecaller(s, cfg, clk)
	known, knownMems := countingRecaller(s, cfg, clk)
	gen := known.PlainGeneration()
	if err := s.Store().View(func(r store.Reader) error {
		return store.Scan(r, meta.Prefix, func(k, v []byte) error {
			c, err := cid.Cast(k[len(meta.Prefix):])
			if err != nil {
				return err
			}
			known.KnowPlain(c, v, gen)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	// Their times are read (kept by each recaller's chain positions):
	// once warm, neither reads them again.
	paths := recall.Paths{Weights: config.PathWeights{BM25: 1, Context: 1}, Fusion: "weighted"}
	q := recall.Query{Sona: o.Sona, Text: "aurora green", Paths: &paths, Peek: true, Expand: new(0)}
	var want map[cid.Cid]recall.Explain
	for i, rc := range []*recall.Recaller{cold, known} {
		rs, _, err := rc.Recall(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		got := evidenceOf(rs)
		if i == 0 {
			want = got
			continue
		}
		for c, e := range want {
			if got[c].Evidence != e.Evidence || got[c].Fused != e.Fused {
				t.Errorf("%s scores otherwise: %+v, want %+v", c, got[c], e)
			}
		}
	}
	if k, c := knownMems.metas.Load(), coldMems.metas.Load(); k >= c {
		t.Errorf("with the scan's knowledge the recall read %d metadata, without %d", k, c)
	}
}
