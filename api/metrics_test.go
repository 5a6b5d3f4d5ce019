package api_test

// GET /metrics: every family appears and moves with the work that feeds
// it. Limits: body size, k and budget caps, the request timeout, over REST
// and /mcp.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/testutil"
)

// metric returns the value of the series name{labels…} in a Prometheus
// text exposition, and whether it is there.
func metric(body, name string, labels ...string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, val := line[:i], line[i+1:]
		n, lbl, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(lbl, fmt.Sprintf("%s=%q", labels[i], labels[i+1])) {
				match = false
			}
		}
		if match {
			v, err := strconv.ParseFloat(val, 64)
			return v, err == nil
		}
	}
	return 0, false
}

func (h *harness) scrape() string {
	h.t.Helper()
	r := h.get("/metrics")
	if r.status != 200 {
		h.t.Fatalf("metrics: %s", r)
	}
	return string(r.body)
}

// eventually polls cond until it holds or the deadline passes.
func TestMetricsAppearAndMove(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	before := h.scrape()
	for _, name := range []string{"memoria_sonas", "memoria_memories", "memoria_index_entries", "memoria_store_disk_bytes", "memoria_store_gc_passes_total"} {
		if _, ok := metric(before, name); !ok {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	if v, _ := metric(before, "memoria_memories"); v != 0 {
		t.Fatalf("memories before any insert: %v", v)
	}

	id := str(t, h.post("/sonas", map[string]any{"name": "metered"}).obj(t, 201)["uuid"])
	for i := range 3 {
		h.post("/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": fmt.Sprintf("metered fact %d about llamas", i)}, "dedup": false}).obj(t, 201)
	}
	h.post("/sona/"+id+"/recall", map[string]any{"query": "llamas"}).obj(t, 200)
	h.post("/sona/"+id+"/chat", map[string]any{"content": "tell me about llamas"}).obj(t, 200)
	h.post("/sona/"+id+"/query", map[string]any{"content": "llamas?"}).obj(t, 200)
	h.get("/sona/not-a-sona")
	h.get("/no/such/route")

	after := h.scrape()
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"memoria_sonas", nil, 1},
		{"memoria_memories", nil, 5}, // 3 inserts + the chat's input and response
		{"memoria_http_requests_total", []string{"route", "POST /sonas", "method", "POST", "status", "201"}, 1},
		{"memoria_http_requests_total", []string{"route", "POST /memories", "status", "201"}, 3},
		{"memoria_http_requests_total", []string{"route", "GET /sona/{uuid}", "status", "404"}, 1},
		{"memoria_http_requests_total", []string{"route", "unmatched", "status", "404"}, 1},
		{"memoria_http_request_duration_seconds_count", []string{"route", "POST /sona/{uuid}/recall", "status", "200"}, 1},
		{"memoria_recall_duration_seconds_count", []string{"op", "recall"}, 1},
		{"memoria_recall_duration_seconds_count", []string{"op", "chat"}, 1},
		{"memoria_recall_duration_seconds_count", []string{"op", "query"}, 1},
	}
	for _, c := range checks {
		if v, ok := metric(after, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	// The recall and the chat read through the caches, and each read counts.
	reads := func(b, cache string) float64 {
		hits, ok := metric(b, "memoria_cache_hits_total", "cache", cache)
		misses, ok2 := metric(b, "memoria_cache_misses_total", "cache", cache)
		if _, ok3 := metric(b, "memoria_cache_entries", "cache", cache); !ok || !ok2 || !ok3 {
			t.Fatalf("cache %q missing from /metrics", cache)
		}
		return hits + misses
	}
	// (The hot states' cache is read only when a metadata record is not
	// cached, the blocks' only with compressed tables, and the document
	// frequencies only once a sona has mid-term pages.)
	for _, cache := range []string{"memories", "metadata", "hot", "links", "blocks", "tiers", "terms", "sonas"} {
		if r0, r1 := reads(before, cache), reads(after, cache); cache != "blocks" && cache != "hot" && cache != "terms" && r1 <= r0 {
			t.Errorf("cache %q: %v reads before the recalls, %v after", cache, r0, r1)
		}
	}
	// The writes went through the group committer: some commits, at
	// least one operation each, time busy, part of it in Badger's commits.
	commits, _ := metric(after, "memoria_store_commits_total")
	ops, _ := metric(after, "memoria_store_committed_ops_total")
	busy, _ := metric(after, "memoria_store_committer_busy_seconds_total")
	inCommit, ok := metric(after, "memoria_store_commit_seconds_total")
	if c0, _ := metric(before, "memoria_store_commits_total"); !ok || commits <= c0 || ops < commits || busy <= 0 || inCommit <= 0 || inCommit > busy {
		t.Errorf("committer: %v commits (%v before), %v ops, %v s busy, %v s in Badger's commits (present %v)", commits, c0, ops, busy, inCommit, ok)
	}
	// The recalls' traces waited for a commit to share.
	deferred, ok := metric(after, "memoria_store_committed_deferred_ops_total")
	if d0, _ := metric(before, "memoria_store_committed_deferred_ops_total"); !ok || deferred <= d0 || deferred > ops {
		t.Errorf("deferred ops: %v (%v before) of %v ops (present %v)", deferred, d0, ops, ok)
	}
	// Its batches by their time: more of them than before, every one
	// within the last bucket, their times summing to its time busy.
	batches, ok := metric(after, "memoria_store_batch_duration_seconds_count")
	b0, _ := metric(before, "memoria_store_batch_duration_seconds_count")
	all, ok2 := metric(after, "memoria_store_batch_duration_seconds_bucket", "le", "+Inf")
	fast, ok3 := metric(after, "memoria_store_batch_duration_seconds_bucket", "le", "0.005")
	sum, ok4 := metric(after, "memoria_store_batch_duration_seconds_sum")
	if !ok || !ok2 || !ok3 || !ok4 || batches <= b0 || all != batches || fast > all || sum != busy {
		t.Errorf("batches: %v (%v before), %v within +Inf, %v within 5 ms, %v s summed against %v s busy (present %v %v %v %v)", batches, b0, all, fast, sum, busy, ok, ok2, ok3, ok4)
	}
	// The submitted writes' waits by stage: the inserts and the chat's
	// appends waited in each, no more of them than the operations
	// committed (the deferred ones are not counted), each stage's count
	// within its last bucket.
	for _, stage := range []string{"queued", "batch", "acknowledge"} {
		n, ok := metric(after, "memoria_store_write_wait_seconds_count", "stage", stage)
		n0, _ := metric(before, "memoria_store_write_wait_seconds_count", "stage", stage)
		inf, ok2 := metric(after, "memoria_store_write_wait_seconds_bucket", "stage", stage, "le", "+Inf")
		if _, ok3 := metric(after, "memoria_store_write_wait_seconds_sum", "stage", stage); !ok || !ok2 || !ok3 || n-n0 < 5 || n > ops || inf != n {
			t.Errorf("writes' waits %s: %v (%v before) of %v ops, %v within +Inf (present %v %v %v)", stage, n, n0, ops, inf, ok, ok2, ok3)
		}
	}
	// What the commits wrote, by key space: the appends' blocks and
	// metadata among them, keys no fewer than bytes' worth.
	for _, space := range []string{"b/", "m/"} {
		b, ok := metric(after, "memoria_store_written_bytes_total", "space", space)
		b0, _ := metric(before, "memoria_store_written_bytes_total", "space", space)
		k, ok2 := metric(after, "memoria_store_written_keys_total", "space", space)
		k0, _ := metric(before, "memoria_store_written_keys_total", "space", space)
		if !ok || !ok2 || k-k0 < 5 || b-b0 < 40*(k-k0) {
			t.Errorf("written into %s: %v keys, %v bytes (%v, %v before; present %v %v)", space, k, b, k0, b0, ok, ok2)
		}
	}
	// The runtime's figures of its collector (updated at each cycle's
	// end): the collector's CPU time a part of what was used, and a live
	// heap.
	gc, ok := metric(after, "go_cpu_classes_gc_total_cpu_seconds_total")
	total, ok2 := metric(after, "go_cpu_classes_total_cpu_seconds_total")
	idle, ok3 := metric(after, "go_cpu_classes_idle_cpu_seconds_total")
	live, ok4 := metric(after, "go_gc_heap_live_bytes")
	if !ok || !ok2 || !ok3 || !ok4 || total <= 0 || gc <= 0 || gc > total-idle || live <= 0 {
		t.Errorf("collector: %v s of CPU, %v idle, %v the collector's, %v bytes live (present %v %v %v %v)", total, idle, gc, live, ok, ok2, ok3, ok4)
	}
	// A store this small never stalls its writes, and says so.
	for _, name := range []string{"memoria_store_write_stalls_total", "memoria_store_write_stall_seconds_total"} {
		if v, ok := metric(after, name); !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, v, ok)
		}
	}
	// The store's open reads are counted (how many depends on what the
	// committer and the background are doing at the scrape).
	for _, name := range []string{"memoria_store_reads_open", "memoria_store_oldest_read_commits_behind"} {
		if _, ok := metric(after, name); !ok {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	// The recalls took turns on the workers (recall.workers: the
	// cores), none computing or waiting once they are answered.
	if v, ok := metric(after, "memoria_recall_workers"); !ok || v != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("memoria_recall_workers = %v (present %v), want GOMAXPROCS", v, ok)
	}
	for _, name := range []string{"memoria_recall_workers_busy", "memoria_recall_waiting", "memoria_recall_waits_total", "memoria_recall_wait_seconds_total"} {
		if _, ok := metric(after, name); !ok {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	if v, _ := metric(after, "memoria_recall_workers_busy"); v != 0 {
		t.Errorf("memoria_recall_workers_busy = %v with every recall answered", v)
	}
	// What the recalls left behind waits in memory, and says how much.
	for _, what := range []string{"coaccess_lists", "touches"} {
		if _, ok := metric(after, "memoria_learning_waiting", "what", what); !ok {
			t.Errorf("memoria_learning_waiting{what=%q} missing from /metrics", what)
		}
	}
	if _, ok := metric(after, "memoria_links_back_waiting"); !ok {
		t.Error("memoria_links_back_waiting missing from /metrics")
	}
	if _, ok := metric(after, "memoria_actor_mailbox_depth", "actor", "sona"); !ok {
		t.Errorf("no mailbox depth for sona actors")
	}
	// The derived indexes catch up with the five memories.
	testutil.Eventually(t, "the vector and text indexes to hold 5 entries", func() bool {
		b := h.scrape()
		v, _ := metric(b, "memoria_index_entries", "index", "vector")
		x, _ := metric(b, "memoria_index_entries", "index", "text")
		return v >= 5 && x >= 5
	})
	// Their float32 vectors: one chunk of 256 in the heap (none before),
	// none spilled.
	const chunk = 256 * 384 * 4
	for _, c := range []struct {
		body        string
		heap, spill float64
	}{{before, 0, 0}, {h.scrape(), chunk, 0}} {
		heap, ok := metric(c.body, "memoria_vector_float_bytes", "where", "heap")
		spill, ok2 := metric(c.body, "memoria_vector_float_bytes", "where", "spill")
		if !ok || !ok2 || heap != c.heap || spill != c.spill {
			t.Errorf("memoria_vector_float_bytes: heap %v, spill %v (present %v %v), want %v, %v", heap, spill, ok, ok2, c.heap, c.spill)
		}
	}
	// No sona of five memories is packed.
	if v, ok := metric(after, "memoria_vector_pack_bytes"); !ok || v != 0 {
		t.Errorf("memoria_vector_pack_bytes = %v (present %v), want 0", v, ok)
	}
}

// The store's size on disk moves with its writes (measured at each
// scrape), and a pass of the garbage collection measures its key spaces
// and counts itself.
func TestMetricsStoreSizes(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	before := h.scrape()
	if _, ok := metric(before, "memoria_store_space_bytes", "space", "m/"); ok {
		t.Fatal("key spaces before any pass of the garbage collection")
	}
	disk := func(b string) float64 {
		var sum float64
		for _, part := range []string{"tables", "value_log", "wal", "other"} {
			v, ok := metric(b, "memoria_store_disk_bytes", "part", part)
			if !ok {
				t.Fatalf("memoria_store_disk_bytes{part=%q} missing", part)
			}
			sum += v
		}
		return sum
	}
	d0 := disk(before)
	id := str(t, h.post("/sonas", map[string]any{"name": "disk"}).obj(t, 201)["uuid"])
	for i := range 20 {
		h.post("/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": fmt.Sprintf("fact %d %s", i, strings.Repeat("x", 500))}, "dedup": false}).obj(t, 201)
	}
	if d := disk(h.scrape()); d <= d0 {
		t.Fatalf("the store's files after 20 inserts: %v bytes, before %v", d, d0)
	}
	rep := h.post("/admin/gc", nil).obj(t, 200)
	if !rep["compacted"].(bool) {
		t.Fatalf("POST /admin/gc did not compact: %v", rep)
	}
	after := h.scrape()
	if v, _ := metric(after, "memoria_store_space_keys", "space", "m/"); v != 20 {
		t.Fatalf("memoria_store_space_keys{space=m/} = %v, want 20", v)
	}
	if v, _ := metric(after, "memoria_store_space_bytes", "space", "b/"); v < 20*500 {
		t.Fatalf("memoria_store_space_bytes{space=b/} = %v", v)
	}
	var passes float64
	for _, r := range []string{"reclaimed", "nothing", "skipped", "failed"} {
		v, _ := metric(after, "memoria_store_gc_passes_total", "result", r)
		passes += v
	}
	if passes != 1 {
		t.Fatalf("%v passes counted after one", passes)
	}
}

