package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/prompt"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

type env struct {
	self *memory.Self
	sys  *actors.System
}

func testConfig(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Actors.AskTimeout = config.Duration(5 * time.Second)
	cfg.LLM.Timeout = config.Duration(10 * time.Second)
	return cfg
}

func start(t testing.TB, cfg config.Config, model llm.LLM, knobs actors.TestingKnobs) *env {
	t.Helper()
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims)})
	if err != nil {
		t.Fatal(err)
	}
	if model == nil {
		model = llm.NewOffline()
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: model, Config: cfg, Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{self: self, sys: sys}
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.sys != nil {
		e.sys.Stop()
		e.self.Close()
		e.sys = nil
	}
}

// open is the shared setup of the benchmarks: as the server runs, with
// every memory evaluated behind the writes (the heuristic).
func open(t testing.TB, dir string, knobs actors.TestingKnobs) (*memory.Self, *actors.System) {
	cfg := testConfig(dir)
	e := startEvaluated(t, cfg, eumas.NewHeuristic(cfg.Evaluation.Archetypes), knobs)
	return e.self, e.sys
}

// walkChain follows a sona's chain from its head through the ACT blocks
// and returns the memory CIDs in seq order, checking that seq runs from
// length-1 down to 0 without gaps and the chain index agrees.
func walkChain(t *testing.T, self *memory.Self, sona string) []cid.Cid {
	t.Helper()
	rec, err := self.Sonas.Get(sona)
	if err != nil {
		t.Fatal(err)
	}
	mems := make([]cid.Cid, rec.Length)
	if rec.Head == nil {
		if rec.Length != 0 {
			t.Fatalf("no head, length %d", rec.Length)
		}
		return mems
	}
	next, err := cid.Decode(*rec.Head)
	if err != nil {
		t.Fatal(err)
	}
	seq := rec.Length - 1
	for {
		block, err := self.Block(next)
		if err != nil {
			t.Fatal(err)
		}
		act, err := model.DecodeAct(block)
		if err != nil {
			t.Fatal(err)
		}
		if act.Seq != seq || act.Sona != sona {
			t.Fatalf("ACT %s: seq %d sona %s, want seq %d", next, act.Seq, act.Sona, seq)
		}
		if _, err := self.Block(act.Memory); err != nil {
			t.Fatalf("memory of seq %d: %v", seq, err)
		}
		mems[seq] = act.Memory
		if act.Prev == nil {
			if seq != 0 {
				t.Fatalf("chain ends at seq %d", seq)
			}
			break
		}
		next, seq = *act.Prev, seq-1
	}
	page, err := self.Sonas.Chain(sona, 0, int(rec.Length)+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != int(rec.Length) {
		t.Fatalf("chain index has %d entries, chain %d", len(page.Items), rec.Length)
	}
	for _, e := range page.Items {
		if mems[e.Seq] != e.Memory {
			t.Fatalf("chain index seq %d: %s, chain says %s", e.Seq, e.Memory, mems[e.Seq])
		}
	}
	return mems
}

// barrierLLM holds every model call until n calls wait together: the
// steps of a sona then interleave as far as they can (every input is
// stored before any response). A call whose step ends first fails.
type barrierLLM struct {
	n       int32
	entered atomic.Int32
	all     chan struct{}
}

func (b *barrierLLM) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if b.entered.Add(1) == b.n {
		close(b.all)
	}
	select {
	case <-b.all:
	case <-ctx.Done():
		return llm.Response{}, fmt.Errorf("%d of %d steps reached their model call together: %w", b.entered.Load(), b.n, ctx.Err())
	}
	return llm.NewOffline().Complete(ctx, req)
}

