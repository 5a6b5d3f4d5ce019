package api_test

// The web explorer in a real headless Chromium (Debian's chromium package,
// driven over the DevTools protocol with chromedp) against a real server
// with a populated store. The tests fail — never skip — when no browser is
// installed. Screenshots of every view go to $MEMORIA_UI_SCREENSHOTS (a
// temporary directory otherwise, named in the log).

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/testutil"
)

// chromium finds the browser: $MEMORIA_CHROMIUM, else chromium on $PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("MEMORIA_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: the web explorer's tests drive a real headless browser. " +
		"Install Debian's: apt-get update && apt-get install -y chromium (or set MEMORIA_CHROMIUM to a Chrome or Chromium binary)")
	return ""
}

// browser is one headless Chromium with one tab on the server at base.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string

	mu      sync.Mutex
	console []chromedp.ConsoleMessage
	output  bytes.Buffer
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	b := &browser{t: t, base: base, shots: os.Getenv("MEMORIA_UI_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
		t.Logf("screenshots in %s (set MEMORIA_UI_SCREENSHOTS=DIR to keep them)", b.shots)
	} else {
		if err := os.MkdirAll(b.shots, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshots in %s", b.shots)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // as root in a container
		chromedp.DisableGPU,
		// A closed network: nothing but the server under test.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(syncWriter{&b.mu, &b.output}),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	b.ctx = ctx
	// Console starts the browser and subscribes before the first page.
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.console = append(b.console, m)
			b.mu.Unlock()
		}
	}()
	if err := chromedp.Do(ctx); err != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		t.Fatalf("starting %s: %v\n%s", chromium(t), err, b.output.String())
	}
	return b
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// do runs the steps within a minute; on failure it takes a screenshot
// and fails the test with what the page showed.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.shot("FAILED-" + strings.Map(func(r rune) rune {
		if r == ' ' || r == '/' {
			return '-'
		}
		return r
	}, what))
	text, _ := evalIn[string](b, `document.querySelector('main') ? document.querySelector('main').innerText.slice(0, 2000) : ''`)
	hash, _ := evalIn[string](b, `location.hash`)
	b.t.Fatalf("%s: %v\nat %s, the page shows:\n%s\nconsole: %v", what, err, hash, text, b.messages(nil))
}

// evalIn evaluates a JavaScript expression (promises awaited).
func evalIn[T any](b *browser, js string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	v, err := evalIn[T](b, js)
	if err != nil {
		b.fail("evaluate "+js, err)
	}
	return v
}

// wait polls a JavaScript expression until it is truthy.
func (b *browser) wait(what, js string) {
	b.t.Helper()
	b.do("waiting for "+what, chromedp.Steps(chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))))
}

// open navigates to a view of the UI (a hash route) and waits for it to
// finish loading.
func (b *browser) open(route string) {
	b.t.Helper()
	b.do("opening "+route, chromedp.Navigate(b.base+"/ui/"+route))
	b.settle(route)
}

// goTo follows an in-app route, as a click on a link does.
func (b *browser) goTo(route string) {
	b.t.Helper()
	eval[any](b, fmt.Sprintf(`location.hash = %q, 1`, strings.TrimPrefix(route, "#")))
	b.settle(route)
}

