package tiers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

func count(events []tiers.Event, kind string) int {
	n := 0
	for _, e := range events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// randomWords makes a text that shares no word with another one.
func randomWords(rng *rand.Rand, n int) string {
	words := make([]string, n)
	for i := range words {
		b := make([]byte, 7)
		for j := range b {
			b[j] = byte('a' + rng.Intn(26))
		}
		words[i] = string(b)
	}
	return strings.Join(words, " ")
}

func TestSTMOverflowMovesOnePagePerPageToMTM(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	for i := range 7 {
		o.Page(fmt.Sprintf("I planted tomatoes in bed %d.", i), fmt.Sprintf("Tomatoes in bed %d need sun.", i))
		if ev := memorytest.Settle(t, s, o.Sona); count(ev, tiers.PageMoved) != 0 || count(ev, tiers.PageAdded) != 1 {
			t.Fatalf("page %d: events %v", i, ev)
		}
	}
	for i := 7; i < 12; i++ {
		o.Page(fmt.Sprintf("My sister visited Lisbon for the %dth time.", i), fmt.Sprintf("Lisbon is lovely, visit %d.", i))
		ev := memorytest.Settle(t, s, o.Sona)
		if count(ev, tiers.PageAdded) != 1 || count(ev, tiers.PageMoved) != 1 {
			t.Fatalf("page %d: events %v", i, ev)
		}
	}
	v, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Stm.Pages) != 7 || v.Stm.Pages[0].Seq != 6 || len(v.Stm.Pending) != 0 {
		t.Fatalf("STM holds %d pages from %d", len(v.Stm.Pages), v.Stm.Pages[0].Seq)
	}
	inMTM := 0
	for _, seg := range v.Mtm.Segments {
		inMTM += len(seg.Pages)
	}
	if inMTM != 5 {
		t.Fatalf("MTM holds %d pages, want 5", inMTM)
	}
	if got := v.Stm.Pages[6].QText; got != "Caroline: My sister visited Lisbon for the 11th time." {
		t.Fatalf("page text %q", got)
	}
}

// withFullSTM opens a store on a fake clock with a sona whose STM holds
// seven pages of random words, settled: the pages after them reach the
// MTM one a page.
func withFullSTM(t *testing.T) (*clock.Fake, *memory.Self, *memorytest.Owner) {
	t.Helper()
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock)
	t.Cleanup(func() { s.Close() })
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(1))
	for range 7 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	memorytest.Settle(t, s, o.Sona)
	return clock, s, o
}

func TestSimilarPagesShareASegmentAndHeatPromotesToPersona(t *testing.T) {
	// Seven pages to fill the STM, then five on one topic.
	clock, s, o := withFullSTM(t)
	var events []tiers.Event
	for i := range 12 {
		o.Page(fmt.Sprintf("I love my garden and I grow tomatoes and basil there, batch %d.", i),
			fmt.Sprintf("Your garden tomatoes and basil sound great, batch %d.", i))
		events = append(events, memorytest.Settle(t, s, o.Sona)...)
	}
	v, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	var garden *messages.Segment
	for _, seg := range v.Mtm.Segments {
		if strings.Contains(seg.Summary, "garden") {
			garden = seg
		}
	}
	if garden == nil || garden.PageCount != 5 {
		t.Fatalf("no garden segment of 5 pages: %v", v.Mtm.Segments)
	}
	// L 5 + recency 1 = 6 > τ: promoted at the fifth page, then reset.
	if count(events, tiers.SegmentPromoted) != 1 || count(events, tiers.PersonaUpdated) != 1 {
		t.Fatalf("events %v", events)
	}
	if garden.LInteraction != 0 || garden.Promotions != 1 {
		t.Fatalf("garden segment after promotion: L %d promotions %d", garden.LInteraction, garden.Promotions)
	}
	kb := v.Lpm.User.Knowledge
	if len(kb) == 0 || !strings.HasPrefix(kb[0].Text, "Caroline loves Caroline's garden") {
		t.Fatalf("knowledge %v", kb)
	}
	if len(v.Lpm.User.Traits) == 0 || v.Lpm.Agent.Profile["role"] == "" {
		t.Fatalf("persona %v", v.Lpm)
	}

	// Retrieval finds the garden pages; recording the visit moves heat.
	vecs, _ := s.Embed(context.Background(), "what grows in the garden")
	tr, err := s.Tiers.Recall(o.Sona, "what grows in the garden", vecs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Segments) == 0 || tr.Segments[0] != garden.Id || len(tr.MTM) == 0 || tr.MTM[0].Segment != garden.Id {
		t.Fatalf("retrieval: segments %v pages %d", tr.Segments, len(tr.MTM))
	}
	if len(tr.STM) != 7 || len(tr.Persona.User.Knowledge) == 0 {
		t.Fatalf("retrieval: %d STM pages, %d facts", len(tr.STM), len(tr.Persona.User.Knowledge))
	}
	clock.Set(memorytest.Epoch.Add(time.Hour))
	res, err := s.Tiers.VisitSegments(context.Background(), o.Sona, tr.Segments[:1], clock.Now().Unix())
	if err != nil || count(res.Events, tiers.SegmentVisited) != 1 {
		t.Fatalf("visit: %v %v", res, err)
	}
	v, _ = s.Tiers.View(o.Sona)
	for _, seg := range v.Mtm.Segments {
		if seg.Id == garden.Id && (seg.NVisit != 1 || seg.LastAccess != clock.Now().Unix()) {
			t.Fatalf("visited segment: N %d last access %d", seg.NVisit, seg.LastAccess)
		}
	}
}

func TestMTMEvictsTheColdestSegmentAt201(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clock)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(2))
	// 7 pages fill the STM; the next 200 make 200 unrelated segments, one
	// second apart, so older segments are slightly colder.
	for i := range 207 {
		clock.Set(memorytest.Epoch.Add(time.Duration(i) * time.Second))
		o.Page(randomWords(rng, 8), randomWords(rng, 8))
		memorytest.Settle(t, s, o.Sona)
	}
	v, _ := s.Tiers.View(o.Sona)
	if len(v.Mtm.Segments) != 200 {
		t.Fatalf("%d segments, want 200", len(v.Mtm.Segments))
	}
	// Visiting segment 1 warms it: segment 2 is now the coldest.
	if _, err := s.Tiers.VisitSegments(context.Background(), o.Sona, []uint64{1}, clock.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	clock.Set(memorytest.Epoch.Add(300 * time.Second))
	o.Page(randomWords(rng, 8), randomWords(rng, 8))
	ev := memorytest.Settle(t, s, o.Sona)
	if count(ev, tiers.SegmentEvicted) != 1 || count(ev, tiers.SegmentCreated) != 1 {
		t.Fatalf("events %v", ev)
	}
	for _, e := range ev {
		if e.Kind == tiers.SegmentEvicted && e.Segment != 2 {
			t.Fatalf("evicted segment %d, want 2 (the coldest)", e.Segment)
		}
	}
	v, _ = s.Tiers.View(o.Sona)
	if len(v.Mtm.Segments) != 200 {
		t.Fatalf("%d segments after eviction", len(v.Mtm.Segments))
	}
	var pages int
	for _, seg := range v.Mtm.Segments {
		if seg.Id == 2 {
			t.Fatal("segment 2 still there")
		}
		pages += len(seg.Pages)
	}
	if pages != 200 {
		t.Fatalf("%d pages in the MTM, want 200 (the evicted segment's page forgotten by the tier)", pages)
	}
	// The memories of the forgotten page stay in the DAG.
	if _, n := s.Counts(); n != 2*208 {
		t.Fatalf("%d memories in the store", n)
	}
}