func TestConcurrentChatsOneSona(t *testing.T) {
	// Steps sent at once to one sona, whose model calls are held until
	// all of them are in one: the actor takes every step's input while
	// the others think, so the chain interleaves them all (the hardest
	// order to keep), and each response must still follow its own input
	// and link it. Under -race on a busy machine the last waits for all
	// the others, so the step timeout is generous (this is a test of
	// order, not of speed).
	cfg := testConfig(t.TempDir())
	cfg.Actors.AskTimeout = config.Duration(time.Minute)
	const n = 24
	e := start(t, cfg, &barrierLLM{n: n, all: make(chan struct{})}, actors.TestingKnobs{})
	ctx := context.Background()
	sona, err := e.self.Sonas.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	resps := make([]*messages.ChatResponse, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: fmt.Sprintf("message %d about painting the %d fences", i, i)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("chat %d: %v", i, err)
		}
	}
	mems := walkChain(t, e.self, sona.Uuid)
	if len(mems) != 2*n {
		t.Fatalf("chain has %d ACTs, want %d", len(mems), 2*n)
	}
	inChain := map[cid.Cid]int{}
	for seq, c := range mems {
		if _, dup := inChain[c]; dup {
			t.Fatalf("memory %s twice in the chain", c)
		}
		inChain[c] = seq
	}
	for i, r := range resps {
		in, _ := cid.Decode(r.Input.Cid)
		out, _ := cid.Decode(r.Response.Cid)
		si, ok1 := inChain[in]
		so, ok2 := inChain[out]
		if !ok1 || !ok2 {
			t.Fatalf("chat %d: input or response not in the chain", i)
		}
		if so <= si {
			t.Fatalf("chat %d: response at seq %d before its input at %d", i, so, si)
		}
		// Every input came before every response (the barrier).
		if si >= n || so < n {
			t.Fatalf("chat %d: input at seq %d, response at %d: the steps did not interleave", i, si, so)
		}
		// The response's edges support it with its input and what it recalled.
		m, _, err := e.self.Memories.Get(out)
		if err != nil {
			t.Fatal(err)
		}
		linked := map[cid.Cid]bool{}
		for _, edge := range m.Edges {
			linked[edge.Target] = true
		}
		if !linked[in] {
			t.Fatalf("chat %d: response has no edge to its input", i)
		}
		for _, rc := range r.Recalled {
			c, _ := cid.Decode(rc.Cid)
			if !linked[c] {
				t.Fatalf("chat %d: recalled %s is not an edge of the response", i, c)
			}
		}
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	e := start(t, cfg, nil, actors.TestingKnobs{})
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"alice", "bob", "carol"} {
		rec, err := e.self.Sonas.Create(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.Uuid)
		for i := 0; i < 5; i++ {
			if _, err := e.sys.Advance(ctx, rec.Uuid, &messages.ChatRequest{Content: fmt.Sprintf("%s likes topic %d and the colour %d", name, i, i*7)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := func(e *env, id string) []cid.Cid {
		if err := e.self.Text.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		rs, _, err := e.self.Recaller.Recall(ctx, recall.Query{Sona: id, Text: "which colour does she like?", Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []cid.Cid
		for _, r := range rs {
			out = append(out, r.CID)
		}
		return out
	}
	before := map[string]*messages.Sona{}
	recalls := map[string][]cid.Cid{}
	for _, id := range ids {
		before[id], _ = e.self.Sonas.Get(id)
		recalls[id] = q(e, id)
	}
	_, mems := e.self.Counts()
	e.close()

	e2 := start(t, cfg, nil, actors.TestingKnobs{})
	if _, m2 := e2.self.Counts(); m2 != mems {
		t.Fatalf("memories %d after reopen, %d before", m2, mems)
	}
	for _, id := range ids {
		after, err := e2.self.Sonas.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if after.GetHead() != before[id].GetHead() || after.Length != before[id].Length {
			t.Fatalf("sona %s: %v, before %v", id, after, before[id])
		}
		walkChain(t, e2.self, id)
		got := q(e2, id)
		if fmt.Sprint(got) != fmt.Sprint(recalls[id]) {
			t.Fatalf("recall in %s changed:\n%v\n%v", id, got, recalls[id])
		}
	}
	// The chain continues from where it was.
	if _, err := e2.sys.Advance(ctx, ids[0], &messages.ChatRequest{Content: "after the restart"}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := e2.self.Sonas.Get(ids[0]); rec.Length != before[ids[0]].Length+2 {
		t.Fatalf("length %d after one more chat", rec.Length)
	}
}

// TestPanickingSonaRestartsLosingNothing crashes a sona actor in the middle
// of concurrent inserts; the supervisor restarts it, every acknowledged
// memory is in the chain, and the chain stays linear.
func TestPanickingSonaRestartsLosingNothing(t *testing.T) {
	var crashes atomic.Int32
	knobs := actors.TestingKnobs{BeforeAppend: func(_ string, seq int64) {
		if (seq == 17 || seq == 41) && crashes.Add(1) <= 2 {
			panic(fmt.Sprintf("injected crash at seq %d", seq))
		}
	}}
	cfg := testConfig(t.TempDir())
	// The crashed request's caller waits this long; the others must not
	// time out behind the restarts on a loaded machine.
	cfg.Actors.AskTimeout = config.Duration(10 * time.Second)
	e := start(t, cfg, nil, knobs)
	ctx := context.Background()
	sona, err := e.self.Sonas.Create(ctx, "fragile")
	if err != nil {
		t.Fatal(err)
	}
	const n = 80
	var wg sync.WaitGroup
	acked := make([]cid.Cid, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("fact number %d", i)}}}
			vecs, err := e.self.Embed(ctx, m.Text())
			if err != nil {
				t.Error(err)
				return
			}
			p, err := e.self.Chains.Prepare(m, vecs[0], nil)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := e.sys.Append(ctx, sona.Uuid, p); err == nil {
				acked[i] = p.CID
			}
		}()
	}
	wg.Wait()
	if crashes.Load() < 1 {
		t.Fatal("no crash was injected")
	}
	// The restarted actor keeps serving; its answer also means every
	// append queued before it (a timed-out caller's too) is committed, so
	// the chain is read at rest.
	if _, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "still there?"}); err != nil {
		t.Fatal(err)
	}
	mems := walkChain(t, e.self, sona.Uuid)
	inChain := map[cid.Cid]bool{}
	for _, c := range mems {
		inChain[c] = true
	}
	nacked := 0
	for i, c := range acked {
		if !c.Defined() {
			continue
		}
		nacked++
		if !inChain[c] {
			t.Fatalf("acknowledged memory %d (%s) is not in the chain", i, c)
		}
	}
	if nacked < n-int(crashes.Load()) {
		t.Fatalf("only %d of %d inserts acknowledged with %d crashes", nacked, n, crashes.Load())
	}
}