// settle waits until the view of route (a hash, "#/…") has rendered.
func (b *browser) settle(route string) {
	b.t.Helper()
	if !strings.HasPrefix(route, "#") {
		route = "#/" + route
	}
	b.wait(route+" to load", fmt.Sprintf(`document.querySelector('main').dataset.route === %q && location.hash.replace(/^$/, '#/') === %q`, route, route))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("clicking "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	return eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

func (b *browser) attrs(sel, attr string) []string {
	b.t.Helper()
	return eval[[]string](b, fmt.Sprintf(`[...document.querySelectorAll(%q)].map(e => e.getAttribute(%q))`, sel, attr))
}

// shot writes a full-page PNG.
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}

// messages returns the console messages that keep holds.
func (b *browser) messages(keep func(chromedp.ConsoleMessage) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.console {
		if keep == nil || keep(m) {
			out = append(out, fmt.Sprintf("%s (%s:%d)", m.String(), m.URL, m.Line))
		}
	}
	return out
}

// problems are the console's errors, warnings and uncaught exceptions.
func problems(m chromedp.ConsoleMessage) bool {
	return m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException()
}

// TestWebExplorer walks every view of the UI over a populated server:
// sonas, a chain, a memory (its raw block verified, an edge followed),
// the graph, recall with explain bars and time travel, the tiers, the
// backbone (a conflict resolved through the UI), insights, anchors and the
// live metrics — with no console error on the way.
func TestWebExplorer(t *testing.T) {
	h := newHarness(t, quiet)
	populate(t, h) // alice, bob, carol; chats, inserts, a file, anchors, the backbone, a conflict, insights
	alice := ""
	for _, it := range array(t, h.get("/sonas/list?name=alice").obj(t, http.StatusOK)["items"]) {
		alice = str(t, object(t, it)["uuid"])
	}
	late := h.insertText(alice, "The kayak paddles hang on hooks in the garage loft.")
	chain := h.chain(alice)
	if err := h.app.Self.Evals.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	conflicts := h.conflictItems()
	if len(conflicts) != 1 {
		t.Fatalf("want one conflict, have %v", conflicts)
	}
	var conflictID string
	for id := range conflicts {
		conflictID = id
	}

	b := newBrowser(t, h.url)

	// The sonas, then alice's chain.
	b.open("")
	b.wait("alice in the list", fmt.Sprintf(`document.querySelector('tr[data-uuid=%q] a.sona-link')`, alice))
	b.wait("activity", fmt.Sprintf(`document.querySelector('tr[data-uuid=%q] .activity').textContent.startsWith('last active')`, alice))
	b.shot("01-sonas")
	b.do("searching", chromedp.SendKeys(chromedp.CSS("#sona-search"), "bob"))
	if got := b.attrs("tr[data-uuid]", "data-uuid"); len(got) != 1 {
		t.Fatalf("searching “bob” shows %d sonas, want bob alone", len(got))
	}
	eval[any](b, `(() => { const s = document.querySelector('#sona-search'); s.value = ''; s.dispatchEvent(new Event('input')); return 1; })()`)
	b.click(fmt.Sprintf(`tr[data-uuid=%q] a.sona-link`, alice))
	b.settle("#/sona/" + alice)
	shown := b.attrs(".tl-link", "data-cid")
	want := slices.Clone(chain)
	slices.Reverse(want)
	if !slices.Equal(shown, want) {
		t.Fatalf("the timeline shows %d memories %v, want alice's chain newest first %v", len(shown), shown, want)
	}
	b.shot("02-chain")

	// A chat's response: its edges, its evaluation, its block verified.
	response, input := chain[1], chain[0]
	b.click(fmt.Sprintf(`.tl-link[data-cid=%q]`, response))
	b.settle("#/memory/" + response)
	b.wait("the block verification", `document.querySelector('#verify').dataset.result`)
	if r := b.text("#verify-result"); !strings.HasPrefix(r, "✓ verified") || !strings.Contains(r, "SubtleCrypto") {
		t.Fatalf("the response's block: %q", r)
	}
	b.wait("the evaluation", `document.querySelector('.archetype')`)
	b.wait("edge snippets", fmt.Sprintf(`document.querySelector('[data-snippet=%q]').textContent.includes('Maya')`, input))
	b.shot("03-memory")
	b.click(fmt.Sprintf(`a.edge-link[data-target=%q]`, input))
	b.settle("#/memory/" + input)
	if got := b.text("#memory-cid"); got != input {
		t.Fatalf("following the edge to %s shows %s", input, got)
	}
	b.wait("the input's block verification", `document.querySelector('#verify').dataset.result === 'verified'`)

	// A block the server (or anything between) altered is shown as a mismatch.
	b.tamperedBlock(input)

	// The JavaScript SHA-256 (for pages on plain http off loopback, where
	// browsers hide SubtleCrypto) agrees with SubtleCrypto.
	if bad := eval[string](b, `import('/ui/js/cid.js').then(async m => {
		for (const n of [0, 1, 55, 56, 63, 64, 65, 1000, 70000]) {
			const d = new Uint8Array(n).map((_, i) => (i * 131 + 7) & 255);
			const want = m.hex(new Uint8Array(await crypto.subtle.digest('SHA-256', d)));
			if (m.hex(m.sha256js(d)) !== want) return 'length ' + n;
		}
		return '';
	})`); bad != "" {
		t.Fatalf("sha256js differs from SubtleCrypto at %s", bad)
	}

	// The graph around the response, expanded by a click.
	b.goTo("#/graph/" + response)
	before := b.count(".gnode")
	if before < 2 {
		t.Fatalf("the graph around the response has %d nodes", before)
	}
	eval[any](b, fmt.Sprintf(`document.querySelector('.gnode[data-cid=%q]').focus(), 1`, input))
	b.do("expanding by keyboard", chromedp.KeyEvent("\r"))
	b.wait("the input expanded", fmt.Sprintf(`document.querySelector('.gnode[data-cid=%q]').classList.contains('expanded') && document.querySelectorAll('.gnode').length > %d`, input, before))
	b.wait("the panel", `document.querySelector('#graph-open')`)
	b.shot("04-graph")
	b.click("#graph-open")
	b.settle("#/memory/" + input)
	if got := b.text("#memory-cid"); got != input {
		t.Fatalf("opening from the graph shows %s, want %s", got, input)
	}

	// Recall: ranked results with their explain bars, then the same query
	// as of seq 2 of alice's chain, before the kayak was mentioned.
	b.goTo("#/recall?sona=" + alice)
	b.do("asking", chromedp.SendKeys(chromedp.CSS("#recall-query"), "Where are the kayak paddles? Where does Maya live?"), chromedp.Click(chromedp.CSS("#recall-run")))
	b.wait("results", `document.querySelector('.result')`)
	// Each of the two memories answers half the question: their fused
	// scores are within 0.001 of each other, and which one leads moves
	// with their recency (the wall clock's seconds between them), so the
	// order between them is left to recall's own tests.
	ranked := b.attrs(".result", "data-cid")
	if !slices.Contains(ranked, late) || !slices.Contains(ranked, input) {
		t.Fatalf("recall ranks %v, want the kayak memory %s and Maya's %s among them", ranked, late, input)
	}
	if n := b.count(".result .stack .seg"); n < len(ranked) {
		t.Fatalf("%d explain segments for %d results", n, len(ranked))
	}
	ranks := eval[[]string](b, `[...document.querySelectorAll('.hits .result .rank')].map(e => e.textContent)`)
	for i, r := range ranks {
		if r != fmt.Sprintf("#%d", i+1) {
			t.Fatalf("the hits are not in rank order: %v", ranks)
		}
	}
	scores := eval[[]float64](b, `[...document.querySelectorAll('.more .result .score')].map(e => parseFloat(e.textContent))`)
	if !slices.IsSortedFunc(scores, func(a, b float64) int { return cmp.Compare(b, a) }) {
		t.Fatalf("what the hits reached is not ranked by score: %v", scores)
	}
	if len(ranks) == 0 || len(ranks)+len(scores) != len(ranked) {
		t.Fatalf("%d hits and %d more of %d results", len(ranks), len(scores), len(ranked))
	}
	b.shot("05-recall")
	eval[any](b, `(() => { const s = document.querySelector('#recall-asof'); s.value = '2'; s.dispatchEvent(new Event('input')); return 1; })()`)
	b.wait("the as_of label with the step's time", `/^seq 2 · \d{4}-/.test(document.querySelector('#recall-asof-label').textContent)`)
	b.click("#recall-run")
	b.wait("results as of seq 2", `document.querySelector('#recall-results').textContent.includes('as of seq 2')`)
	past := b.attrs(".result", "data-cid")
	if slices.Contains(past, late) || !slices.Contains(past, input) {
		t.Fatalf("as of seq 2 recall gave %v: want Maya's %s and not the later kayak memory %s", past, input, late)
	}
	b.shot("06-recall-as-of")

	// The tiers (filled by the tier actors behind the chats).
	testutil.Eventually(t, "alice's three STM pages", func() bool {
		return len(array(t, object(t, h.get("/sona/"+alice+"/tiers").obj(t, http.StatusOK)["stm"])["pages"])) == 3
	})
	b.goTo("#/sona/" + alice + "/tiers")
	b.wait("STM pages", `document.querySelectorAll('#stm-pages li').length === 3`)
	b.shot("07-tiers")

	// The backbone: the conflict, resolved through the UI.
	b.goTo("#/backbone")
	b.wait("the conflict", fmt.Sprintf(`document.querySelector('[data-conflict=%q]')`, conflictID))
	b.shot("08-backbone")
	const resolution = "Lunch on Fridays is pizza; tax reports are a separate concept."
	sel := fmt.Sprintf(`[data-conflict=%q]`, conflictID)
	b.do("resolving", chromedp.SetValue(chromedp.CSS(sel+" textarea"), resolution), chromedp.Click(chromedp.CSS(sel+" button[type=submit]")))
	b.wait("the conflict gone", fmt.Sprintf(`!document.querySelector('[data-conflict=%q]') && document.querySelector('#status').textContent.includes('resolved')`, conflictID))
	b.wait("the resolution on the backbone", fmt.Sprintf(`document.querySelector('#backbone-list').textContent.includes(%q)`, resolution))
	b.shot("09-resolved")
	if left := h.conflictItems(); len(left) != 0 {
		t.Fatalf("the API still has conflicts after the UI resolved it: %v", left)
	}
	if !slices.ContainsFunc(h.backbone(), func(m map[string]any) bool {
		return strings.Contains(fmt.Sprint(m["data"]), resolution)
	}) {
		t.Fatalf("the resolution is not on the backbone: %v", h.backbone())
	}

	// Insights and anchors.
	b.goTo("#/insights")
	b.wait("insights", `document.querySelectorAll('#insights li').length > 0`)
	b.shot("10-insights")
	b.goTo("#/anchors")
	b.wait("anchors", `document.querySelectorAll('#anchors li').length >= 2`)
	b.shot("11-anchors")

	// Live metrics: a write and a recall while the charts poll.
	b.goTo("#/metrics?every=300")
	b.wait("two samples", `document.querySelectorAll('.spark polyline').length >= 2`)
	h.insertText(alice, "Metric probe: the canoe is blue.")
	h.post("/sona/"+alice+"/recall", map[string]any{"query": "canoe"}).obj(t, http.StatusOK)
	b.wait("a write rate above zero", `!document.querySelectorAll('.chart')[0].querySelector('.tick').textContent.startsWith('0.0 ')`)
	b.wait("a recall latency", `document.querySelectorAll('.chart')[2].querySelector('polyline')`)
	b.shot("12-metrics")

	// Keyboard: the skip link comes first, then the sections.
	b.open("")
	for _, want := range []string{"Skip to content", "Memoria", "Sonas"} {
		b.do("tabbing", chromedp.KeyEvent("\t"))
		if got := eval[string](b, `document.activeElement.textContent`); got != want {
			t.Fatalf("Tab reaches %q, want %q", got, want)
		}
	}

	if p := b.messages(problems); len(p) > 0 {
		t.Fatalf("the console has errors or warnings:\n%s", strings.Join(p, "\n"))
	}
}

// tamperedBlock serves the page an altered copy of a block (through the
// browser's request interception) and expects the memory view to say
// mismatch.
func (b *browser) tamperedBlock(c string) {
	b.t.Helper()
	block, err := evalIn[[]int](b, fmt.Sprintf(`fetch('/ipfs/%s', {headers: {Accept: 'application/vnd.ipld.raw'}}).then(r => r.arrayBuffer()).then(a => [...new Uint8Array(a)])`, c))
	if err != nil {
		b.fail("reading the block", err)
	}
	altered := make([]byte, len(block))
	for i, v := range block {
		altered[i] = byte(v)
	}
	altered[len(altered)-1] ^= 1

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/ipfs/" + c + "*"}}}); err != nil {
		b.fail("intercepting", err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/vnd.ipld.raw"}}, Body: altered})
		}
	}()
	b.goTo("#/memory/" + c + "?tampered")
	b.wait("the mismatch", `document.querySelector('#verify').dataset.result`)
	if r := b.text("#verify-result"); !strings.HasPrefix(r, "✗ mismatch") {
		b.fail("a tampered block", fmt.Errorf("shows %q", r))
	}
	b.shot("03b-mismatch")
	if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
		b.fail("ending the interception", err)
	}
}

