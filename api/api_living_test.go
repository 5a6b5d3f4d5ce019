package api_test

// REST contract tests of the self's upkeep: POST /admin/heartbeat and
// /admin/compact, GET /insights, the backbone (POST and GET /backbone,
// POST /backbone/contribute, GET /backbone/pending) and its conflicts
// (GET /conflicts, POST /conflicts/{id}/resolve). The heartbeat's timer is
// pushed out of the way (an hour) so every tick is one the test asked for,
// and the clock is a test clock so dream idleness and times are exact.

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"

	"github.com/google/uuid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/clock"
)

// ---------------------------------------------------------------------------
// Harness

// newLivingHarness serves a fresh data directory on clock (which the test
// moves by hand), with the heartbeat's timer a year away: only the test's
// requests tick. A recall's trace is committed as it comes, not deferred
// until the clock moves (store.defer_for).
func newLivingHarness(t *testing.T, clock *clock.Fake) *harness {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Heartbeat.Interval = config.Duration(365 * 24 * time.Hour)
	cfg.Store.DeferFor = 0
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{Clock: clock})
	if err != nil {
		t.Fatalf("app.Open: %v", err)
	}
	srv := httptest.NewServer(a.API)
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("app.Close: %v", err)
		}
	})
	return &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}
}

func newClock() *clock.Fake {
	return clock.NewFake(time.Date(2030, 3, 1, 9, 0, 0, 0, time.UTC))
}

// tick is a heartbeat report, its shape checked.
type tick struct {
	raw                 map[string]any
	at, swept, wakes    int64
	passComplete        bool
	dreamed             bool
	compressions, folds []map[string]any
	insights            []map[string]any
}

// checkTick checks the documented shape of a tick report:
// {"at","swept","pass_complete","expired","pruned","prune_threshold",
// "tier_wakes","compressions":[{"sona","cid","sources"}],"dreamed",
// "insights":[…],"folds":[…]}.
func checkTick(t *testing.T, m map[string]any) tick {
	t.Helper()
	wantKeys(t, m, "at", "swept", "pass_complete", "expired", "pruned", "prune_threshold",
		"tier_wakes", "compressions", "dreamed", "insights", "folds")
	r := tick{raw: m, at: num(t, m["at"]), swept: num(t, m["swept"]), wakes: num(t, m["tier_wakes"])}
	if num(t, m["expired"]) < 0 || num(t, m["pruned"]) < 0 || r.swept < 0 {
		t.Fatalf("negative counts in %v", m)
	}
	fnum(t, m["prune_threshold"])
	var ok1, ok2 bool
	r.passComplete, ok1 = m["pass_complete"].(bool)
	r.dreamed, ok2 = m["dreamed"].(bool)
	if !ok1 || !ok2 {
		t.Fatalf("pass_complete and dreamed must be booleans: %v", m)
	}
	merges := func(key string) []map[string]any {
		var out []map[string]any
		for _, v := range array(t, m[key]) {
			c := object(t, v)
			wantKeys(t, c, "sona", "cid", "sources")
			if _, err := uuid.Parse(str(t, c["sona"])); err != nil {
				t.Fatalf("%s sona: %v", key, err)
			}
			str(t, c["cid"])
			if len(array(t, c["sources"])) == 0 {
				t.Fatalf("%s without sources: %v", key, c)
			}
			out = append(out, c)
		}
		return out
	}
	r.compressions, r.folds = merges("compressions"), merges("folds")
	for _, v := range array(t, m["insights"]) {
		r.insights = append(r.insights, checkInsight(t, v))
	}
	return r
}

// checkInsight checks {"cid","insight","category","confidence","sources",
// "sona","generated_at"}.
func checkInsight(t *testing.T, v any) map[string]any {
	t.Helper()
	in := object(t, v)
	wantKeys(t, in, "cid", "insight", "category", "confidence", "sources", "sona", "generated_at")
	str(t, in["cid"])
	if str(t, in["insight"]) == "" {
		t.Fatalf("empty insight: %v", in)
	}
	if c := str(t, in["category"]); !slices.Contains([]string{"pattern", "correction", "recommendation", "summary"}, c) {
		t.Fatalf("insight category %q", c)
	}
	if c := fnum(t, in["confidence"]); c < 0 || c > 1 {
		t.Fatalf("confidence %v outside 0..1", c)
	}
	if len(array(t, in["sources"])) == 0 {
		t.Fatalf("insight without sources: %v", in)
	}
	if _, err := uuid.Parse(str(t, in["sona"])); err != nil {
		t.Fatalf("insight sona: %v", err)
	}
	num(t, in["generated_at"])
	return in
}

func strs(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, s := range array(t, v) {
		out = append(out, str(t, s))
	}
	return out
}

// chain returns the CIDs of a sona's chain in order.
func (h *harness) chain(sona string) []string {
	h.t.Helper()
	var out []string
	for _, it := range array(h.t, h.get("/memories/list?limit=1000&sona="+sona).obj(h.t, http.StatusOK)["items"]) {
		out = append(out, str(h.t, object(h.t, it)["cid"]))
	}
	return out
}

// backbone returns the backbone's memories in the order written.
func (h *harness) backbone() []map[string]any {
	h.t.Helper()
	m := h.get("/backbone?limit=1000").obj(h.t, http.StatusOK)
	wantKeys(h.t, m, "items", "next_cursor")
	var out []map[string]any
	for _, it := range array(h.t, m["items"]) {
		out = append(out, object(h.t, it))
	}
	return out
}

