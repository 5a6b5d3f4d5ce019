package actors_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// settledTiers waits until the sona's tiers have no work between them and
// hold pages pages, and returns their state.
func settledTiers(t *testing.T, self *memory.Self, sona string, pages int) *messages.Tiers {
	t.Helper()
	var v *messages.Tiers
	testutil.Eventually(t, fmt.Sprintf("tiers holding %d pages", pages), func() bool {
		var err error
		if v, err = self.Tiers.View(sona); err != nil {
			t.Fatal(err)
		}
		n := len(v.Stm.Pages)
		for _, s := range v.Mtm.Segments {
			n += int(s.PageCount)
		}
		return len(v.Stm.Pending) == 0 && len(v.Mtm.Pending) == 0 && len(v.Mtm.Promoting) == 0 && n == pages
	})
	return v
}

// checkPages checks that the tiers hold every advance's page exactly once,
// (input, response) as the advance answered, and that the STM holds the
// latest stm_pages in the order the responses joined the chain.
func checkPages(t *testing.T, self *memory.Self, sona string, v *messages.Tiers, answered map[string]string, stmPages int) {
	t.Helper()
	held := map[string]string{} // response → input
	add := func(p *messages.Page) {
		if _, ok := held[p.R]; ok {
			t.Fatalf("page %d (%s) held twice", p.Seq, p.R)
		}
		held[p.R] = p.Q
	}
	for _, s := range v.Mtm.Segments {
		for _, p := range s.Pages {
			add(p)
		}
	}
	for _, p := range v.Stm.Pages {
		add(p)
	}
	if fmt.Sprint(held) != fmt.Sprint(answered) {
		t.Fatalf("the tiers hold %d pages %v,\nthe advances answered %d %v", len(held), held, len(answered), answered)
	}
	var responses []string // in chain order
	for _, c := range walkChain(t, self, sona) {
		if _, ok := answered[c.String()]; ok {
			responses = append(responses, c.String())
		}
	}
	latest := responses[max(0, len(responses)-stmPages):]
	if len(v.Stm.Pages) != len(latest) {
		t.Fatalf("STM holds %d pages", len(v.Stm.Pages))
	}
	for i, p := range v.Stm.Pages {
		if p.R != latest[i] {
			t.Fatalf("STM page %d is not the %dth latest response", i, len(latest)-i)
		}
	}
}

// advance runs one advance and records its page.
func advance(t *testing.T, e *env, sona, content string, mu *sync.Mutex, answered map[string]string) error {
	r, err := e.sys.Advance(context.Background(), sona, &messages.ChatRequest{Content: content, Name: "Caroline"})
	if err != nil {
		return err
	}
	mu.Lock()
	answered[r.Response.Cid] = r.Input.Cid
	mu.Unlock()
	return nil
}

var topics = []string{
	"I planted tomatoes and basil in my garden this spring.",
	"My garden tomatoes need more water in the summer heat.",
	"I took the night train from Lisbon to Madrid last week.",
	"The train to Madrid was late but the views were lovely.",
}

func TestAdvancesFillTheTiers(t *testing.T) {
	cfg := testConfig(t.TempDir())
	e := start(t, cfg, nil, actors.TestingKnobs{})
	ctx := context.Background()
	sona, err := e.self.Sonas.Create(ctx, "mel")
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	var mu sync.Mutex
	answered := map[string]string{}
	for i := range n {
		if err := advance(t, e, sona.Uuid, topics[i%len(topics)], &mu, answered); err != nil {
			t.Fatal(err)
		}
	}
	v := settledTiers(t, e.self, sona.Uuid, n)
	checkPages(t, e.self, sona.Uuid, v, answered, cfg.Tiers.STMPages)
	if len(v.Mtm.Segments) == 0 {
		t.Fatal("no MTM segment")
	}
	// Retrieval in later advances visits segments and the prompt carries
	// the tiers; the query path reads them too.
	if _, err := e.sys.Query(ctx, sona.Uuid, &messages.ChatRequest{Content: "tomatoes in the garden"}); err != nil {
		t.Fatal(err)
	}
}