// A crashing sona actor is counted as a restart; messages queued behind a
// busy sona actor show as mailbox depth, and drain back to zero.
func TestMetricsActorRestartsAndMailbox(t *testing.T) {
	var mu sync.Mutex
	crashed := false
	block := make(chan struct{})
	blocking := false
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Evaluation.Mode = "off"
	cfg.Actors.AskTimeout = config.Duration(300 * time.Millisecond) // the crashed insert's caller waits this long
	knobs := actors.TestingKnobs{BeforeAppend: func(_ string, seq int64) {
		mu.Lock()
		crash, wait := !crashed, blocking
		crashed = true
		mu.Unlock()
		if crash {
			panic("injected crash")
		}
		if wait {
			<-block
		}
	}}
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{Knobs: knobs})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.API)
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	h := &harness{t: t, app: a, url: srv.URL, hc: srv.Client()}
	id := str(t, h.post("/sonas", map[string]any{"name": "fragile"}).obj(t, 201)["uuid"])
	insert := func(s string) response {
		return h.post("/memories", map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": s}})
	}
	if r := insert("the first insert crashes the actor"); r.status < 500 {
		t.Fatalf("crashed insert: %s", r)
	}
	testutil.Eventually(t, "a sona restart in the metrics", func() bool {
		v, _ := metric(h.scrape(), "memoria_actor_restarts_total", "actor", "sona")
		return v >= 1
	})

	mu.Lock()
	blocking = true
	mu.Unlock()
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.hc.Post(h.url+"/memories", "application/json",
				strings.NewReader(fmt.Sprintf(`{"sona":%q,"data":{"kind":"text","content":"queued %d"},"dedup":false}`, id, i)))
		}()
	}
	testutil.Eventually(t, "messages waiting in the sona's mailbox", func() bool {
		v, _ := metric(h.scrape(), "memoria_actor_mailbox_depth", "actor", "sona")
		return v >= 1
	})
	mu.Lock()
	blocking = false
	mu.Unlock()
	close(block)
	wg.Wait()
	testutil.Eventually(t, "the sona's mailbox to drain", func() bool {
		v, _ := metric(h.scrape(), "memoria_actor_mailbox_depth", "actor", "sona")
		return v == 0
	})
}