func (h *harness) contribute(agent, concept, content string, extra ...string) map[string]any {
	h.t.Helper()
	body := map[string]any{"agent_id": agent, "concept_key": concept, "content": content}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = extra[i+1]
	}
	m := h.post("/backbone/contribute", body).obj(h.t, http.StatusOK)
	checkContribution(h.t, m)
	return m
}

// checkContribution checks {"status","signal","threshold","lower",
// "conflict_id","cid","agents"} and that the status follows from the
// numbers it reports.
func checkContribution(t *testing.T, m map[string]any) {
	t.Helper()
	wantKeys(t, m, "status", "signal", "threshold", "lower", "conflict_id", "cid", "agents")
	signal, upper, lower := fnum(t, m["signal"]), fnum(t, m["threshold"]), fnum(t, m["lower"])
	agents := num(t, m["agents"])
	if lower >= upper {
		t.Fatalf("lower %v not below threshold %v", lower, upper)
	}
	switch st := str(t, m["status"]); st {
	case "committed":
		if agents < 2 || signal < upper || m["conflict_id"] != nil {
			t.Fatalf("committed: %v", m)
		}
		str(t, m["cid"])
	case "pending":
		if m["cid"] != nil || m["conflict_id"] != nil || (agents >= 2 && (signal >= upper || signal < lower)) {
			t.Fatalf("pending: %v", m)
		}
	case "conflict":
		if m["cid"] != nil || agents < 2 {
			t.Fatalf("conflict: %v", m)
		}
		if _, err := uuid.Parse(str(t, m["conflict_id"])); err != nil {
			t.Fatalf("conflict_id: %v", err)
		}
	default:
		t.Fatalf("status %q", st)
	}
}

// pendingItems returns GET /backbone/pending by concept key, shapes checked.
func (h *harness) pendingItems() map[string]map[string]any {
	h.t.Helper()
	m := h.get("/backbone/pending").obj(h.t, http.StatusOK)
	wantKeys(h.t, m, "items")
	out := map[string]map[string]any{}
	for _, it := range array(h.t, m["items"]) {
		p := object(h.t, it)
		wantKeys(h.t, p, "concept_key", "versions", "high_stakes", "created_at", "conflict_id")
		checkVersions(h.t, p["versions"])
		if _, ok := p["high_stakes"].(bool); !ok {
			h.t.Fatalf("high_stakes is not a boolean: %v", p)
		}
		num(h.t, p["created_at"])
		if p["conflict_id"] != nil {
			str(h.t, p["conflict_id"])
		}
		out[str(h.t, p["concept_key"])] = p
	}
	return out
}

// conflictItems returns GET /conflicts by conflict id, shapes checked.
func (h *harness) conflictItems() map[string]map[string]any {
	h.t.Helper()
	m := h.get("/conflicts").obj(h.t, http.StatusOK)
	wantKeys(h.t, m, "items")
	out := map[string]map[string]any{}
	for _, it := range array(h.t, m["items"]) {
		c := object(h.t, it)
		wantKeys(h.t, c, "conflict_id", "concept_key", "versions", "signal", "threshold", "created_at")
		checkVersions(h.t, c["versions"])
		fnum(h.t, c["signal"])
		fnum(h.t, c["threshold"])
		num(h.t, c["created_at"])
		out[str(h.t, c["conflict_id"])] = c
	}
	return out
}

// checkVersions checks [{"agent_id","content","at"}] (no embeddings).
func checkVersions(t *testing.T, v any) {
	t.Helper()
	for _, it := range array(t, v) {
		ver := object(t, it)
		wantKeys(t, ver, "agent_id", "content", "at")
		str(t, ver["agent_id"])
		str(t, ver["content"])
		num(t, ver["at"])
	}
}

// versionsOf returns the agent: content pairs of a pending concept or conflict.
func versionsOf(t *testing.T, m map[string]any) []string {
	t.Helper()
	var out []string
	for _, it := range array(t, m["versions"]) {
		v := object(t, it)
		out = append(out, str(t, v["agent_id"])+": "+str(t, v["content"]))
	}
	return out
}

// livingState is everything the upkeep routes can write, to check that a
// refused request wrote nothing.
func (h *harness) livingState() string {
	h.t.Helper()
	sonas, memories, _ := h.health()
	var b strings.Builder
	b.WriteString(string(h.get("/sonas/list?limit=1000").body))
	for _, p := range []string{"/backbone?limit=1000", "/backbone/pending", "/conflicts", "/insights?limit=1000"} {
		r := h.get(p)
		if r.status != http.StatusOK {
			h.t.Fatalf("state: %s", r)
		}
		b.Write(r.body)
	}
	fmt.Fprintf(&b, " sonas=%d memories=%d", sonas, memories)
	return b.String()
}

// ---------------------------------------------------------------------------
// POST /admin/heartbeat, GET /insights