func TestIdleSonasPassivateAndReactivate(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.Heartbeat.Interval = config.Duration(24 * time.Hour) // no tick in the way
	clock := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := startClocked(t, cfg, clock, actors.TestingKnobs{})
	ctx := context.Background()
	// Several sonas, each with a step behind it (its tiers had work too),
	// passivate together; each comes back with its chain.
	const sonas = 8
	var ids []string
	for i := 0; i < sonas; i++ {
		rec, _ := e.self.Sonas.Create(ctx, fmt.Sprintf("s%d", i))
		ids = append(ids, rec.Uuid)
		if _, err := e.sys.Advance(ctx, rec.Uuid, &messages.ChatRequest{Content: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.sys.ActiveSonas(); err != nil || n != sonas {
		t.Fatalf("%d sonas active before their idle time (%v)", n, err)
	}
	testutil.Eventually(t, "all sonas passivated", func() bool {
		clock.Advance(cfg.Actors.SonaIdle.D())
		n, err := e.sys.ActiveSonas()
		return err == nil && n == 0
	})
	for _, id := range ids {
		if _, err := e.sys.Advance(ctx, id, &messages.ChatRequest{Content: "back again"}); err != nil {
			t.Fatal(err)
		}
		if rec, _ := e.self.Sonas.Get(id); rec.Length != 4 {
			t.Fatalf("length %d after reactivation", rec.Length)
		}
		walkChain(t, e.self, id)
	}
}

// gatedLLM blocks every call until released, so a test can hold a sona in
// the middle of its model call.
type gatedLLM struct {
	entered  chan struct{}
	release  chan struct{}
	returned chan struct{} // when set, told as each call returns
	fail     error
}

func (g *gatedLLM) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	g.entered <- struct{}{}
	if g.returned != nil {
		defer func() { g.returned <- struct{}{} }()
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return llm.Response{}, ctx.Err()
	}
	if g.fail != nil {
		return llm.Response{}, g.fail
	}
	return llm.NewOffline().Complete(ctx, req)
}

func TestModelCallDoesNotBlockTheSona(t *testing.T) {
	gate := &gatedLLM{entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := start(t, testConfig(t.TempDir()), gate, actors.TestingKnobs{})
	ctx := context.Background()
	sona, _ := e.self.Sonas.Create(ctx, "busy")
	done := make(chan error, 1)
	go func() {
		_, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "a slow question"})
		done <- err
	}()
	<-gate.entered // the sona is now waiting for its model
	// Reads answer, and the same sona's actor takes another write.
	_, trace, err := e.self.Recaller.Recall(ctx, recall.Query{Sona: sona.Uuid, Text: "question"})
	if err != nil {
		t.Fatal(err)
	}
	trace.Submit(e.self.Store())
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "inserted meanwhile"}}}
	vecs, _ := e.self.Embed(ctx, m.Text())
	p, _ := e.self.Chains.Prepare(m, vecs[0], nil)
	if _, err := e.sys.Append(ctx, sona.Uuid, p); err != nil {
		t.Fatalf("insert while the model thinks: %v", err)
	}
	close(gate.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if mems := walkChain(t, e.self, sona.Uuid); len(mems) != 3 {
		t.Fatalf("chain of %d, want input, insert, response", len(mems))
	}
}