func TestTiersSurviveReopenExactly(t *testing.T) {
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clock)
	o := memorytest.NewOwner(t, s, "a")
	for i := range 14 {
		o.Page(fmt.Sprintf("I ride my bike to work on day %d.", i), fmt.Sprintf("Cycling is healthy, day %d.", i))
	}
	// Settle part of the work, a page a step: some pages stay in the inboxes.
	s.Tiers.SetBatch(1)
	for range 10 {
		if _, err := s.Tiers.Step(context.Background(), o.Sona, tiers.STM, tiers.Heuristic{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Tiers.Step(context.Background(), o.Sona, tiers.MTM, tiers.Heuristic{}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Stm.Pending) != 4 || len(before.Mtm.Pending) != 2 {
		t.Fatalf("pending: %d STM, %d MTM", len(before.Stm.Pending), len(before.Mtm.Pending))
	}
	s.Close()
	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	after, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(before, after) {
		t.Fatalf("tiers changed across a reopen:\n%v\n%v", before, after)
	}
	memorytest.Settle(t, s, o.Sona)
	after, _ = s.Tiers.View(o.Sona)
	inMTM := 0
	for _, seg := range after.Mtm.Segments {
		inMTM += len(seg.Pages)
	}
	if len(after.Stm.Pages) != 7 || inMTM != 7 {
		t.Fatalf("after settling: %d STM, %d MTM pages", len(after.Stm.Pages), inMTM)
	}
}

func TestConcurrentTierWorkersProcessEachPageOnce(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	for i := range 20 {
		o.Page(fmt.Sprintf("Note %d about the river.", i), fmt.Sprintf("Rivers flow %d.", i))
	}
	// Two workers race over the same inboxes (as after an actor restart
	// while the old step was still running): every page lands once.
	var wg sync.WaitGroup
	events := make([][]tiers.Event, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev, err := s.Tiers.Settle(context.Background(), o.Sona, tiers.Heuristic{})
			if err != nil {
				t.Error(err)
			}
			events[w] = ev
		}()
	}
	wg.Wait()
	all := append(events[0], events[1]...)
	if count(all, tiers.PageAdded) != 20 || count(all, tiers.PageMoved) != 13 {
		t.Fatalf("%d pages added, %d moved", count(all, tiers.PageAdded), count(all, tiers.PageMoved))
	}
	v, _ := s.Tiers.View(o.Sona)
	seen := map[uint64]bool{}
	for _, p := range v.Stm.Pages {
		seen[p.Seq] = true
	}
	for _, seg := range v.Mtm.Segments {
		for _, p := range seg.Pages {
			if seen[p.Seq] {
				t.Fatalf("page %d twice", p.Seq)
			}
			seen[p.Seq] = true
		}
	}
	if len(seen) != 20 {
		t.Fatalf("%d distinct pages in the tiers, want 20", len(seen))
	}
}

func TestPushPageRefusesForeignMemories(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	a, b := memorytest.NewOwner(t, s, "a"), memorytest.NewOwner(t, s, "b")
	qa := a.Text("in a")
	qb := b.Text("in b")
	if err := s.Tiers.PushPage(context.Background(), a.Sona, qa, qb); err == nil {
		t.Fatal("a page with another sona's memory was accepted")
	}
	v, _ := s.Tiers.View(a.Sona)
	if len(v.Stm.Pending) != 0 {
		t.Fatal("a refused page was written")
	}
}

// A word longer than a Badger key may be (65,000 bytes) reaches the MTM's
// document frequencies as a bounded key: the page moves like any other
// (issue 13 #6: it used to fail the tier step on every restart).
func TestHugeWordReachesMTM(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	huge := strings.Repeat("w", 70000)
	o.Page("The word is "+huge+" indeed.", "What a "+huge+" word.")
	o.Page("Another "+huge+"x here.", "Yes, "+huge+"x.")
	for i := range 7 {
		o.Page(fmt.Sprintf("Filler question %d.", i), fmt.Sprintf("Filler answer %d.", i))
	}
	if ev := memorytest.Settle(t, s, o.Sona); count(ev, tiers.PageMoved) != 2 {
		t.Fatalf("events %v: want the two pages with huge words moved to the MTM", ev)
	}
	// The keys themselves: memory/tiers TestDocFreqKeyIsBounded.
}

// chainReached is the heuristic tier model, telling when the STM step has
// read its page and asks for the meta-chain link.
type chainReached struct {
	tiers.Heuristic
	once    sync.Once
	reached chan struct{}
}

func (m *chainReached) Chain(ctx context.Context, in tiers.ChainInput) (*messages.MetaChain, error) {
	m.once.Do(func() { close(m.reached) })
	return m.Heuristic.Chain(ctx, in)
}

// The STM step reads what was committed: a page queued by a commit whose
// hooks (which add its vectors to the index) have not run yet still has
// its vectors (issue 13 #14: the tier actor crashed on "has no embedding").
func TestSTMStepReadsCommittedVectorsBeforeTheIndex(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	ctx := context.Background()
	q := o.Add(o.Say("Caroline", "Where is the blue shed?"), nil)
	m := o.Say("Melanie", "Behind the house.")
	vecs, err := s.Embed(ctx, m.Text())
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Chains.Prepare(m, vecs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	p.PageOf = &q
	plan, err := model.PlanAppend(o.Sona, o.Head, o.N, p, s.Clock().Now().Unix())
	if err != nil {
		t.Fatal(err)
	}
	// The first hook of the commit holds the committer until the step has
	// read the page: the response's vector is durable, not yet indexed.
	release := make(chan struct{})
	appendOp := s.Chains.Op(plan)
	pending := s.Store().Submit(func(tx store.Tx) error {
		tx.OnCommit(func() { <-release })
		return appendOp(tx)
	})
	model := &chainReached{reached: make(chan struct{})}
	settled := make(chan error, 1)
	go func() {
		// Wait for the commit to be visible (its hook is holding).
		deadline := time.Now().Add(10 * time.Second)
		for {
			if time.Now().After(deadline) {
				settled <- errors.New("the commit never became visible")
				return
			}
			v, err := s.Tiers.View(o.Sona)
			if err != nil {
				settled <- err
				return
			}
			if len(v.Stm.Pending) > 0 {
				break
			}
			runtime.Gosched()
		}
		_, err := s.Tiers.Settle(ctx, o.Sona, model)
		settled <- err
	}()
	select {
	case <-model.reached:
	case err := <-settled:
		close(release)
		t.Fatalf("the STM step failed before the index caught up: %v", err)
	}
	close(release)
	if err := pending.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	v, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Stm.Pages) != 1 {
		t.Fatalf("STM pages %d, want 1", len(v.Stm.Pages))
	}
}

// A sona's segments are decoded once: what recall reads is the cache's,
// and a commit patches the segments it wrote into it; a visit changes
// copies, never what was handed out.
func TestSegmentsCachedAndPatched(t *testing.T) {
	clock, s, o, rng := threeSegments(t)
	vecs, _ := s.Embed(context.Background(), "anything")
	first, err := s.Tiers.Recall(o.Sona, "anything", vecs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	cached := s.Tiers.CachedSegments(o.Sona)
	if len(cached) != 3 {
		t.Fatalf("%d segments cached, want 3", len(cached))
	}
	if _, err := s.Tiers.Recall(o.Sona, "anything", vecs[0], 0); err != nil {
		t.Fatal(err)
	}
	if again := s.Tiers.CachedSegments(o.Sona); &again[0] != &cached[0] {
		t.Fatal("the segments were read again without a commit")
	}
	visits := make([]uint64, len(cached))
	for i, seg := range cached {
		visits[i] = seg.NVisit
	}
	if _, err := s.Tiers.VisitSegments(context.Background(), o.Sona, first.Segments, clock.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	for i, seg := range cached {
		if seg.NVisit != visits[i] {
			t.Fatalf("segment %d changed in the cache's hands", seg.ID)
		}
	}
	same := func(when string, want int) {
		t.Helper()
		stored, err := s.Tiers.StoredSegments(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Tiers.CachedSegments(o.Sona)
		if len(got) != len(stored) || len(got) != want {
			t.Fatalf("%s: %d segments cached, %d stored, want %d", when, len(got), len(stored), want)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], stored[i]) {
				t.Fatalf("%s: segment %d cached as %+v, stored as %+v", when, stored[i].ID, got[i], stored[i])
			}
		}
	}
	same("after the visit", 3)
	visited := 0
	for _, seg := range s.Tiers.CachedSegments(o.Sona) {
		if seg.NVisit == 1 {
			visited++
		}
	}
	if visited != len(first.Segments) || visited == 0 {
		t.Fatalf("%d segments visited once, want %d", visited, len(first.Segments))
	}
	// More pages: the MTM steps' new and changed segments are patched in.
	for range 6 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	memorytest.Settle(t, s, o.Sona)
	same("after six more pages", 9)
}

// Reads of an inbox begin at the first entry seen there: the consumed
// entries before it are never stepped over again; the work is the same.
func TestInboxReadsBeginPastConsumedWork(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(5))
	for i := range 12 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
		memorytest.Settle(t, s, o.Sona)
		// Page i+1 was the STM inbox's first entry when its step read it.
		if got := s.Tiers.InboxStart(o.Sona, tiers.STM); got != uint64(i+1) {
			t.Fatalf("page %d: STM inbox read from %d", i+1, got)
		}
	}
	v, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Stm.Pages) != 7 || len(v.Stm.Pending) != 0 || len(v.Mtm.Segments) != 5 {
		t.Fatalf("STM %d pages, %d pending, MTM %d segments", len(v.Stm.Pages), len(v.Stm.Pending), len(v.Mtm.Segments))
	}
}