func TestHeartbeatAndDream(t *testing.T) {
	clock := newClock()
	h := newLivingHarness(t, clock)

	// Nothing stored yet: a tick sweeps nothing and finds no insights.
	empty := h.get("/insights").obj(t, http.StatusOK)
	wantKeys(t, empty, "items")
	if len(array(t, empty["items"])) != 0 {
		t.Fatalf("insights of an empty store: %v", empty)
	}
	first := checkTick(t, h.post("/admin/heartbeat", nil).obj(t, http.StatusOK))
	if first.swept != 0 || first.dreamed || len(first.insights) != 0 || first.at != clock.Now().Unix() {
		t.Fatalf("tick of an empty store: %v", first.raw)
	}

	alice := h.newSona("alice")
	for _, line := range []string{
		"I planted tomatoes and basil in my garden this spring.",
		"My garden tomatoes need more water in the summer heat.",
		"The tomatoes in my garden are finally turning red.",
		"I took the night train from Lisbon to Madrid last week.",
	} {
		h.post("/sona/"+alice+"/chat", map[string]any{"content": line}).obj(t, http.StatusOK)
	}
	mistake := str(t, h.insert(map[string]any{"sona": alice, "kind": "error",
		"data": map[string]any{"kind": "text", "content": "I forgot to water the tomatoes before the trip."}})["cid"])
	goal := str(t, h.insert(map[string]any{"sona": alice, "kind": "goal",
		"data": map[string]any{"kind": "text", "content": "Grow a bigger vegetable garden next year."}})["cid"])
	before := h.chain(alice)
	if len(before) != 10 {
		t.Fatalf("chain of %d memories, want 10", len(before))
	}

	// A tick without dream: the sweep sees every memory, nothing dreams
	// (the sona was active a moment ago), the active sona's tiers wake.
	clock.Advance(time.Minute)
	plain := checkTick(t, h.post("/admin/heartbeat", nil).obj(t, http.StatusOK))
	if plain.swept != 10 || !plain.passComplete || plain.dreamed || len(plain.insights) != 0 || plain.wakes != 1 {
		t.Fatalf("plain tick: %v", plain.raw)
	}
	if plain.at != clock.Now().Unix() {
		t.Fatalf("tick at %d, clock at %d", plain.at, clock.Now().Unix())
	}
	if got := h.chain(alice); !slices.Equal(got, before) {
		t.Fatalf("a plain tick changed the chain: %v", got)
	}
	if n := len(array(t, h.get("/insights").obj(t, http.StatusOK)["items"])); n != 0 {
		t.Fatalf("%d insights before any dream", n)
	}

	// ?dream=1 forces dream mode: insights from the recent memories, each
	// a note memory on alice's chain with edges to its sources.
	clock.Advance(time.Minute)
	dream := checkTick(t, h.post("/admin/heartbeat?dream=1", nil).obj(t, http.StatusOK))
	if !dream.dreamed || len(dream.insights) == 0 {
		t.Fatalf("forced dream: %v", dream.raw)
	}
	after := h.chain(alice)
	if len(after) != len(before)+len(dream.insights) || !slices.Equal(after[:len(before)], before) {
		t.Fatalf("chain after the dream: %d memories, want %d + %d insights", len(after), len(before), len(dream.insights))
	}
	byCategory := map[string]map[string]any{}
	for i, in := range dream.insights {
		if str(t, in["sona"]) != alice || num(t, in["generated_at"]) != dream.at {
			t.Fatalf("insight %v: want sona %s, generated_at %d", in, alice, dream.at)
		}
		c := str(t, in["cid"])
		if after[len(before)+i] != c {
			t.Fatalf("insight %d is not appended in report order", i)
		}
		for _, src := range strs(t, in["sources"]) {
			if !slices.Contains(before, src) {
				t.Fatalf("insight source %s is not one of alice's memories", src)
			}
		}
		m := h.memory(c)
		meta := object(t, m["meta"])
		if str(t, meta["kind"]) != "note" || str(t, object(t, m["data"])["content"]) != str(t, in["insight"]) {
			t.Fatalf("insight memory %v for %v", m, in)
		}
		var targets []string
		for _, e := range array(t, m["edges"]) {
			targets = append(targets, str(t, object(t, object(t, e)["target"])["/"]))
		}
		if srcs := strs(t, in["sources"]); !sameSet(targets, srcs) {
			t.Fatalf("insight edges %v, sources %v", targets, srcs)
		}
		byCategory[str(t, in["category"])] = in
	}
	for _, c := range []string{"pattern", "correction", "recommendation", "summary"} {
		if byCategory[c] == nil {
			t.Fatalf("no %s insight among %v", c, dream.insights)
		}
	}
	if got := strs(t, byCategory["correction"]["sources"]); !slices.Equal(got, []string{mistake}) {
		t.Fatalf("correction sources %v, want the error %s", got, mistake)
	}
	if got := strs(t, byCategory["recommendation"]["sources"]); !slices.Equal(got, []string{goal}) {
		t.Fatalf("recommendation sources %v, want the goal %s", got, goal)
	}
	if got := strs(t, byCategory["summary"]["sources"]); !sameSet(got, before) {
		t.Fatalf("summary sources %v, want the whole chain %v", got, before)
	}

	// GET /insights: the same insights, newest first; limit cuts the list.
	list := h.get("/insights").obj(t, http.StatusOK)
	var got []map[string]any
	for _, it := range array(t, list["items"]) {
		got = append(got, checkInsight(t, it))
	}
	want := slices.Clone(dream.insights)
	slices.Reverse(want)
	if !jsonEqual(t, got, want) {
		t.Fatalf("GET /insights:\n%v\nwant the dream's insights newest first:\n%v", got, want)
	}
	one := array(t, h.get("/insights?limit=1").obj(t, http.StatusOK)["items"])
	if len(one) != 1 || !jsonEqual(t, one[0], want[0]) {
		t.Fatalf("limit=1: %v", one)
	}

	// Dreaming again right away: alice did not grow, so no new insights.
	again := checkTick(t, h.post("/admin/heartbeat?dream=true", nil).obj(t, http.StatusOK))
	if !again.dreamed || len(again.insights) != 0 {
		t.Fatalf("second dream: %v", again.raw)
	}
	if n := len(array(t, h.get("/insights").obj(t, http.StatusOK)["items"])); n != len(dream.insights) {
		t.Fatalf("%d insights after an empty dream, want %d", n, len(dream.insights))
	}

	// Without ?dream, a tick dreams once nothing has been written for
	// heartbeat.dream_idle (6 h) — and not a second before.
	h.post("/sona/"+alice+"/chat", map[string]any{"content": "The basil in my garden flowered early."}).obj(t, http.StatusOK)
	clock.Advance(6*time.Hour - time.Second)
	if r := checkTick(t, h.post("/admin/heartbeat?dream=0", nil).obj(t, http.StatusOK)); r.dreamed {
		t.Fatalf("dreamed a second before dream_idle: %v", r.raw)
	}
	clock.Advance(time.Second)
	idle := checkTick(t, h.post("/admin/heartbeat", nil).obj(t, http.StatusOK))
	if !idle.dreamed || len(idle.insights) == 0 {
		t.Fatalf("no dream after dream_idle: %v", idle.raw)
	}
	if n := len(array(t, h.get("/insights?limit=1000").obj(t, http.StatusOK)["items"])); n != len(dream.insights)+len(idle.insights) {
		t.Fatalf("%d insights, want %d", n, len(dream.insights)+len(idle.insights))
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// ---------------------------------------------------------------------------
// POST /admin/compact

func TestCompactFoldsColdBranches(t *testing.T) {
	clock := newClock()
	h := newLivingHarness(t, clock)
	hot, cold := h.newSona("hot"), h.newSona("cold")
	var coldCIDs []string
	for _, line := range []string{
		"I planted tomatoes in my garden.",
		"The train to Madrid was late again.",
		"My cat sleeps all day on the sofa.",
	} {
		h.insertText(hot, line)
		coldCIDs = append(coldCIDs, h.insertText(cold, "Long ago: "+line))
	}
	// Only the hot branch is ever recalled.
	for range 3 {
		h.post("/sona/"+hot+"/recall", map[string]any{"query": "tomatoes, the train and the cat", "scope": "sona"}).obj(t, http.StatusOK)
	}
	hotChain := h.chain(hot)
	// A recall records its accesses behind its answer: wait until they are
	// stored, or the sweep may count none.
	for _, c := range hotChain {
		testutil.Eventually(t, "the accesses of "+c, func() bool {
			return fnum(t, object(t, h.memory(c)["meta"])["access_count"]) > 0
		})
	}

	rep := checkTick(t, h.post("/admin/compact", nil).obj(t, http.StatusOK))
	if !rep.passComplete || rep.swept != 6 || rep.dreamed || len(rep.insights) != 0 {
		t.Fatalf("compact: %v", rep.raw)
	}
	if len(rep.folds) != 1 {
		t.Fatalf("compact folded %d branches, want the cold one: %v", len(rep.folds), rep.raw)
	}
	fold := rep.folds[0]
	if str(t, fold["sona"]) != cold || !sameSet(strs(t, fold["sources"]), coldCIDs) {
		t.Fatalf("fold %v, want sona %s with sources %v", fold, cold, coldCIDs)
	}
	// The archive memory ends the cold chain; its sources are archived
	// (never deleted) and reachable from it; the hot branch is untouched.
	archive := str(t, fold["cid"])
	if c := h.chain(cold); len(c) != 4 || c[3] != archive {
		t.Fatalf("cold chain %v does not end with the archive %s", c, archive)
	}
	am := h.memory(archive)
	if l := object(t, object(t, am["meta"])["labels"]); l["merge"] != "cold-branch" || l["merged"] != "3" {
		t.Fatalf("archive labels %v", l)
	}
	var targets []string
	for _, e := range array(t, am["edges"]) {
		targets = append(targets, str(t, object(t, object(t, e)["target"])["/"]))
	}
	if !sameSet(targets, coldCIDs) {
		t.Fatalf("archive edges %v, want %v", targets, coldCIDs)
	}
	for _, c := range coldCIDs {
		if meta := object(t, h.memory(c)["meta"]); meta["archived"] != true {
			t.Fatalf("source %s not archived: %v", c, meta)
		}
	}
	if got := h.chain(hot); !slices.Equal(got, hotChain) {
		t.Fatalf("compact changed the hot chain")
	}
	for _, c := range hotChain {
		if meta := object(t, h.memory(c)["meta"]); meta["archived"] != false {
			t.Fatalf("hot memory %s archived", c)
		}
	}

	// A second compact has nothing left to fold.
	if again := checkTick(t, h.post("/admin/compact", nil).obj(t, http.StatusOK)); len(again.folds) != 0 || len(again.compressions) != 0 {
		t.Fatalf("second compact: %v", again.raw)
	}
}

// ---------------------------------------------------------------------------
// POST /backbone, GET /backbone

func TestBackboneWrite(t *testing.T) {
	h := newLivingHarness(t, newClock())

	// Before the first write there is no backbone: an empty list.
	empty := h.get("/backbone").obj(t, http.StatusOK)
	wantKeys(t, empty, "items", "next_cursor")
	if len(array(t, empty["items"])) != 0 || empty["next_cursor"] != nil {
		t.Fatalf("empty backbone: %v", empty)
	}
	alice := h.newSona("alice")
	h.insertText(alice, "I water the garden every morning.")

	w := h.post("/backbone", map[string]any{"agent_id": "grok", "content": "The user's name is Demos."}).obj(t, http.StatusCreated)
	wantKeys(t, w, "cid", "existed")
	first := str(t, w["cid"])
	if w["existed"] != false {
		t.Fatalf("first write: %v", w)
	}
	again := h.post("/backbone", map[string]any{"agent_id": "grok", "content": "The user's name is Demos."}).obj(t, http.StatusOK)
	if str(t, again["cid"]) != first || again["existed"] != true {
		t.Fatalf("second write of the same memory: %v", again)
	}
	// concept_key is a label of the memory, and the field wins over a
	// label of the same name.
	second := str(t, h.post("/backbone", map[string]any{
		"agent_id": "kimi", "content": "Releases happen on Fridays.", "concept_key": "release-day",
		"labels": map[string]any{"team": "core", "concept_key": "forged"},
	}).obj(t, http.StatusCreated)["cid"])
	third := str(t, h.post("/backbone", map[string]any{"agent_id": "kimi", "content": "The office is in Lisbon."}).obj(t, http.StatusCreated)["cid"])

	items := h.backbone()
	var got []string
	for _, m := range items {
		got = append(got, str(t, m["cid"]))
		meta := object(t, m["meta"])
		if meta["backbone"] != true || meta["kind"] != "fact" {
			t.Fatalf("backbone memory meta %v", meta)
		}
	}
	if want := []string{first, second, third}; !slices.Equal(got, want) {
		t.Fatalf("backbone %v, want %v in the order written", got, want)
	}
	m := items[1]
	if d := object(t, m["data"]); d["kind"] != "other" || d["name"] != "kimi" || d["content"] != "Releases happen on Fridays." {
		t.Fatalf("backbone data %v", d)
	}
	meta := object(t, m["meta"])
	if meta["agent_id"] != "kimi" || !jsonEqual(t, meta["labels"], map[string]any{"team": "core", "concept_key": "release-day"}) {
		t.Fatalf("backbone meta %v", meta)
	}

	// Paging with the cursor.
	var paged []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("backbone paging does not end")
		}
		p := h.get("/backbone?limit=2&cursor="+cursor).obj(t, http.StatusOK)
		for _, it := range array(t, p["items"]) {
			paged = append(paged, str(t, object(t, it)["cid"]))
		}
		if p["next_cursor"] == nil {
			break
		}
		cursor = str(t, p["next_cursor"])
	}
	if !slices.Equal(paged, got) {
		t.Fatalf("paged backbone %v, want %v", paged, got)
	}

	// Only the consensus actor writes the backbone sona: chat and insert
	// on it are refused and write nothing. (Before the recall below, whose
	// trace — access counts the state shows — lands after it answers.)
	bb := str(t, object(t, items[0]["meta"])["sonas"].([]any)[0])
	state := h.livingState()
	wantError(t, h.post("/sona/"+bb+"/chat", map[string]any{"content": "hi"}), http.StatusBadRequest, "invalid")
	wantError(t, h.post("/memories", map[string]any{"sona": bb, "data": map[string]any{"kind": "text", "content": "sneaky"}}), http.StatusBadRequest, "invalid")
	if h.livingState() != state {
		t.Fatal("a refused write to the backbone sona changed the state")
	}

	// Every sona sees the backbone, also in sona scope.
	rec := h.post("/sona/"+alice+"/recall", map[string]any{"query": "where is the office?", "scope": "sona"}).obj(t, http.StatusOK)
	var recalled []string
	for _, it := range array(t, rec["memories"]) {
		recalled = append(recalled, str(t, object(t, it)["cid"]))
	}
	if !slices.Contains(recalled, third) {
		t.Fatalf("alice's recall %v lacks the backbone memory %s", recalled, third)
	}
}