func TestLimits(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.MaxBodyBytes = 1024
		c.Server.MaxK = 5
		c.Server.MaxBudgetChars = 300
	})
	id := str(t, h.post("/sonas", map[string]any{"name": "limited"}).obj(t, 201)["uuid"])
	wantError(t, h.post("/sona/"+id+"/recall", map[string]any{"query": "x", "k": 6}), 400, "invalid")
	wantError(t, h.post("/sona/"+id+"/recall", map[string]any{"query": "x", "budget_chars": 301}), 400, "invalid")
	wantError(t, h.post("/sona/"+id+"/chat", map[string]any{"content": "x", "k": 6}), 400, "invalid")
	wantError(t, h.post("/sona/"+id+"/query", map[string]any{"content": "x", "budget_chars": 301}), 400, "invalid")
	h.post("/sona/"+id+"/recall", map[string]any{"query": "x", "k": 5, "budget_chars": 300}).obj(t, 200)

	big := map[string]any{"sona": id, "data": map[string]any{"kind": "text", "content": strings.Repeat("y", 2000)}}
	wantError(t, h.post("/memories", big), 413, "too_large")
	// /mcp has the same body limit.
	r := h.do("POST", "/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":%q}}`, strings.Repeat("z", 2000)),
		"Accept", "application/json, text/event-stream")
	if r.status != 413 {
		t.Fatalf("oversized /mcp body: %s", r)
	}
	if _, mems := h.app.Self.Counts(); mems != 0 {
		t.Fatalf("refused requests stored %d memories", mems)
	}

	// The request timeout: with a deadline already past, a chat is refused
	// with the setting named, and nothing is stored.
	th := newHarness(t, func(c *config.Config) {
		c.Evaluation.Mode = "off"
		c.Server.RequestTimeout = config.Duration(time.Nanosecond)
	})
	rec, err := th.app.Self.Sonas.Create(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	r = th.post("/sona/"+rec.Uuid+"/chat", map[string]any{"content": "hello"})
	wantError(t, r, 504, "timeout")
	if !strings.Contains(string(r.body), "server.request_timeout") {
		t.Fatalf("timeout error does not name the setting: %s", r)
	}
	if _, mems := th.app.Self.Counts(); mems != 0 {
		t.Fatalf("a timed-out chat stored %d memories", mems)
	}
}