// The STM state and the MTM inbox keep no page embeddings (the index
// holds the memories' vectors they are summed from); the similarity of
// each page to the one before is as the embeddings give it, and a state
// an older binary wrote with embeddings steps as before.
func TestSTMStateKeepsNoEmbeddings(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(3))
	var vecs [][]float32
	var sims []float64
	page := func(i int) {
		t.Helper()
		o.Page(fmt.Sprintf("We talked about %s.", randomWords(rng, 3)), fmt.Sprintf("Page %d: %s.", i, randomWords(rng, 3)))
		memorytest.Settle(t, s, o.Sona)
		st, err := s.Tiers.StoredSTM(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		last := st.Pages[len(st.Pages)-1]
		v, err := s.Tiers.PageVector(last)
		if err != nil {
			t.Fatal(err)
		}
		if len(vecs) > 0 {
			sims = append(sims, base.Cosine(vecs[len(vecs)-1], v))
		}
		vecs = append(vecs, v)
		for _, p := range st.Pages {
			if len(p.Embedding) != 0 {
				t.Fatalf("page %d: STM page %d stored with its embedding", i, p.Seq)
			}
		}
		want := assoc.SimStats{}
		for _, x := range sims {
			want.Add(x)
		}
		if st.SimN != uint64(want.N) || math.Abs(st.SimMean-want.Mean) > 1e-9 || math.Abs(st.SimM2-want.M2) > 1e-9 {
			t.Fatalf("page %d: similarity stats n %d mean %v m2 %v, want %d %v %v", i, st.SimN, st.SimMean, st.SimM2, want.N, want.Mean, want.M2)
		}
	}
	for i := range 9 {
		page(i)
	}
	// As an older binary stored it: every page with its embedding.
	st, err := s.Tiers.StoredSTM(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Pages {
		if p.Embedding, err = s.Tiers.PageVector(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Tiers.SetSTM(o.Sona, st); err != nil {
		t.Fatal(err)
	}
	for i := 9; i < 12; i++ {
		page(i)
	}
	v, err := s.Tiers.View(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	inMTM := 0
	for _, seg := range v.Mtm.Segments {
		inMTM += len(seg.Pages)
	}
	if len(v.Stm.Pages) != 7 || inMTM != 5 {
		t.Fatalf("STM %d pages, MTM %d, want 7 and 5", len(v.Stm.Pages), inMTM)
	}
}

// TestSTMPagesAreRecords: the STM's state lists its pages by seq, each
// page its own record — a step writes the page it adds and deletes the
// one it hands to the MTM, never the state's pages inline —, and a state
// an older build wrote with its pages inline is read as it was and
// written as records at the next step.
func TestSTMPagesAreRecords(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(4))
	page := func(i int) {
		t.Helper()
		o.Page(fmt.Sprintf("We talked about %s.", randomWords(rng, 3)), fmt.Sprintf("Page %d: %s.", i, randomWords(rng, 3)))
		memorytest.Settle(t, s, o.Sona)
	}
	// records checks that the pages are records, those of seqs first..last.
	records := func(first, last uint64) {
		t.Helper()
		state, recs, err := s.Tiers.STMRecords(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		var want []uint64
		for seq := first; seq <= last; seq++ {
			want = append(want, seq)
		}
		if len(state.Pages) != 0 || !slices.Equal(state.PageSeqs, want) || !slices.Equal(recs, want) {
			t.Fatalf("state with %d pages inline, listing %v; page records %v; want %v", len(state.Pages), state.PageSeqs, recs, want)
		}
		st, err := s.Tiers.StoredSTM(o.Sona)
		if err != nil || len(st.Pages) != len(want) {
			t.Fatalf("STM read with %d pages (%v), want %d", len(st.Pages), err, len(want))
		}
		for i, p := range st.Pages {
			if p.Seq != want[i] || p.Q == "" || p.R == "" || p.GetMetaChain() == nil {
				t.Fatalf("page %d read as %v", want[i], p)
			}
		}
	}
	for i := range 9 {
		page(i)
	}
	records(3, 9) // seven pages; the first two handed on
	// As a build before stop 83 stored it: the pages inline, no records.
	st, err := s.Tiers.StoredSTM(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Tiers.SetSTM(o.Sona, st); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Tiers.StoredSTM(o.Sona); err != nil || !proto.Equal(&messages.StmState{Pages: again.Pages}, &messages.StmState{Pages: st.Pages}) {
		t.Fatalf("the inline state read as %v (%v), want %v", again, err, st)
	}
	if state, recs, err := s.Tiers.STMRecords(o.Sona); err != nil || len(state.Pages) != 7 || len(recs) != 0 {
		t.Fatalf("inline state: %d pages inline, records %v (%v)", len(state.Pages), recs, err)
	}
	page(9)
	records(4, 10)
	// A view that reads in the cache a state older than its snapshot (the
	// commit that wrote the state it sees not yet told), which lists a page
	// that commit deleted, reads the state and its pages from its snapshot.
	old, err := s.Tiers.STMStateRecord(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	page(10)
	s.Tiers.CacheSTMState(o.Sona, old) // lists seqs 4–10; 4 is deleted
	records(5, 11)
}

// TestMidTermEmbeddingsArePacked: a mid-term segment's mean embedding and
// a mid-term page's embedding are stored packed (embedding8: 4 bytes and
// one a dimension, no floats), and read close to what they stand for —
// a page its memories' vector, a segment the mean of its pages'; records
// an older build wrote with floats read as those floats, and what a step
// writes after is packed.
func TestMidTermEmbeddingsArePacked(t *testing.T) {
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(5))
	page := func(i int) {
		t.Helper()
		topic := []string{"tomatoes in the garden", "the trip to Lisbon"}[i%2]
		o.Page(fmt.Sprintf("About %s: %s.", topic, randomWords(rng, 2)), fmt.Sprintf("Page %d on %s.", i, topic))
		memorytest.Settle(t, s, o.Sona)
	}
	midTerm := func() ([]*messages.Segment, []tiers.MidTermPage, []*tiers.Segment) {
		t.Helper()
		segs, pages, err := s.Tiers.MidTerm(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		read, err := s.Tiers.StoredSegments(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		return segs, pages, read
	}
	for i := range 14 {
		page(i)
	}
	segs, pages, read := midTerm()
	if len(segs) == 0 || len(pages) != 7 {
		t.Fatalf("%d segments, %d pages, want some and 7", len(segs), len(pages))
	}
	means := map[uint64][]float32{}
	for _, p := range pages {
		want, err := s.Tiers.PageVector(p.Read)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Stored.Embedding) != 0 || len(p.Stored.Embedding8) != 4+len(want) || len(p.Read.Embedding8) != 0 {
			t.Fatalf("page %d stored with %d floats and %d packed bytes (want %d), %d left after reading",
				p.Stored.Seq, len(p.Stored.Embedding), len(p.Stored.Embedding8), 4+len(want), len(p.Read.Embedding8))
		}
		if c := base.Cosine(p.Read.Embedding, want); c < 0.999 {
			t.Fatalf("page %d read with cosine %v to its memories' vector", p.Stored.Seq, c)
		}
		if means[p.Segment] == nil {
			means[p.Segment] = make([]float32, len(want))
		}
		for j, x := range want {
			means[p.Segment][j] += x
		}
	}
	for i, rec := range segs {
		if len(rec.Embedding) != 0 || len(rec.Embedding8) != 4+len(read[i].Embedding) {
			t.Fatalf("segment %d stored with %d floats and %d packed bytes", rec.Id, len(rec.Embedding), len(rec.Embedding8))
		}
		// The mean of its pages, those handed to the persona's included:
		// only those still stored are at hand.
		if m := means[rec.Id]; m != nil && base.Cosine(read[i].Embedding, m) < 0.99 {
			t.Fatalf("segment %d read with cosine %v to its pages' mean", rec.Id, base.Cosine(read[i].Embedding, m))
		}
	}
	// As a build before stop 84 stored them: the embeddings as floats.
	if err := s.Tiers.SetMidTermFloats(o.Sona); err != nil {
		t.Fatal(err)
	}
	segs2, pages2, read2 := midTerm()
	for i, rec := range segs2 {
		if len(rec.Embedding8) != 0 || !slices.Equal(read2[i].Embedding, read[i].Embedding) {
			t.Fatalf("segment %d stored as floats: %d packed bytes, read the same: %v", rec.Id, len(rec.Embedding8),
				slices.Equal(read2[i].Embedding, read[i].Embedding))
		}
	}
	for i, p := range pages2 {
		if len(p.Stored.Embedding8) != 0 || !slices.Equal(p.Read.Embedding, pages[i].Read.Embedding) {
			t.Fatalf("page %d stored as floats: %d packed bytes, read the same: %v", p.Stored.Seq, len(p.Stored.Embedding8),
				slices.Equal(p.Read.Embedding, pages[i].Read.Embedding))
		}
	}
	page(14)
	segs3, pages3, _ := midTerm()
	packed := 0
	for _, p := range pages3 {
		if len(p.Stored.Embedding8) > 0 {
			packed++
		}
	}
	joined := 0
	for _, rec := range segs3 {
		if len(rec.Embedding8) > 0 {
			joined++
		}
	}
	if len(pages3) != 8 || packed != 1 || joined != 1 {
		t.Fatalf("after one more step: %d pages, %d packed, %d segments packed; want 8, the new one and the one it joined", len(pages3), packed, joined)
	}
	// Re-embedded for another embedder (memoria reindex), the floats of the
	// older form and the packed alike are written packed, of its dims.
	s.Close()
	emb := llm.NewHashedEmbedder(128)
	if _, err := memory.Reembed(context.Background(), cfg, emb, nil); err != nil {
		t.Fatal(err)
	}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Embedder: emb, Clock: clock.NewFake(memorytest.Epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	segs4, pages4, read4 := midTerm()
	for _, p := range pages4 {
		want, err := s.Tiers.PageVector(p.Read)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Stored.Embedding) != 0 || len(p.Stored.Embedding8) != 4+128 || base.Cosine(p.Read.Embedding, want) < 0.999 {
			t.Fatalf("re-embedded page %d: %d floats, %d packed bytes, cosine %v to its memories' vector", p.Stored.Seq,
				len(p.Stored.Embedding), len(p.Stored.Embedding8), base.Cosine(p.Read.Embedding, want))
		}
	}
	for i, rec := range segs4 {
		if len(rec.Embedding) != 0 || len(rec.Embedding8) != 4+128 || len(read4[i].Embedding) != 128 {
			t.Fatalf("re-embedded segment %d: %d floats, %d packed bytes", rec.Id, len(rec.Embedding), len(rec.Embedding8))
		}
	}
}

// A step tells whether its inbox held more work when it read it (a tier
// rests after a step without More, with no read of an empty inbox), and
// Pending lists the tiers holding work in one read.
func TestStepsTellWhetherMoreWorkWaits(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	pending := func(want ...string) {
		t.Helper()
		got, err := s.Tiers.Pending(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("pending tiers %q, want %q", got, want)
		}
	}
	// A tier actor's step (Step) has its write wait for a commit to share
	// (UpdateDeferred) unless more work waits: a backlog's steps do not
	// wait out store.defer_for one after the other. (On this test's clock,
	// which stands still, the deferred write is committed after twice
	// defer_for on the machine's.)
	step := func(tier string, done, more bool) {
		t.Helper()
		d0 := s.Store().CommitStats().Deferred
		res, err := s.Tiers.Step(context.Background(), o.Sona, tier, tiers.Heuristic{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Done != done || res.More != more {
			t.Fatalf("%s step: done %v more %v, want %v %v", tier, res.Done, res.More, done, more)
		}
		want := uint64(0)
		if done && !more {
			want = 1
		}
		if d := s.Store().CommitStats().Deferred - d0; d != want {
			t.Fatalf("%s step (done %v, more %v): %d deferred writes committed, want %d", tier, done, more, d, want)
		}
	}
	rng := rand.New(rand.NewSource(9))
	s.Tiers.SetBatch(3) // an STM or MTM step takes up to three pages
	pending()
	o.Page(randomWords(rng, 6), randomWords(rng, 6))
	o.Page(randomWords(rng, 6), randomWords(rng, 6))
	pending(tiers.STM)
	step(tiers.STM, true, false)
	step(tiers.STM, false, false)
	pending()
	// Past the STM's capacity pages move on to the MTM's inbox, read from
	// where its reads began (the consumed entries are never seen).
	for range 9 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	step(tiers.STM, true, true)
	step(tiers.STM, true, true)
	step(tiers.STM, true, false)
	pending(tiers.MTM)
	step(tiers.MTM, true, true) // three of the four pages handed on
	step(tiers.MTM, true, false)
	pending()
	// Settle's caller waits for every step: none is deferred.
	o.Page(randomWords(rng, 6), randomWords(rng, 6))
	d0 := s.Store().CommitStats().Deferred
	if ev := memorytest.Settle(t, s, o.Sona); count(ev, tiers.PageAdded) != 1 {
		t.Fatalf("settle: events %v", ev)
	}
	if d := s.Store().CommitStats().Deferred - d0; d != 0 {
		t.Fatalf("settle: %d deferred writes committed, want none", d)
	}
}

// The document frequencies of a sona's mid-term pages, read through the
// cache (the MTM steps weigh each page's words with them and count the
// page in), are the number of pages that hold each word — as stored and
// as cached — with words shared by many pages.
func TestDocFreqsCachedAndCounted(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(5))
	vocabulary := []string{"garden", "violin", "harbour", "lantern", "orchard", "meadow", "pottery", "canyon"}
	words := func() string {
		var out []string
		for range 4 {
			out = append(out, vocabulary[rng.Intn(len(vocabulary))])
		}
		return strings.Join(out, " ")
	}
	check := func(when string) {
		t.Helper()
		stored, cached, counted, err := s.Tiers.DocFreqs(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if len(counted) == 0 || !reflect.DeepEqual(stored, counted) {
			t.Fatalf("%s: stored %v, the pages hold %v", when, stored, counted)
		}
		if len(cached) == 0 {
			t.Fatalf("%s: nothing cached", when)
		}
		for k, n := range cached {
			if stored[k] != n {
				t.Fatalf("%s: %q cached as %d, stored as %d", when, k, n, stored[k])
			}
		}
	}
	for range 16 {
		o.Page(words(), words())
	}
	memorytest.Settle(t, s, o.Sona)
	check("after 16 pages")
	vecs, _ := s.Embed(context.Background(), "garden violin")
	if _, err := s.Tiers.Recall(o.Sona, "garden violin", vecs[0], 0); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		o.Page(words(), words())
	}
	memorytest.Settle(t, s, o.Sona)
	check("after 8 more")
}

// The tier records read on every step and retrieval — the STM and MTM
// states, the persona, the counters, the inboxes — are read through
// caches that the commits keep current: what they hold is what is stored
// (a record absent, as absent; an inbox's entries, as they come and go)
// after pages, steps, retrievals, a reopen and a forget of the sona's
// memories, and the steps and retrievals read them.
func TestTierRecordsCachedAsStored(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(dir), clk)
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(11))
	recall := func(s *memory.Self) {
		t.Helper()
		vecs, _ := s.Embed(context.Background(), "a question")
		if _, err := s.Tiers.Recall(o.Sona, "a question", vecs[0], 0); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *memory.Self, when string) store.CacheStats {
		t.Helper()
		stored, cached, reads, err := s.Tiers.TierRecords(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if len(cached) == 0 {
			t.Fatalf("%s: nothing cached", when)
		}
		for k, v := range cached {
			if w, ok := stored[k]; ok != (v != nil) || !bytes.Equal(v, w) {
				t.Fatalf("%s: %q cached as %x (held %v), stored as %x (held %v)", when, k, v, v != nil, w, ok)
			}
		}
		inStore, inCache, err := s.Tiers.TierInboxes(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		for tier, seqs := range inCache {
			if !slices.Equal(seqs, inStore[tier]) {
				t.Fatalf("%s: %s inbox cached as %v, stored as %v", when, tier, seqs, inStore[tier])
			}
		}
		return reads
	}
	// Pages waiting: a retrieval reads (and caches) the STM's inbox, the
	// next pages patch it in, the steps take them out.
	for range 5 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	recall(s)
	for range 3 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	check(s, "8 pages waiting")
	if _, inCache, _ := s.Tiers.TierInboxes(o.Sona); len(inCache[tiers.STM]) != 8 {
		t.Fatalf("the STM's inbox of 8 pages cached as %v", inCache[tiers.STM])
	}
	memorytest.Settle(t, s, o.Sona)
	check(s, "8 pages stepped through")
	for range 12 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	memorytest.Settle(t, s, o.Sona)
	recall(s)
	if reads := check(s, "after 12 pages"); reads.Hits == 0 {
		t.Fatalf("the steps and the retrieval read no cached record: %+v", reads)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, memorytest.Config(dir), clk)
	defer s.Close()
	recall(s)
	o.S = s
	for range 4 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	memorytest.Settle(t, s, o.Sona)
	check(s, "reopened, 4 pages more")
	if _, err := s.Forget.Forget(context.Background(), forget.Request{Selector: forget.Selector{Sona: o.Sona}}); err != nil {
		t.Fatal(err)
	}
	recall(s)
	check(s, "after a forget of the sona's memories")
}

// A retrieval's visit writes the segment's visit record alone — not its
// header, embedding and all — and every reader sees the visits: the
// stored segments, the cache, the heat. A later write of the header
// keeps them.
func TestVisitsWriteTheirRecordAlone(t *testing.T) {
	clock, s, o, rng := threeSegments(t)
	headers, visits, err := s.Tiers.SegmentRecords(o.Sona)
	if err != nil || len(headers) != 3 || len(visits) != 0 {
		t.Fatalf("before any visit: %d headers, %d visit records (%v)", len(headers), len(visits), err)
	}
	for round := 1; round <= 2; round++ {
		clock.Advance(time.Minute)
		if _, err := s.Tiers.VisitSegments(context.Background(), o.Sona, []uint64{1, 3}, clock.Now().Unix()); err != nil {
			t.Fatal(err)
		}
		after, visits, err := s.Tiers.SegmentRecords(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		for id, h := range headers {
			if !bytes.Equal(after[id], h) {
				t.Fatalf("round %d: segment %d's header rewritten by a visit", round, id)
			}
		}
		if len(visits) != 2 || len(visits[1]) != 16 || len(visits[3]) != 16 {
			t.Fatalf("round %d: visit records %v", round, visits)
		}
		stored, err := s.Tiers.StoredSegments(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range stored {
			want := uint64(round)
			if seg.ID == 2 {
				want = 0
			}
			if seg.NVisit != want || want > 0 && seg.LastAccess != clock.Now().Unix() {
				t.Fatalf("round %d: segment %d read with %d visits, last %d", round, seg.ID, seg.NVisit, seg.LastAccess)
			}
		}
		if _, err := s.Tiers.Recall(o.Sona, "anything", nil, 0); err != nil {
			t.Fatal(err)
		}
		if cached := s.Tiers.CachedSegments(o.Sona); !reflect.DeepEqual(cached, stored) {
			t.Fatalf("round %d: cached %+v, stored %+v", round, cached, stored)
		}
	}
	// Pages join the segments: their headers are written again, with the
	// visits the records hold.
	for range 6 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	memorytest.Settle(t, s, o.Sona)
	stored, err := s.Tiers.StoredSegments(o.Sona)
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range stored {
		if want := map[uint64]uint64{1: 2, 3: 2}[seg.ID]; seg.NVisit != want {
			t.Fatalf("after more pages: segment %d has %d visits, want %d", seg.ID, seg.NVisit, want)
		}
	}
	if cached := s.Tiers.CachedSegments(o.Sona); !reflect.DeepEqual(cached, stored) {
		t.Fatalf("after more pages: cached %+v, stored %+v", cached, stored)
	}
}

// threeSegments opens a self whose sona "a" has ten random pages, settled:
// seven in the STM, three in as many MTM segments.
func threeSegments(t *testing.T) (*clock.Fake, *memory.Self, *memorytest.Owner, *rand.Rand) {
	t.Helper()
	clk := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clk)
	t.Cleanup(func() { s.Close() })
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(4))
	for range 10 {
		o.Page(randomWords(rng, 6), randomWords(rng, 6))
	}
	memorytest.Settle(t, s, o.Sona)
	return clk, s, o, rng
}

// A retrieval shows the newest stm_pages of the STM's pages, those still
// in its inbox included, and decodes no more of the inbox than those: a
// sona advanced faster than its STM steps gathers a backlog there, and a
// retrieval's work does not grow with it (issue 15, stop 102).
func TestRecallReadsTheTailOfTheSTMBacklog(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	t.Cleanup(func() { s.Close() })
	o := memorytest.NewOwner(t, s, "a")
	rng := rand.New(rand.NewSource(5))
	pages := func(n int) {
		for range n {
			o.Page(randomWords(rng, 6), randomWords(rng, 6))
		}
	}
	vecs, _ := s.Embed(context.Background(), "a question")
	recall := func() *tiers.Recall {
		t.Helper()
		r, err := s.Tiers.Recall(o.Sona, "a question", vecs[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	check := func(when string, pending int) float64 {
		t.Helper()
		v, err := s.Tiers.View(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Stm.Pending) != pending {
			t.Fatalf("%s: %d pages pending, want %d", when, len(v.Stm.Pending), pending)
		}
		all := append(v.Stm.Pages, v.Stm.Pending...)
		want := all[max(0, len(all)-cfg.Tiers.STMPages):]
		got := recall().STM
		if len(got) != len(want) {
			t.Fatalf("%s: %d STM pages retrieved, want %d", when, len(got), len(want))
		}
		for i := range want {
			if got[i].Page.Seq != want[i].Seq {
				t.Fatalf("%s: STM page %d retrieved is page %d, want %d", when, i, got[i].Page.Seq, want[i].Seq)
			}
		}
		return testing.AllocsPerRun(5, func() { recall() })
	}
	pages(3)
	memorytest.Settle(t, s, o.Sona)
	pages(10)
	few := check("10 pending", 10)
	pages(400)
	many := check("410 pending", 410)
	if many > few+100 {
		t.Fatalf("a retrieval allocated %.0f times with 410 pages pending, %.0f with 10: it decodes the backlog", many, few)
	}
}

// A retrieval ranks the pages of the segments it selects as TopPages
// ranks them decoded — but of a segment longer than tiers.segment_pages
// only its newest that many (a segment grows with every page that joins
// it).
func TestRecallRanksTheNewestPagesOfItsSegments(t *testing.T) {
	topics := [][]string{
		{"garden", "tulip", "compost", "seedling", "shovel", "hedge"},
		{"violin", "concert", "orchestra", "rehearsal", "melody", "cello"},
	}
	for _, limit := range []int{256, 4} {
		cfg := memorytest.Config(t.TempDir())
		cfg.Tiers.SegmentPages = limit
		s := memorytest.Open(t, cfg, clock.NewFake(memorytest.Epoch))
		o := memorytest.NewOwner(t, s, "a")
		rng := rand.New(rand.NewSource(11))
		say := func(words []string) string { return topicSentence(rng, "We talked about the ", words, 4) }
		for i := range 47 {
			topic := topics[(i/10)%len(topics)]
			o.Page(fmt.Sprintf("%s (%d)", say(topic), i), fmt.Sprintf("%s (%d)", say(topic), i))
		}
		memorytest.Settle(t, s, o.Sona)
		long, bounded := 0, false
		for q := range 20 {
			query := say(topics[q%len(topics)])
			vecs, err := s.Embed(context.Background(), query)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Tiers.Recall(o.Sona, query, vecs[0], 10)
			if err != nil {
				t.Fatal(err)
			}
			var cands, all []*messages.Page
			for _, seg := range r.Segments {
				ps, err := s.Tiers.SegmentPages(o.Sona, seg)
				if err != nil {
					t.Fatal(err)
				}
				long = max(long, len(ps))
				all = append(all, ps...)
				cands = append(cands, ps[max(0, len(ps)-limit):]...)
			}
			want := tiers.TopPages(cands, vecs[0], 10)
			if len(r.MTM) != len(want) || len(want) == 0 {
				t.Fatalf("limit %d, query %q: %d pages retrieved, want %d", limit, query, len(r.MTM), len(want))
			}
			for i, w := range want {
				if got := r.MTM[i]; got.Page.Seq != cands[w.Index].Seq || got.Score != w.Score || got.Page.Q != cands[w.Index].Q {
					t.Fatalf("limit %d, query %q: page %d retrieved is %d (%v), want %d (%v)", limit, query, i, got.Page.Seq, got.Score, cands[w.Index].Seq, w.Score)
				}
			}
			if unbounded := tiers.TopPages(all, vecs[0], 10); all[unbounded[0].Index].Seq != r.MTM[0].Page.Seq {
				bounded = true
			}
		}
		if long <= 4 || bounded != (limit == 4) {
			t.Fatalf("limit %d: segments of up to %d pages; the bound changed what was retrieved: %v", limit, long, bounded)
		}
		s.Close()
	}
}

// topicSentence is lead and n words of a topic drawn by rng, joined by
// "and the".
func topicSentence(rng *rand.Rand, lead string, words []string, n int) string {
	var out []string
	for range n {
		out = append(out, words[rng.Intn(len(words))])
	}
	return lead + strings.Join(out, " and the ") + "."
}

// stepUntilDone steps tier of sona with m until a step finds no work,
// and returns the steps' events (their sona left out: each run's is new),
// each step's More and how many steps failed (a few at most).
func stepUntilDone(t *testing.T, s *memory.Self, sona, tier string, m tiers.Model) (events []tiers.Event, more []bool, failed int) {
	t.Helper()
	for {
		res, err := s.Tiers.Step(context.Background(), sona, tier, m)
		if err != nil {
			if failed++; failed > 10 {
				t.Fatal(err)
			}
			continue
		}
		if !res.Done {
			return events, more, failed
		}
		for _, e := range res.Events {
			e.Sona = ""
			events = append(events, e)
		}
		more = append(more, res.More)
	}
}

// slowModel is the heuristic model taking a while a page, on clk, as a
// provider's does; it notes what it was asked to chain.
type slowModel struct {
	tiers.Heuristic
	clk   *clock.Fake
	took  time.Duration
	asked *[]string
	fail  *uint64
}

func (m slowModel) Chain(ctx context.Context, in tiers.ChainInput) (*messages.MetaChain, error) {
	m.clk.Advance(m.took)
	var prev []uint64
	for _, p := range in.Prev {
		prev = append(prev, p.Page.Seq)
	}
	*m.asked = append(*m.asked, fmt.Sprintf("page %d after %v: similarity %.6f, threshold %.6f", in.Page.Page.Seq, prev, in.Similarity, in.Threshold))
	return m.Heuristic.Chain(ctx, in)
}

// PageKeywords notes the page's words' counts asked for, and how many
// pages they are of.
func (m slowModel) PageKeywords(ctx context.Context, in tiers.KeywordInput) ([]tiers.Keyword, error) {
	m.clk.Advance(m.took)
	var dfs []string
	for _, t := range tiers.ContentWords(in.Page.Text()) {
		dfs = append(dfs, fmt.Sprintf("%s %d", t, in.DF(t)))
	}
	*m.asked = append(*m.asked, fmt.Sprintf("keywords of page %d of %d: %v", in.Page.Page.Seq, in.N, dfs))
	return m.Heuristic.PageKeywords(ctx, in)
}

// Digest notes the segment it was asked to summarise, and fails once on
// the page *m.fail (0: none).
func (m slowModel) Digest(ctx context.Context, in tiers.DigestInput) (string, []string, error) {
	m.clk.Advance(m.took)
	if m.fail != nil && *m.fail == in.Page.Page.Seq {
		*m.fail = 0
		return "", nil, errors.New("the provider is down")
	}
	seg := in.Segment
	*m.asked = append(*m.asked, fmt.Sprintf("digest of segment %d (%d pages, %v, %q) with page %d", seg.ID, seg.PageCount, seg.Keywords, seg.Summary, in.Page.Page.Seq))
	return m.Heuristic.Digest(ctx, in)
}

// An MTM step takes the oldest pages of its inbox, up to its batch, and
// leaves the tiers as steps of one page each would: each page weighed by
// the counts of its words among the pages before it, placed among the
// segments those left, the coldest segments evicted past capacity, the hot
// ones promoted to the LPM with their pages, the same events in the same
// order. A page the model fails on ends the step, the pages before it
// committed; a model that takes long a page (a provider's) is given one
// page a step.
func TestMTMStepsTakeBatchesAsPagesOneByOne(t *testing.T) {
	type outcome struct {
		view   *messages.Tiers
		mtm    *messages.MtmState
		dfs    map[string]uint64
		stored map[uint64]int // pages stored, by segment
		events []tiers.Event
		more   []bool // each step's More
		failed int    // steps that failed
		asked  []string
	}
	topics := [][]string{
		{"garden", "tulip", "compost", "seedling", "shovel"},
		{"violin", "concert", "orchestra", "rehearsal", "melody"},
		{"harbour", "sailboat", "anchor", "lighthouse", "tide"},
		{"pottery", "kiln", "glaze", "clay", "wheel"},
		{"canyon", "trail", "summit", "backpack", "ridge"},
	}
	run := func(batch int, took time.Duration, fail uint64) outcome {
		t.Helper()
		clk := clock.NewFake(memorytest.Epoch)
		cfg := memorytest.Config(t.TempDir())
		cfg.Tiers.MTMSegments = 3 // five topics: the coldest evicted
		s := memorytest.Open(t, cfg, clk)
		defer s.Close()
		o := memorytest.NewOwner(t, s, "a")
		rng := rand.New(rand.NewSource(8))
		say := func(words []string) string { return topicSentence(rng, "I like the ", words, 5) }
		for i := range 47 {
			topic := topics[(i/4)%len(topics)] // runs of four pages on a topic
			o.Page(say(topic), say(topic))
		}
		// The STM hands its pages past capacity on to the MTM; none stepped yet.
		for {
			res, err := s.Tiers.Step(context.Background(), o.Sona, tiers.STM, tiers.Heuristic{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Done {
				break
			}
		}
		s.Tiers.SetBatch(batch)
		var out outcome
		m := slowModel{clk: clk, took: took, asked: &out.asked, fail: &fail}
		out.events, out.more, out.failed = stepUntilDone(t, s, o.Sona, tiers.MTM, m)
		var err error
		if out.view, err = s.Tiers.View(o.Sona); err != nil {
			t.Fatal(err)
		}
		if out.mtm, err = s.Tiers.MTMState(o.Sona); err != nil {
			t.Fatal(err)
		}
		out.mtm.Version = 0 // a step's, not a page's
		stored, _, _, err := s.Tiers.DocFreqs(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if out.stored, err = s.Tiers.MTMPagesStored(o.Sona); err != nil {
			t.Fatal(err)
		}
		out.dfs = map[string]uint64{}
		for k, n := range stored { // by term: each run's sona is new
			out.dfs[k[strings.Index(k, o.Sona)+len(o.Sona):]] = n
		}
		return out
	}
	one := run(1, 0, 0)
	merged, evicted, promoted := count(one.events, tiers.SegmentMerged), count(one.events, tiers.SegmentEvicted), count(one.events, tiers.SegmentPromoted)
	if len(one.more) != 40 || one.mtm.Pages != 40 || merged == 0 || evicted == 0 || promoted == 0 || len(one.view.Mtm.Promoting) == 0 {
		t.Fatalf("one page a step: %d steps, %d pages, %d merged, %d evicted, %d promoted, %d promotions waiting", len(one.more), one.mtm.Pages, merged, evicted, promoted, len(one.view.Mtm.Promoting))
	}
	ones := map[time.Duration]outcome{0: one}
	for _, c := range []struct {
		batch  int
		took   time.Duration
		fail   uint64 // the page whose digest fails once
		more   []bool
		failed int
	}{
		{16, 0, 0, []bool{true, true, false}, 0},
		{32, 0, 0, []bool{true, false}, 0},
		{64, 0, 0, []bool{false}, 0},
		{16, 0, 4, []bool{true, true, true, false}, 0},                     // the fourth page: three pages a step, then on
		{16, 0, 1, []bool{true, true, false}, 1},                           // the first page: the step fails
		{16, 10 * time.Millisecond, 0, slices.Repeat([]bool{true}, 13), 0}, // 3 pages in 50 ms
		{16, time.Second, 0, slices.Repeat([]bool{true}, 39), 0},
	} {
		one, ok := ones[c.took] // the pages' times as the model's take them
		if !ok {
			one = run(1, c.took, 0)
			ones[c.took] = one
		}
		got := run(c.batch, c.took, c.fail)
		if c.took > 0 {
			c.more = append(c.more, false)
		}
		if !slices.Equal(got.more, c.more) || got.failed != c.failed {
			t.Fatalf("batch %d, %v a page, failing at page %d: steps said more %v, %d failed; want %v, %d", c.batch, c.took, c.fail, got.more, got.failed, c.more, c.failed)
		}
		if !proto.Equal(got.view, one.view) || !proto.Equal(got.mtm, one.mtm) || !maps.Equal(got.dfs, one.dfs) || !maps.Equal(got.stored, one.stored) {
			t.Fatalf("batch %d, %v a page, failing at page %d: the tiers differ from one page a step's:\n%v\n%v\n%v\n%v\n%v\n%v\n%v\n%v", c.batch, c.took, c.fail, got.view, one.view, got.mtm, one.mtm, got.dfs, one.dfs, got.stored, one.stored)
		}
		asked := one.asked
		if c.fail != 0 { // the failed page's keywords asked for twice, alike
			i := slices.IndexFunc(asked, func(a string) bool { return strings.HasPrefix(a, fmt.Sprintf("keywords of page %d of ", c.fail)) })
			asked = slices.Insert(slices.Clone(asked), i, asked[i])
		}
		if !slices.Equal(got.asked, asked) {
			t.Fatalf("batch %d, %v a page, failing at page %d: the model was asked\n%s\nwant\n%s", c.batch, c.took, c.fail, strings.Join(got.asked, "\n"), strings.Join(asked, "\n"))
		}
		if !slices.Equal(got.events, one.events) {
			t.Fatalf("batch %d, %v a page, failing at page %d: events %v, want %v", c.batch, c.took, c.fail, got.events, one.events)
		}
	}
}

// An STM step takes the oldest pages of its inbox, up to its batch, and
// leaves the tiers as steps of one page each would: the same STM pages
// with the same meta chains and similarity statistics, the same pages
// handed on to the MTM, the same events in the same order. A model that
// takes long a page (a provider's) is given one page a step.
func TestSTMStepsTakeBatchesAsPagesOneByOne(t *testing.T) {
	type outcome struct {
		view   *messages.Tiers
		stm    *messages.StmState
		events []tiers.Event
		more   []bool // each step's More
		asked  []string
	}
	run := func(batch int, took time.Duration) outcome {
		t.Helper()
		clk := clock.NewFake(memorytest.Epoch)
		s := memorytest.Open(t, memorytest.Config(t.TempDir()), clk)
		defer s.Close()
		s.Tiers.SetBatch(batch)
		o := memorytest.NewOwner(t, s, "a")
		rng := rand.New(rand.NewSource(3))
		for range 20 {
			o.Page(randomWords(rng, 6), randomWords(rng, 6))
		}
		var out outcome
		var failed int
		if out.events, out.more, failed = stepUntilDone(t, s, o.Sona, tiers.STM, slowModel{clk: clk, took: took, asked: &out.asked}); failed != 0 {
			t.Fatalf("%d steps failed", failed)
		}
		var err error
		if out.view, err = s.Tiers.View(o.Sona); err != nil {
			t.Fatal(err)
		}
		if out.stm, err = s.Tiers.StoredSTM(o.Sona); err != nil {
			t.Fatal(err)
		}
		out.stm.Version = 0 // a step's, not a page's
		return out
	}
	one := run(1, 0)
	if len(one.more) != 20 || len(one.view.Stm.Pages) != 7 || len(one.view.Mtm.Pending) != 13 || one.stm.SimN != 19 {
		t.Fatalf("one page a step: %d steps, %d STM pages, %d handed on, %d similarities", len(one.more), len(one.view.Stm.Pages), len(one.view.Mtm.Pending), one.stm.SimN)
	}
	for _, c := range []struct {
		batch int
		took  time.Duration
		more  []bool
	}{
		{8, 0, []bool{true, true, false}},
		{32, 0, []bool{false}},
		{8, 10 * time.Millisecond, []bool{true, true, true, false}}, // 5 pages in 50 ms
		{8, time.Second, slices.Repeat([]bool{true}, 19)},
	} {
		got := run(c.batch, c.took)
		if c.took == time.Second {
			c.more = append(c.more, false)
		}
		if !slices.Equal(got.more, c.more) {
			t.Fatalf("batch %d, %v a page: steps said more %v, want %v", c.batch, c.took, got.more, c.more)
		}
		if !proto.Equal(got.view, one.view) || !proto.Equal(got.stm, one.stm) {
			t.Fatalf("batch %d, %v a page: the tiers differ from one page a step's:\n%v\n%v\n%v\n%v", c.batch, c.took, got.view, one.view, got.stm, one.stm)
		}
		if !slices.Equal(got.asked, one.asked) {
			t.Fatalf("batch %d, %v a page: the model was asked\n%s\nwant\n%s", c.batch, c.took, strings.Join(got.asked, "\n"), strings.Join(one.asked, "\n"))
		}
		if !slices.Equal(got.events, one.events) {
			t.Fatalf("batch %d, %v a page: events %v, want %v", c.batch, c.took, got.events, one.events)
		}
	}
}

// Visits recorded together (RecordVisits, as the mtm actor records those
// waiting) leave the segments as visits recorded one after the other do:
// their visit counts and last accesses, the same promotions handed to the
// LPM, the visits' events in order.
func TestVisitsRecordedTogetherAsOneByOne(t *testing.T) {
	type outcome struct {
		view   *messages.Tiers
		events []tiers.Event
	}
	visits := []tiers.Visits{{IDs: []uint64{1}}, {IDs: []uint64{1, 3}}, {IDs: nil}, {IDs: []uint64{2, 1}}, {IDs: []uint64{1}}, {IDs: []uint64{1, 2}}, {IDs: []uint64{1}}, {IDs: []uint64{3, 1}}}
	run := func(together bool) outcome {
		t.Helper()
		clk, s, o, _ := threeSegments(t)
		for i := range visits {
			visits[i].At = clk.Now().Unix() + int64(60*i)
		}
		var out outcome
		keep := func(res tiers.Step, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Events {
				e.Sona = ""
				out.events = append(out.events, e)
			}
		}
		if together {
			keep(s.Tiers.RecordVisits(context.Background(), o.Sona, visits))
		} else {
			for _, v := range visits {
				keep(s.Tiers.VisitSegments(context.Background(), o.Sona, v.IDs, v.At))
			}
		}
		clk.Set(time.Unix(visits[len(visits)-1].At, 0))
		var err error
		if out.view, err = s.Tiers.View(o.Sona); err != nil {
			t.Fatal(err)
		}
		return out
	}
	one, together := run(false), run(true)
	if n := count(one.events, tiers.SegmentVisited); n != 11 || count(one.events, tiers.SegmentPromoted) == 0 || len(one.view.Mtm.Promoting) == 0 {
		t.Fatalf("one by one: %d visits, events %v, %d promotions waiting", n, one.events, len(one.view.Mtm.Promoting))
	}
	if !proto.Equal(together.view, one.view) {
		t.Fatalf("recorded together:\n%v\none by one:\n%v", together.view, one.view)
	}
	var visitsOf = func(es []tiers.Event) []tiers.Event {
		return slices.DeleteFunc(slices.Clone(es), func(e tiers.Event) bool { return e.Kind != tiers.SegmentVisited })
	}
	if !slices.Equal(visitsOf(together.events), visitsOf(one.events)) {
		t.Fatalf("visit events %v, want %v", visitsOf(together.events), visitsOf(one.events))
	}
}

// A retrieval's persona is decoded once for each record: the same persona
// read after read while the record stays, a new one once a promotion
// rewrites it, each what the record decodes to, the one before let go at
// the promotion's commit; a retrieval, which cuts its persona's lists,
// leaves the shared one as it was.
func TestRetrievalsSharePersonaDecodedOnceARecord(t *testing.T) {
	_, s, o := withFullSTM(t)
	empty, err := s.Tiers.SharedPersona(o.Sona)
	if err != nil || len(empty.User.Knowledge) != 0 {
		t.Fatalf("a sona without a persona: %v, %v", empty, err)
	}
	check := func(when string) *tiers.Persona {
		t.Helper()
		p, err := s.Tiers.SharedPersona(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.Tiers.SharedPersona(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := s.Tiers.StoredPersona(o.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if p != again || !reflect.DeepEqual(p, stored) {
			t.Fatalf("%s: the shared persona %p, then %p, decoded again, or not the record's: %+v, want %+v", when, p, again, p, stored)
		}
		return p
	}
	var first *tiers.Persona
	for i, promoted := 0, 0; promoted < 2; i++ {
		o.Page(fmt.Sprintf("I love my garden and I grow tomatoes and basil there, batch %d.", i),
			fmt.Sprintf("Your garden tomatoes and basil sound great, batch %d.", i))
		if count(memorytest.Settle(t, s, o.Sona), tiers.PersonaUpdated) == 0 {
			continue
		}
		promoted++
		if s.Tiers.PersonaDecoded(o.Sona) {
			t.Fatalf("promotion %d: the persona decoded before it still kept", promoted)
		}
		p := check(fmt.Sprintf("promotion %d", promoted))
		if p == first || len(p.User.Knowledge) == 0 {
			t.Fatalf("promotion %d: the persona before it kept, or no knowledge: %+v", promoted, p)
		}
		first = p
		vecs, _ := s.Embed(context.Background(), "what grows in the garden")
		tr, err := s.Tiers.Recall(o.Sona, "what grows in the garden", vecs[0], 0)
		if err != nil || len(tr.Persona.User.Knowledge) == 0 {
			t.Fatalf("retrieval: %v, %v", tr, err)
		}
		if check("after a retrieval") != p {
			t.Fatal("a retrieval decoded the persona again")
		}
	}
}