// ---------------------------------------------------------------------------
// POST /backbone/contribute, GET /backbone/pending, GET /conflicts,
// POST /conflicts/{id}/resolve

// Contents whose hashed embeddings are at known similarities (see the
// signals the test checks): the bootstrap consensus threshold is 0.761,
// its lower bound 0.439, and high stakes 0.951.
const (
	release      = "Release the new version on Friday after the tests pass."
	releaseShort = "Release the new version on Friday."                      // 0.815 to release
	releaseMon   = "Release the new version on Monday after the tests pass." // 0.838
	releaseBuild = "Release the new build Friday evening."                   // 0.547
	sky          = "The sky over the harbour is blue and calm today."
	revenue      = "Quarterly revenue in Europe fell by a third." // 0.004 to sky
)

func near(a, b float64) bool { return math.Abs(a-b) < 0.001 }

func TestConsensus(t *testing.T) {
	clock := newClock()
	h := newLivingHarness(t, clock)

	// One agent: pending, whatever it says; the bootstrap bounds.
	r := h.contribute("grok", "release-day", release)
	if r["status"] != "pending" || num(t, r["agents"]) != 1 || fnum(t, r["signal"]) != 0 ||
		!near(fnum(t, r["threshold"]), 0.761) || !near(fnum(t, r["lower"]), 0.439) {
		t.Fatalf("one agent: %v", r)
	}
	p := h.pendingItems()["release-day"]
	if p == nil || p["conflict_id"] != nil || p["high_stakes"] != false || num(t, p["created_at"]) != clock.Now().Unix() ||
		!slices.Equal(versionsOf(t, p), []string{"grok: " + release}) {
		t.Fatalf("pending after one agent: %v", p)
	}

	// A second agent that agrees: committed to the backbone, labelled with
	// the concept and its agents; the concept is no longer pending.
	clock.Advance(time.Minute)
	r = h.contribute("kimi", "release-day", releaseShort)
	if r["status"] != "committed" || num(t, r["agents"]) != 2 || !near(fnum(t, r["signal"]), 0.815) {
		t.Fatalf("agreeing agents: %v", r)
	}
	committed := str(t, r["cid"])
	bb := h.backbone()
	if len(bb) != 1 || str(t, bb[0]["cid"]) != committed {
		t.Fatalf("backbone %v, want the commit %s", bb, committed)
	}
	labels := object(t, object(t, bb[0]["meta"])["labels"])
	if !jsonEqual(t, labels, map[string]any{"concept_key": "release-day", "agents": "grok,kimi"}) {
		t.Fatalf("committed labels %v", labels)
	}
	if c := str(t, object(t, bb[0]["data"])["content"]); c != release && c != releaseShort {
		t.Fatalf("committed %q, not one of the versions", c)
	}
	if _, ok := h.pendingItems()["release-day"]; ok {
		t.Fatal("a committed concept is still pending")
	}

	// Between the bounds: pending with two agents, in the order they came.
	r = h.contribute("grok", "deploy", release)
	r = h.contribute("kimi", "deploy", releaseBuild)
	if r["status"] != "pending" || num(t, r["agents"]) != 2 || !near(fnum(t, r["signal"]), 0.547) {
		t.Fatalf("half-agreeing agents: %v", r)
	}
	if p := h.pendingItems()["deploy"]; !slices.Equal(versionsOf(t, p), []string{"grok: " + release, "kimi: " + releaseBuild}) {
		t.Fatalf("pending deploy %v", p)
	}

	// High stakes raise the threshold (× 1.25): a signal that would commit
	// stays pending.
	h.contribute("grok", "launch", release, "stakes", "high")
	r = h.contribute("kimi", "launch", releaseMon)
	if r["status"] != "pending" || !near(fnum(t, r["threshold"]), 0.951) || fnum(t, r["signal"]) < 0.761 {
		t.Fatalf("high stakes: %v", r)
	}
	if p := h.pendingItems()["launch"]; p["high_stakes"] != true {
		t.Fatalf("pending launch %v", p)
	}

	// Diverging agents: a conflict, listed with its versions; the pending
	// concept carries its id.
	clock.Advance(time.Minute)
	created := clock.Now().Unix()
	h.contribute("grok", "weather", sky)
	r = h.contribute("kimi", "weather", revenue)
	if r["status"] != "conflict" || fnum(t, r["signal"]) >= fnum(t, r["lower"]) {
		t.Fatalf("diverging agents: %v", r)
	}
	conflict := str(t, r["conflict_id"])
	cs := h.conflictItems()
	c := cs[conflict]
	if len(cs) != 1 || c == nil || c["concept_key"] != "weather" || num(t, c["created_at"]) != created ||
		!slices.Equal(versionsOf(t, c), []string{"grok: " + sky, "kimi: " + revenue}) ||
		!near(fnum(t, c["signal"]), fnum(t, r["signal"])) || !near(fnum(t, c["threshold"]), fnum(t, r["threshold"])) {
		t.Fatalf("conflicts %v, want %s on weather", cs, conflict)
	}
	if p := h.pendingItems()["weather"]; p == nil || p["conflict_id"] != conflict {
		t.Fatalf("pending weather %v, want conflict_id %s", p, conflict)
	}

	// A conflict stays one (with its id and creation time) until it
	// converges or is resolved, even when a new version lands between the
	// bounds.
	clock.Advance(time.Minute)
	r = h.contribute("qwen", "weather", "The sky over the harbour is calm, but revenue in Europe fell.")
	if r["status"] != "conflict" || r["conflict_id"] != conflict || num(t, r["agents"]) != 3 {
		t.Fatalf("third agent on a conflict: %v", r)
	}
	c = h.conflictItems()[conflict]
	if len(array(t, c["versions"])) != 3 || num(t, c["created_at"]) != created {
		t.Fatalf("conflict after a third agent: %v (created at %d)", c, created)
	}

	// Resolve: the resolution goes on the backbone, conflict and pending
	// concept are gone.
	resolution := "Both are true: a calm sky, and falling revenue."
	res := h.post("/conflicts/"+conflict+"/resolve", map[string]any{"content": resolution, "agent_id": "ceo"}).obj(t, http.StatusCreated)
	wantKeys(t, res, "cid")
	resolved := str(t, res["cid"])
	if _, ok := h.conflictItems()[conflict]; ok {
		t.Fatal("a resolved conflict is still listed")
	}
	if _, ok := h.pendingItems()["weather"]; ok {
		t.Fatal("a resolved concept is still pending")
	}
	bb = h.backbone()
	last := bb[len(bb)-1]
	if str(t, last["cid"]) != resolved || object(t, last["data"])["content"] != resolution {
		t.Fatalf("backbone ends with %v, want the resolution %s", last, resolved)
	}
	if l := object(t, object(t, last["meta"])["labels"]); !jsonEqual(t, l, map[string]any{"concept_key": "weather", "conflict_id": conflict}) {
		t.Fatalf("resolution labels %v", l)
	}
	// Resolved once: a second resolve finds nothing and writes nothing.
	state := h.livingState()
	wantError(t, h.post("/conflicts/"+conflict+"/resolve", map[string]any{"content": "again"}), http.StatusNotFound, "not_found")
	if h.livingState() != state {
		t.Fatal("resolving a resolved conflict changed the state")
	}

	// A conflict whose versions converge commits and is gone.
	h.contribute("grok", "colour", sky)
	r = h.contribute("kimi", "colour", revenue)
	if r["status"] != "conflict" {
		t.Fatalf("colour: %v", r)
	}
	colour := str(t, r["conflict_id"])
	r = h.contribute("kimi", "colour", sky)
	if r["status"] != "committed" || !near(fnum(t, r["signal"]), 1) {
		t.Fatalf("converged conflict: %v", r)
	}
	if _, ok := h.conflictItems()[colour]; ok {
		t.Fatal("a converged conflict is still listed")
	}
	if _, ok := h.pendingItems()["colour"]; ok {
		t.Fatal("a converged concept is still pending")
	}
	if bb := h.backbone(); str(t, bb[len(bb)-1]["cid"]) != str(t, r["cid"]) {
		t.Fatalf("the converged commit is not on the backbone")
	}
	if n := len(h.conflictItems()); n != 0 {
		t.Fatalf("%d conflicts left", n)
	}
}

