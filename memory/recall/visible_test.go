package recall_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
	"google.golang.org/protobuf/proto"
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
// It subscribes to the store's commits, which must not run meanwhile: the
// links back s holds since its appends — whose timer a fake clock moved
// far fires — are written first.
func countingRecaller(t *testing.T, s *memory.Self, cfg config.Config, clk clock.Clock) (*recall.Recaller, *countingMemories) {
	t.Helper()
	if err := s.Assoc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
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
	rc, mems := countingRecaller(t, s, cfg, clk)
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
	// (What it returns has its record read: scoreFact.)
	if warmReads > int64(len(warm)) || warmReads > coldReads {
		t.Errorf("the warm recall read %d metadata returning %d, the cold one %d: the neighbours were read again", warmReads, len(warm), coldReads)
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
	rc, mems := countingRecaller(t, s, cfg, clk)
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
	// Two candidates a path: a neighbour that is none lends context with
	// its own cosine, and is read unless known (a candidate's read tells
	// recall what it is as a neighbour too).
	two := cfg
	two.Recall.Candidates = 2
	cold, coldMems := countingRecaller(t, s, two, clk)
	known, knownMems := countingRecaller(t, s, two, clk)
	knowEveryRecord(t, s, known)
	// Their times are read (kept by each recaller's chain positions):
	// once warm, neither reads them again.
	paths := recall.Paths{Weights: config.PathWeights{Dense: 1, BM25: 1, Context: 1}, Fusion: "weighted"}
	q := recall.Query{Sona: o.Sona, Text: "green", Paths: &paths, Peek: true, Expand: new(0)}
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

// A candidate recall has read before is scored from what was kept of its
// metadata (the score facts), and only the records of what it returns
// are read — its scores, and what it returns, are those of a recaller
// that reads every record: warm, after a memory's hot state was written
// (its importance), and while touches wait in the buffer (its access
// tick), which no commit tells.
func TestRecallScoresKnownCandidatesWithoutReading(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	rc, mems := countingRecaller(t, s, cfg, clk)
	o, m := contextSona(t, s, clk)
	q := recall.Query{Sona: o.Sona, Text: "aurora green tyres cello", K: 2, Peek: true, Expand: new(0)}
	all := q
	all.K = 6 // every memory returned: every candidate's score is seen
	ask := func(rc *recall.Recaller, q recall.Query) []*recall.Recalled {
		t.Helper()
		rs, _, err := rc.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	// same compares rc's recall of q with a new recaller's, which knows
	// nothing and reads every record.
	same := func(when string, q recall.Query) []*recall.Recalled {
		t.Helper()
		fresh, _ := countingRecaller(t, s, cfg, clk)
		got := ask(rc, q)
		sameAsReadingEvery(t, when, got, ask(fresh, q))
		return got
	}
	cold := mems.metas.Load()
	rs := same("cold", all)
	if len(rs) < 4 {
		t.Fatalf("%d recalled, want every memory", len(rs))
	}
	coldReads := mems.metas.Load() - cold
	// warm recalls q, which returns fewer than every candidate, and wants
	// only the records of what it returns read.
	warm := func(when string) {
		t.Helper()
		before := mems.metas.Load()
		warm := same(when, q)
		if reads := mems.metas.Load() - before; reads != int64(len(warm)) || len(warm) >= len(rs) {
			t.Errorf("%s: the recall read %d records returning %d of %d candidates (the cold one %d): want only those it returns",
				when, reads, len(warm), len(rs), coldReads)
		}
	}
	warm("warm")
	same("warm, every memory", all)

	// a2's importance written: its score takes the importance written.
	if err := s.Store().Update(ctx, meta.UpdateHot([]cid.Cid{m["a2"]}, func(h *meta.Hot, _ cid.Cid) { h.Importance = 0.97 })); err != nil {
		t.Fatal(err)
	}
	warm("after a2's importance")
	for _, r := range same("after a2's importance", all) {
		if r.CID == m["a2"] && r.Explain.Importance != 0.97 {
			t.Errorf("a2's importance %v, want 0.97", r.Explain.Importance)
		}
	}

	// The sona goes on (its activity grows), then a recall touches what it
	// returns: the touches wait in the buffer, and the access ticks they
	// raise count.
	o.Text("The kettle is broken.")
	o.Text("Buy a new one tomorrow.")
	touching := all
	touching.Peek = false
	_, tr, err := rc.Recall(ctx, touching)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range tr {
		if err := s.Store().Update(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if tick := s.Memories.TouchedTick(m["a1"]); tick == 0 {
		t.Fatal("a1's touch is not in the buffer: the test tells nothing of it")
	}
	same("touched", all)

	// The touches written (recall.touch_flush): the scores take the access
	// ticks written, and are not read again.
	if err := s.Memories.FlushTouches(ctx); err != nil {
		t.Fatal(err)
	}
	if tick := s.Memories.TouchedTick(m["a1"]); tick != 0 {
		t.Fatal("a1's touch is still in the buffer after its write")
	}
	warm("after the touches' write")
	same("after the touches' write, every memory", all)
}

// What the open's scan reads of the records (KnowPlain) scores a
// restarted server's first recalls without reading the candidates'
// records — but not a memory with a record of its hot state, whose
// importance the metadata record no longer holds.
func TestKnowPlainScoresTheFirstRecall(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o, m := contextSona(t, s, clk)
	// Hot states' records: a2's, returned, and a4's, a candidate that is
	// not.
	importances := map[cid.Cid]float64{m["a2"]: 0.97, m["a4"]: 0.01}
	if err := s.Store().Update(ctx, meta.UpdateHot([]cid.Cid{m["a2"], m["a4"]}, func(h *meta.Hot, c cid.Cid) { h.Importance = importances[c] })); err != nil {
		t.Fatal(err)
	}
	// The open loads which memories have a hot state's record in the
	// background: until then every record's score is read.
	hotRecordsKnown(t, s, m["a1"])
	cold, coldMems := countingRecaller(t, s, cfg, clk)
	known, knownMems := countingRecaller(t, s, cfg, clk)
	knowEveryRecord(t, s, known)
	// hot knows the hot states' records too, as the open's load of them
	// has recall know (meta.Store.LoadHot, Recaller.KnowHot).
	hot, hotMems := countingRecaller(t, s, cfg, clk)
	knowEveryRecord(t, s, hot)
	gen := hot.PlainGeneration()
	if n, err := s.Memories.LoadHot(func(key []byte, h meta.Hot) { hot.KnowHot(key, h, gen) }); err != nil || n != 2 {
		t.Fatalf("%d hot states' records loaded (%v), want a2's and a4's", n, err)
	}
	// Two of the candidates returned: the known recall reads their records
	// (and a4's, whose hot state has a record), the hot one only theirs,
	// the cold one every candidate's.
	q := recall.Query{Sona: o.Sona, Text: "aurora green tyres cello", K: 2, Peek: true, Expand: new(0)}
	var returned int64
	for _, rc := range []*recall.Recaller{cold, known, hot} {
		rs, _, err := rc.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		returned = int64(len(rs))
		if slices.ContainsFunc(rs, func(r *recall.Recalled) bool { return r.CID == m["a4"] }) {
			t.Fatal("a4 returned: the test tells nothing of a hot state's record not returned")
		}
	}
	if k, c := knownMems.metas.Load(), coldMems.metas.Load(); k <= returned || k >= c {
		t.Errorf("with the scan's knowledge the recall of 2 read %d records, without %d", k, c)
	}
	if h := hotMems.metas.Load(); h != returned {
		t.Errorf("knowing the hot states' records too the recall read %d records, returning %d", h, returned)
	}
	// Every memory returned: every candidate's score is seen.
	q.K = 6
	want, _, err := cold.Recall(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 4 {
		t.Fatalf("%d recalled, want every memory", len(want))
	}
	for _, rc := range []*recall.Recaller{known, hot} {
		got, _, err := rc.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d recalled, reading every record %d", len(got), len(want))
		}
		for i, w := range want {
			if g := got[i]; g.CID != w.CID || g.Explain != w.Explain {
				t.Errorf("#%d %s scored %+v, reading every record %s %+v", i, g.CID, g.Explain, w.CID, w.Explain)
			}
			if w.CID == m["a2"] && w.Explain.Importance != 0.97 {
				t.Errorf("a2's importance %v, want 0.97", w.Explain.Importance)
			}
		}
	}
}

// A reopened store's recall takes the hot states' records into the
// scores its open's scan read from the metadata records (in the
// background, with which memories have one).
func TestOpenKnowsTheHotStates(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	_, m := contextSona(t, s, clk)
	if err := s.Store().Update(ctx, meta.UpdateHot([]cid.Cid{m["a2"]}, func(h *meta.Hot, _ cid.Cid) { h.Importance = 0.97 })); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, cfg, clk)
	defer s.Close()
	hotRecordsKnown(t, s, m["a1"])
	// (KnownScore: importance, decay, access tick, kind, sonas, and
	// whether from the metadata record alone.)
	if got := strings.Fields(s.Recaller.KnownScore(m["a2"])); len(got) == 0 || got[0] != "0.97" || got[len(got)-1] != "false" {
		t.Errorf("a2's score: %q, want its hot state's importance, 0.97, not from the metadata record alone", got)
	}
	if got := strings.Fields(s.Recaller.KnownScore(m["a1"])); len(got) == 0 || got[len(got)-1] != "true" {
		t.Errorf("a1's score (no hot state's record): %q, want it from its metadata record", got)
	}
}

// hotRecordsKnown waits until the open's background load of the hot
// states' records is done: until s knows that c, which has none, has
// none (every record has been read by then).
func hotRecordsKnown(t *testing.T, s *memory.Self, c cid.Cid) {
	t.Helper()
	testutil.Eventually(t, "the hot states' records known", func() bool {
		var absent bool
		if err := s.Store().View(func(r store.Reader) error { absent = s.Memories.HotAbsent(r, c); return nil }); err != nil {
			t.Fatal(err)
		}
		return absent
	})
}

// knowEveryRecord has rc know what every metadata record of s says, as
// the open's scan does (KnowPlain).
func knowEveryRecord(t *testing.T, s *memory.Self, rc *recall.Recaller) {
	t.Helper()
	gen := rc.PlainGeneration()
	if err := s.Store().View(func(r store.Reader) error {
		return store.Scan(r, meta.Prefix, func(k, v []byte) error {
			c, err := cid.Cast(k[len(meta.Prefix):])
			if err != nil {
				return err
			}
			rc.KnowPlain(c, v, gen)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// The server that appended the memories knows of each what the open's
// scan would (Recaller.Appended), and of a record a commit rewrote what
// the record written says (Recaller.Committed): its recall reads the
// records of what it returns only, and scores as a recaller that reads
// every record — a memory rewritten with a label as before, one rewritten
// archived hidden.
func TestAppendsAndRewritesKnownWithoutReading(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o, m := contextSona(t, s, clk)
	hotRecordsKnown(t, s, m["a1"])
	// The full-text index reads the records it indexes, in the background.
	settle := func() {
		t.Helper()
		if err := s.Text.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	for name, c := range m {
		if got := strings.Fields(s.Recaller.KnownScore(c)); len(got) == 0 || got[len(got)-1] != "true" {
			t.Errorf("%s's score once appended: %q, want it from its metadata record", name, got)
		}
	}
	rewrite := func(c cid.Cid, fn func(*messages.MemoryMeta)) {
		t.Helper()
		if err := s.Store().Update(ctx, meta.Update([]cid.Cid{c}, func(mt *messages.MemoryMeta, _ cid.Cid) { fn(mt) })); err != nil {
			t.Fatal(err)
		}
		settle()
	}
	metaReads := func() int64 {
		_, md, _ := s.Memories.CacheStats()
		return int64(md.Hits + md.Misses)
	}
	q := recall.Query{Sona: o.Sona, Text: "aurora green tyres cello", K: 2, Peek: true, Expand: new(0)}
	// check recalls q: no memory but hidden, whose records are read (as
	// a candidate and as a neighbour) but not kept as scores, is read
	// unless returned.
	check := func(when string, hidden cid.Cid, hiddenReads int64) {
		t.Helper()
		before := metaReads()
		got, _, err := s.Recaller.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		reads := metaReads() - before
		fresh, freshMems := countingRecaller(t, s, cfg, clk)
		want, _, err := fresh.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("%s: nothing recalled", when)
		}
		sameAsReadingEvery(t, when, got, want)
		if slices.ContainsFunc(got, func(r *recall.Recalled) bool { return r.CID == hidden }) {
			t.Errorf("%s: %s recalled", when, hidden)
		}
		if n := freshMems.metas.Load(); reads != int64(len(got))+hiddenReads || n <= reads {
			t.Errorf("%s: the recall read %d records returning %d, %d of the hidden one's wanted (a recaller that knew nothing %d)",
				when, reads, len(got), hiddenReads, n)
		}
		if hidden.Defined() && s.Recaller.KnownScore(hidden) != "" {
			t.Errorf("%s: the hidden one's score kept: %q", when, s.Recaller.KnownScore(hidden))
		}
	}
	check("appended", cid.Undef, 0)
	every := q
	every.K = 6
	rs, _, err := s.Recaller.Recall(ctx, every)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 4 {
		t.Fatalf("%d recalled, want every memory", len(rs))
	}
	// A candidate q does not return, then the best, rewritten.
	first, third := rs[0].CID, rs[2].CID
	rewrite(third, func(mt *messages.MemoryMeta) { mt.Labels = map[string]string{"seen": "yes"} })
	// What is kept of it is what the open's scan of the record written
	// keeps.
	scanned, _ := countingRecaller(t, s, cfg, clk)
	knowEveryRecord(t, s, scanned)
	if got, want := s.Recaller.KnownScore(third), scanned.KnownScore(third); got != want || got == "" {
		t.Errorf("the rewritten record's score %q, the open's scan's %q", got, want)
	}
	check("a record rewritten with a label", cid.Undef, 0)
	rewrite(first, func(mt *messages.MemoryMeta) { mt.Archived = true })
	check("the best rewritten archived", first, 2)
}

// sameAsReadingEvery fails unless got, a recall, returned what want, the
// same recall by a recaller that reads every record, returned: the same
// memories in the same order, with the same scores, explanations and
// metadata.
func sameAsReadingEvery(t *testing.T, when string, got, want []*recall.Recalled) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d recalled, a recaller reading every record %d", when, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.CID != w.CID || g.Score != w.Score || g.Explain != w.Explain || !proto.Equal(g.Meta, w.Meta) {
			t.Errorf("%s: #%d %s scored %v (%+v, meta %v), reading every record %s %v (%+v, meta %v)",
				when, i, g.CID, g.Score, g.Explain, g.Meta, w.CID, w.Score, w.Explain, w.Meta)
		}
	}
}