// TestWebExplorerAuth: on a server with tokens the UI loads, shows the
// 401 and asks for a token; a wrong token is refused again; a read token
// lists the sonas but gets a clear 403 on the metrics (admin) and on
// resolving a conflict; an admin token does both.
func TestWebExplorerAuth(t *testing.T) {
	h := newHarness(t, quiet, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.Auth.Tokens = []config.Token{
			{Name: "reader", Hash: api.HashToken("mem_reader"), Scopes: []string{"read"}},
			{Name: "admin", Hash: api.HashToken("mem_admin"), Scopes: []string{"admin"}},
		}
	})
	admin := []string{"Authorization", "Bearer mem_admin"}
	h.do("POST", "/sonas", map[string]any{"name": "alice"}, admin...).obj(t, http.StatusCreated)
	h.do("POST", "/backbone/contribute", map[string]any{"agent_id": "a1", "concept_key": "lunch", "content": "Pizza on Fridays for the whole team."}, admin...).obj(t, http.StatusOK)
	if st := h.do("POST", "/backbone/contribute", map[string]any{"agent_id": "a2", "concept_key": "lunch", "content": "Quarterly tax reports are due in April."}, admin...).obj(t, http.StatusOK)["status"]; st != "conflict" {
		t.Fatalf("want a conflict, got %v", st)
	}

	b := newBrowser(t, h.url)
	b.open("")
	b.wait("the 401", `document.querySelector('.error[data-status="401"]') && document.querySelector('#token-dialog').open`)
	b.shot("auth-01-401")

	useToken := func(token string) {
		b.t.Helper()
		b.wait("the token dialog", `document.querySelector('#token-dialog').open`)
		renders := eval[string](b, `document.querySelector('main').dataset.renders`)
		b.do("entering a token", chromedp.SetValue(chromedp.CSS("#token-input"), token), chromedp.Click(chromedp.CSS("#token-save")))
		b.wait("the view again", fmt.Sprintf(`document.querySelector('main').dataset.renders !== %q && document.querySelector('main').dataset.route`, renders))
	}
	useToken("mem_wrong")
	b.wait("the 401 again", `document.querySelector('.error[data-status="401"]') && document.querySelector('#token-dialog').open`)
	if msg := b.text(".error[data-status=\"401\"]"); !strings.Contains(msg, "not valid") {
		t.Fatalf("the wrong token's error reads %q", msg)
	}
	useToken("mem_reader")
	b.wait("the sonas", `document.querySelector('a.sona-link')`)
	if eval[string](b, `sessionStorage.getItem('memoria.token')`) != "mem_reader" {
		t.Fatal("the token is not in session storage")
	}

	b.goTo("#/metrics")
	b.wait("the 403", `document.querySelector('.error[data-status="403"]')`)
	if msg := b.text(`.error[data-status="403"]`); !strings.Contains(msg, "Forbidden") || !strings.Contains(msg, "needs admin") {
		t.Fatalf("the metrics' 403 reads %q", msg)
	}
	b.shot("auth-02-403-metrics")

	b.goTo("#/backbone")
	b.wait("the conflict", `document.querySelector('[data-conflict] button[type=submit]')`)
	b.click(`[data-conflict] button[type=submit]`)
	b.wait("the 403 on resolve", `document.querySelector('[data-conflict] .error[data-status="403"]')`)
	b.shot("auth-03-403-resolve")
	if len(h.do("GET", "/conflicts", nil, admin...).obj(t, http.StatusOK)["items"].([]any)) != 1 {
		t.Fatal("a reader's resolve changed the conflicts")
	}

	b.click("#token-button")
	useToken("mem_admin")
	b.click(`[data-conflict] button[type=submit]`)
	b.wait("the conflict resolved", `!document.querySelector('[data-conflict]') && document.querySelector('#conflicts').textContent.includes('No conflicts')`)
	if n := len(h.do("GET", "/conflicts", nil, admin...).obj(t, http.StatusOK)["items"].([]any)); n != 0 {
		t.Fatalf("%d conflicts left after the admin resolved it in the UI", n)
	}
	b.goTo("#/metrics?every=300")
	b.wait("the gauges", `document.querySelector('#gauges dd')`)

	// Refusals are network errors in the console; anything else is a bug.
	if p := b.messages(func(m chromedp.ConsoleMessage) bool {
		return problems(m) && !(m.Source == "network" && (strings.Contains(m.Text, "401") || strings.Contains(m.Text, "403")))
	}); len(p) > 0 {
		t.Fatalf("the console has errors or warnings:\n%s", strings.Join(p, "\n"))
	}
}