func TestFailedModelCallKeepsTheInput(t *testing.T) {
	gate := &gatedLLM{entered: make(chan struct{}, 1), release: make(chan struct{}), fail: errors.New("provider exploded")}
	close(gate.release)
	e := start(t, testConfig(t.TempDir()), gate, actors.TestingKnobs{})
	ctx := context.Background()
	sona, _ := e.self.Sonas.Create(ctx, "unlucky")
	go func() {
		for range gate.entered {
		}
	}()
	_, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "will this work?"})
	if !errors.Is(err, actors.ErrLLM) {
		t.Fatalf("err = %v, want ErrLLM", err)
	}
	mems := walkChain(t, e.self, sona.Uuid)
	if len(mems) != 1 {
		t.Fatalf("chain of %d after a failed model call, want the input only", len(mems))
	}
	m, _, _ := e.self.Memories.Get(mems[0])
	if m.Text() != "will this work?" {
		t.Fatalf("stored %q", m.Text())
	}
}

// holdCommitter blocks the store's committer until the returned release
// is called: nothing submitted meanwhile becomes durable.
func holdCommitter(t *testing.T, self *memory.Self) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	self.Store().Submit(func(store.Tx) error {
		close(entered)
		<-gate
		return nil
	})
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the committer did not take the blocking op")
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

// TestAdvanceOverlapsTheInputsCommit: an advance goes on to recall and the
// model call while its input's commit is in flight (advance.Append's
// Early), and replies only once the input is durable — a failed model
// call too, whose input is kept.
func TestAdvanceOverlapsTheInputsCommit(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("model fails %v", fail), func(t *testing.T) {
			gate := &gatedLLM{entered: make(chan struct{}, 1), release: make(chan struct{}), returned: make(chan struct{}, 1)}
			if fail {
				gate.fail = errors.New("provider exploded")
			}
			e := start(t, testConfig(t.TempDir()), gate, actors.TestingKnobs{})
			ctx := context.Background()
			sona, _ := e.self.Sonas.Create(ctx, "overlap")
			release := holdCommitter(t, e.self)
			done := make(chan error, 1)
			go func() {
				_, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "is the shed key by the door?"})
				done <- err
			}()
			select {
			case <-gate.entered: // the model is called; the input is not durable yet
			case <-time.After(30 * time.Second):
				t.Fatal("the model was not called while the input's commit was held")
			}
			close(gate.release)
			<-gate.returned
			select {
			case err := <-done:
				t.Fatalf("the advance replied (%v) before its input was durable", err)
			default:
			}
			release()
			err := <-done
			mems := walkChain(t, e.self, sona.Uuid)
			switch {
			case fail && !errors.Is(err, actors.ErrLLM):
				t.Fatalf("err = %v, want ErrLLM", err)
			case fail && len(mems) != 1:
				t.Fatalf("chain of %d after a failed model call, want the input", len(mems))
			case !fail && (err != nil || len(mems) != 2):
				t.Fatalf("err %v, chain of %d, want input and response", err, len(mems))
			}
		})
	}
}