// ---------------------------------------------------------------------------
// Errors: each a 4xx JSON error, and nothing written.

func TestLivingErrors(t *testing.T) {
	h := newLivingHarness(t, newClock())
	alice := h.newSona("alice")
	h.insertText(alice, "I water the garden every morning.")
	h.post("/backbone", map[string]any{"agent_id": "grok", "content": "The user's name is Demos."}).obj(t, http.StatusCreated)
	h.contribute("grok", "weather", sky)
	conflict := str(t, h.contribute("kimi", "weather", revenue)["conflict_id"])
	resolve := "/conflicts/" + conflict + "/resolve"
	long := strings.Repeat("k", 201)

	tests := []struct {
		name         string
		method, path string
		body         any // as harness.do
		status       int
		code         string
		headers      []string
	}{
		// Bad query parameters.
		{"dream=2", "POST", "/admin/heartbeat?dream=2", nil, 400, "invalid", nil},
		{"dream=yes", "POST", "/admin/heartbeat?dream=yes", nil, 400, "invalid", nil},
		{"insights limit=0", "GET", "/insights?limit=0", nil, 400, "invalid_limit", nil},
		{"insights limit=x", "GET", "/insights?limit=x", nil, 400, "invalid_limit", nil},
		{"insights limit too big", "GET", "/insights?limit=100000", nil, 400, "invalid_limit", nil},
		{"backbone limit=-1", "GET", "/backbone?limit=-1", nil, 400, "invalid_limit", nil},
		{"backbone cursor=x", "GET", "/backbone?cursor=x", nil, 400, "invalid_cursor", nil},
		{"backbone cursor=-1", "GET", "/backbone?cursor=-1", nil, 400, "invalid_cursor", nil},

		// Wrong methods.
		{"GET heartbeat", "GET", "/admin/heartbeat", nil, 405, "method_not_allowed", []string{"Allow", "POST"}},
		{"GET compact", "GET", "/admin/compact", nil, 405, "method_not_allowed", []string{"Allow", "POST"}},
		{"POST insights", "POST", "/insights", nil, 405, "method_not_allowed", []string{"Allow", "GET, HEAD"}},
		{"DELETE backbone", "DELETE", "/backbone", nil, 405, "method_not_allowed", []string{"Allow", "GET, HEAD, POST"}},
		{"GET contribute", "GET", "/backbone/contribute", nil, 405, "method_not_allowed", []string{"Allow", "POST"}},
		{"POST pending", "POST", "/backbone/pending", map[string]any{}, 405, "method_not_allowed", []string{"Allow", "GET, HEAD"}},
		{"POST conflicts", "POST", "/conflicts", map[string]any{}, 405, "method_not_allowed", []string{"Allow", "GET, HEAD"}},
		{"GET resolve", "GET", resolve, nil, 405, "method_not_allowed", []string{"Allow", "POST"}},
		{"DELETE conflict", "DELETE", "/conflicts/" + conflict, nil, 404, "not_found", nil},

		// POST /backbone.
		{"backbone malformed", "POST", "/backbone", `{"agent_id":"a","content":`, 400, "malformed_json", nil},
		{"backbone empty body", "POST", "/backbone", "", 400, "malformed_json", nil},
		{"backbone unknown field", "POST", "/backbone", map[string]any{"agent_id": "a", "content": "x", "sona": "alice"}, 400, "malformed_json", nil},
		{"backbone wrong type", "POST", "/backbone", map[string]any{"agent_id": "a", "content": "x", "labels": []string{"x"}}, 400, "malformed_json", nil},
		{"backbone no content", "POST", "/backbone", map[string]any{"agent_id": "a"}, 400, "invalid", nil},
		{"backbone blank content", "POST", "/backbone", map[string]any{"agent_id": "a", "content": " \n"}, 400, "invalid", nil},
		{"backbone no agent", "POST", "/backbone", map[string]any{"content": "Unattributed."}, 400, "invalid", nil},
		{"backbone control agent", "POST", "/backbone", map[string]any{"agent_id": "a\x00b", "content": "x"}, 400, "invalid", nil},
		{"backbone not JSON", "POST", "/backbone", []byte(`agent_id=a&content=x`), 415, "unsupported_media_type", []string{"Content-Type", "application/x-www-form-urlencoded"}},

		// POST /backbone/contribute.
		{"contribute malformed", "POST", "/backbone/contribute", `{"agent_id":"a"`, 400, "malformed_json", nil},
		{"contribute array", "POST", "/backbone/contribute", `[]`, 400, "malformed_json", nil},
		{"contribute no concept", "POST", "/backbone/contribute", map[string]any{"agent_id": "a", "content": "x"}, 400, "invalid", nil},
		{"contribute no agent", "POST", "/backbone/contribute", map[string]any{"concept_key": "k", "content": "x"}, 400, "invalid", nil},
		{"contribute no content", "POST", "/backbone/contribute", map[string]any{"agent_id": "a", "concept_key": "k"}, 400, "invalid", nil},
		{"contribute long concept", "POST", "/backbone/contribute", map[string]any{"agent_id": "a", "concept_key": long, "content": "x"}, 400, "invalid", nil},
		{"contribute bad stakes", "POST", "/backbone/contribute", map[string]any{"agent_id": "a", "concept_key": "k", "content": "x", "stakes": "huge"}, 400, "invalid", nil},
		{"contribute to a conflict, bad stakes", "POST", "/backbone/contribute", map[string]any{"agent_id": "qwen", "concept_key": "weather", "content": sky, "stakes": "HIGH"}, 400, "invalid", nil},

		// POST /conflicts/{id}/resolve.
		{"resolve unknown", "POST", "/conflicts/" + uuid.NewString() + "/resolve", map[string]any{"content": "x"}, 404, "not_found", nil},
		{"resolve unknown, not a uuid", "POST", "/conflicts/nope/resolve", map[string]any{"content": "x"}, 404, "not_found", nil},
		{"resolve malformed", "POST", resolve, `{"content":`, 400, "malformed_json", nil},
		{"resolve empty body", "POST", resolve, "", 400, "malformed_json", nil},
		{"resolve no content", "POST", resolve, map[string]any{"agent_id": "ceo"}, 400, "invalid", nil},
		{"resolve blank content", "POST", resolve, map[string]any{"content": "  "}, 400, "invalid", nil},
		{"resolve other id in body", "POST", resolve, map[string]any{"content": "x", "conflict_id": uuid.NewString()}, 400, "invalid", nil},
		{"resolve unknown field", "POST", resolve, map[string]any{"content": "x", "winner": "grok"}, 400, "malformed_json", nil},
		{"resolve control agent", "POST", resolve, map[string]any{"content": "x", "agent_id": "\x7f"}, 400, "invalid", nil},
	}
	state := h.livingState()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if len(tc.headers) == 2 && tc.headers[0] == "Content-Type" {
				headers = tc.headers
			}
			r := h.do(tc.method, tc.path, tc.body, headers...)
			wantError(t, r, tc.status, tc.code)
			if len(tc.headers) == 2 && tc.headers[0] == "Allow" && r.header.Get("Allow") != tc.headers[1] {
				t.Fatalf("Allow %q, want %q", r.header.Get("Allow"), tc.headers[1])
			}
		})
	}
	// Garbage on every upkeep route that takes a body.
	for _, route := range []string{"/backbone", "/backbone/contribute", resolve} {
		for _, g := range []string{"\x00\xff{[", `"hello"`, `null`, `12`, `{"content":null,"agent_id":null}`,
			`{"content":["x"]}`, `{"content":"x"}{"content":"y"}`, strings.Repeat("[", 10_000)} {
			wantClientError(t, h.do("POST", route, []byte(g), "Content-Type", "application/json"))
		}
	}
	if got := h.livingState(); got != state {
		t.Fatalf("refused requests changed the state:\nbefore %s\nafter  %s", state, got)
	}
	if _, ok := h.conflictItems()[conflict]; !ok {
		t.Fatal("the conflict is gone after refused resolves")
	}

	// With nothing on the backbone yet, a bad cursor is still refused.
	fresh := newLivingHarness(t, newClock())
	wantError(t, fresh.get("/backbone?cursor=x"), http.StatusBadRequest, "invalid_cursor")
	wantError(t, fresh.get("/backbone?limit=0"), http.StatusBadRequest, "invalid_limit")
}