// TestKillingTierActorsLosesNoPage crashes the mtm actor before and after
// steps (after: the step committed, its result not yet passed on) and the
// stm actor once, while advances stream in: every page still arrives
// exactly once, and the chain is untouched.
func TestKillingTierActorsLosesNoPage(t *testing.T) {
	cfg := testConfig(t.TempDir())
	var (
		mu    sync.Mutex
		calls = map[string]int{}
		kills = map[string]int{}
	)
	knobs := actors.TestingKnobs{TierStep: func(_, tier, when string) {
		mu.Lock()
		defer mu.Unlock()
		key := tier + " " + when
		calls[key]++
		// A step takes the pages waiting: a few steps in all.
		kill := (key == "mtm before" && calls[key]%2 == 0) || (key == "mtm after" && calls[key]%2 == 1) ||
			(key == "stm after" && calls[key] == 2)
		if kill && kills[tier] < 4 {
			kills[tier]++
			panic("injected tier crash: " + key)
		}
	}}
	e := start(t, cfg, nil, knobs)
	ctx := context.Background()
	sona, err := e.self.Sonas.Create(ctx, "mel")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	answered := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		if i%5 == 4 {
			wg.Wait() // a few advances at a time
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- advance(t, e, sona.Uuid, topics[i%len(topics)], &mu, answered)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	v := settledTiers(t, e.self, sona.Uuid, n)
	mu.Lock()
	if kills["mtm"] < 3 || kills["stm"] != 1 {
		t.Fatalf("crashes injected: %v", kills)
	}
	mu.Unlock()
	if chain := walkChain(t, e.self, sona.Uuid); len(chain) != 2*n {
		t.Fatalf("chain length %d after %d advances", len(chain), n)
	}
	checkPages(t, e.self, sona.Uuid, v, answered, cfg.Tiers.STMPages)

	// The tiers come back exactly after a restart of the process.
	before, _ := e.self.Tiers.View(sona.Uuid)
	e.close()
	e2 := start(t, cfg, nil, actors.TestingKnobs{})
	after := settledTiers(t, e2.self, sona.Uuid, n)
	for _, v := range []*messages.Tiers{before, after} {
		for _, s := range v.Mtm.Segments {
			s.Heat = 0 // moves with the wall clock
		}
	}
	if fmt.Sprint(after.Stm, after.Mtm.Segments) != fmt.Sprint(before.Stm, before.Mtm.Segments) {
		t.Fatal("tiers changed across a restart")
	}
	if err := advance(t, e2, sona.Uuid, "back again", &mu, answered); err != nil {
		t.Fatal(err)
	}
	checkPages(t, e2.self, sona.Uuid, settledTiers(t, e2.self, sona.Uuid, n+1), answered, cfg.Tiers.STMPages)
}

// A sona's tiers take up the work that waited in their inboxes when the
// sona is activated — here a page handed to the STM while no tier was
// woken, found after a restart by an append, which wakes no tier itself.
func TestActivationTakesUpWaitingTierWork(t *testing.T) {
	cfg := testConfig(t.TempDir())
	e := start(t, cfg, nil, actors.TestingKnobs{})
	ctx := context.Background()
	sona, err := e.self.Sonas.Create(ctx, "mel")
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.sys.Advance(ctx, sona.Uuid, &messages.ChatRequest{Content: topics[0], Name: "Caroline"})
	if err != nil {
		t.Fatal(err)
	}
	settledTiers(t, e.self, sona.Uuid, 1)
	q, a := cid.MustParse(r.Input.Cid), cid.MustParse(r.Response.Cid)
	if err := e.self.Tiers.PushPage(ctx, sona.Uuid, q, a); err != nil {
		t.Fatal(err)
	}
	if pending, err := e.self.Tiers.Pending(sona.Uuid); err != nil || len(pending) != 1 {
		t.Fatalf("pending tiers %q (%v), want the STM", pending, err)
	}
	e.close()

	e2 := start(t, cfg, nil, actors.TestingKnobs{})
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "back again"}}}
	vecs, err := e2.self.Embed(ctx, m.Text())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e2.self.Chains.Prepare(m, vecs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e2.sys.Append(ctx, sona.Uuid, p); err != nil {
		t.Fatal(err)
	}
	settledTiers(t, e2.self, sona.Uuid, 2)
}

// A sona's tier actors start with their first work: a young sona's
// advances give its STM work, its MTM only once the STM overflows; a tier
// started stays (it is not started again for later work), and every
// tier started had work to step through.
func TestTierActorsStartWithTheirFirstWork(t *testing.T) {
	cfg := testConfig(t.TempDir())
	var mu sync.Mutex
	started, stepped := map[string]int{}, map[string]bool{}
	e := start(t, cfg, nil, actors.TestingKnobs{
		TierSpawned: func(_, tier string) {
			mu.Lock()
			defer mu.Unlock()
			started[tier]++
		},
		TierStep: func(_, tier, _ string) {
			mu.Lock()
			defer mu.Unlock()
			stepped[tier] = true
		},
	})
	check := func(when string, want ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, tier := range want {
			if started[tier] != 1 {
				t.Fatalf("%s: the %s actor started %d times, want once (started: %v)", when, tier, started[tier], started)
			}
		}
		for tier, n := range started {
			if n != 1 || !stepped[tier] {
				t.Fatalf("%s: the %s actor started %d times and stepped: %v — a tier starts once, with work", when, tier, n, stepped[tier])
			}
		}
	}
	sona, err := e.self.Sonas.Create(context.Background(), "mel")
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]string{}
	for i := range 2 {
		if err := advance(t, e, sona.Uuid, topics[i], &mu, answered); err != nil {
			t.Fatal(err)
		}
	}
	settledTiers(t, e.self, sona.Uuid, 2)
	check("after two advances", tiers.STM)
	mu.Lock()
	if len(started) != 1 {
		t.Fatalf("after two advances the tier actors started are %v, want the STM's only", started)
	}
	mu.Unlock()
	n := cfg.Tiers.STMPages + 2
	for i := 2; i < n; i++ {
		if err := advance(t, e, sona.Uuid, topics[i%len(topics)], &mu, answered); err != nil {
			t.Fatal(err)
		}
	}
	checkPages(t, e.self, sona.Uuid, settledTiers(t, e.self, sona.Uuid, n), answered, cfg.Tiers.STMPages)
	check("after the STM overflowed", tiers.STM, tiers.MTM)
}