// TestAdvanceWhoseInputFailsFails: when the early input's commit fails
// (here: the disk fills while it waits), the step answers that failure,
// though the model answered, and stores nothing.
func TestAdvanceWhoseInputFailsFails(t *testing.T) {
	cfg := testConfig(t.TempDir())
	var free atomic.Uint64
	free.Store(1 << 40)
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims),
		FreeSpace: func() (uint64, error) { return free.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	gate := &gatedLLM{entered: make(chan struct{}, 1), release: make(chan struct{}), returned: make(chan struct{}, 1)}
	sys, err := actors.Start(actors.Options{Self: self, LLM: gate, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{self: self, sys: sys}
	t.Cleanup(e.close)
	ctx := context.Background()
	sona, _ := self.Sonas.Create(ctx, "full")
	release := holdCommitter(t, self)
	done := make(chan error, 1)
	go func() {
		_, err := sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: "will this be kept?"})
		done <- err
	}()
	select {
	case <-gate.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the model was not called while the input's commit was held")
	}
	free.Store(0) // the input's commit is refused
	release()
	close(gate.release)
	if err := <-done; !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("err = %v, want the input's ErrDiskFull", err)
	}
	free.Store(1 << 40)
	if rec, _ := self.Sonas.Get(sona.Uuid); rec.Length != 0 {
		t.Fatalf("length %d after a step whose input failed", rec.Length)
	}
}

func TestUnknownSona(t *testing.T) {
	e := start(t, testConfig(t.TempDir()), nil, actors.TestingKnobs{})
	_, err := e.sys.Advance(context.Background(), "00000000-0000-0000-0000-000000000000", &messages.ChatRequest{Content: "hi"})
	if !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
}

// An insert through the sona's writer keeps what PrepareInsert found: the
// new memory is associated with its strong neighbours as "similar", and
// the sona's similarity distribution grows, so the dedup threshold leaves
// its bootstrap once the sona has enough memories.
func TestAppendKeepsNeighbours(t *testing.T) {
	e := start(t, testConfig(t.TempDir()), nil, actors.TestingKnobs{})
	ctx := context.Background()
	sona, err := e.self.Sonas.Create(ctx, "gardener")
	if err != nil {
		t.Fatal(err)
	}
	// Memories of different times are never duplicates of each other.
	insert := func(text string, ts int64) (*model.Prepared, *chain.Duplicate) {
		t.Helper()
		p, dup, err := e.self.Chains.PrepareInsert(ctx, sona.Uuid, prompt.TextMemory(text, "user", ts, nil), &messages.MemoryMeta{}, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if dup == nil {
			if _, err := e.sys.Append(ctx, sona.Uuid, p); err != nil {
				t.Fatal(err)
			}
		}
		return p, dup
	}
	crops := []string{"tomatoes", "basil", "peppers", "beans", "lettuce", "carrots", "onions", "garlic", "squash", "peas", "kale", "leeks"}
	var last *model.Prepared
	similar := 0
	for i, c := range crops {
		var dup *chain.Duplicate
		if last, dup = insert(fmt.Sprintf("In week %d I planted %s in the raised garden bed by the fence", i, c), int64(1000+i)); dup != nil {
			t.Fatalf("memory %d deduplicated", i)
		}
		links, err := e.self.Assoc.Associations(last.CID)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Type == assoc.Similar {
				similar++
			}
		}
	}
	if similar == 0 {
		t.Fatal("no similar associations")
	}
	_, dup := insert("In week 11 I planted leeks in the raised garden bed by the fence!", 1011)
	if dup == nil {
		t.Fatal("near-duplicate stored")
	}
	if dup.Existing != last.CID || dup.Threshold.Bootstrap {
		t.Fatalf("duplicate of %s (want %s), threshold %+v: want the live distribution", dup.Existing, last.CID, dup.Threshold)
	}
}
