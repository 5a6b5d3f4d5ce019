package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

// The reranker of recall (recall.rerank) against a fake server speaking
// the /rerank formats (and OpenAI's chat, for the chat-scored one);
// everything else is the real server.

var gardenNotes = []string{
	"The garden has red roses by the fence.",
	"The garden gate squeaks in the wind.",
	"Tomatoes grow in the garden behind the house.",
	"The garden hose is green and far too short.",
	"Bees visit the garden every morning.",
	"A garden gnome stands guard over the garden pond.",
}

// withReranker points recall.rerank at srv. Recency, importance and
// co-access are off, so that the recalls of a test, which touch what
// they return, do not change the fused order; so is MMR's diversity, so
// that the hits come in the order of their scores, by which the reranker's
// top_n are taken (the garden notes all say "garden": diversity reorders
// the near ties among them).
func withReranker(provider, url string, topN int) func(*config.Config) {
	return func(c *config.Config) {
		c.Recall.Rerank = config.Rerank{Provider: provider, BaseURL: url, Model: "bge-reranker-v2-m3", TopN: topN,
			Timeout: config.Duration(5 * time.Second)}
		c.Recall.Weights.Recency, c.Recall.Weights.Importance = 0, 0
		c.Recall.CoAccessRate, c.Recall.CoAccessPartners = 0, 0
		c.Recall.MMRLambda = 1
	}
}

// gardenRecall recalls the garden notes' hits in rank order, checking
// that each one's contributions add up to its score.
func gardenRecall(t *testing.T, h *harness, sona string) []*messages.RecalledMemory {
	t.Helper()
	r := h.post("/sona/"+sona+"/recall", map[string]any{"query": "What is in the garden?", "k": 6, "expand": 0, "explain": true})
	if r.status != 200 {
		t.Fatalf("recall: %s", r)
	}
	var resp messages.RecallResponse
	if err := protojson.Unmarshal(r.body, &resp); err != nil {
		t.Fatal(err)
	}
	hits := resp.Memories
	for _, m := range hits {
		if m.Memory.GetData().GetFields()["content"].GetStringValue() == "" {
			t.Fatalf("a hit without its text: %v", m)
		}
	}
	slices.SortFunc(hits, func(a, b *messages.RecalledMemory) int { return int(a.GetRank() - b.GetRank()) })
	for _, m := range hits {
		c := m.Explain.Contributions
		sum := c.Dense + c.Bm25 + c.Affinity + c.Metric + c.Context + c.Time + c.Speaker + c.Session + c.Feedback + c.Reply +
			c.Recency + c.Importance + c.SonaSimilarity + c.Path + c.GetRerank()
		if math.Abs(sum-m.Score) > 1e-9 {
			t.Errorf("%s: the contributions add up to %v, the score is %v", m.Cid, sum, m.Score)
		}
	}
	return hits
}

func texts(hits []*messages.RecalledMemory) []string {
	out := make([]string, len(hits))
	for i, m := range hits {
		out[i] = m.Memory.GetData().GetFields()["content"].GetStringValue()
	}
	return out
}

func rerankRanks(hits []*messages.RecalledMemory) []int32 {
	out := make([]int32, len(hits))
	for i, m := range hits {
		out[i] = m.Explain.GetRerankRank()
	}
	return out
}

func TestRerankerReordersTheBestCandidates(t *testing.T) {
	for _, provider := range []string{config.RerankAPI, config.RerankTEI} {
		t.Run(provider, func(t *testing.T) {
			var fail atomic.Bool
			srv := fakeprovider.Rerank(func(_ int, req fakeprovider.Request) fakeprovider.Reply {
				if fail.Load() {
					return fakeprovider.Reply{Status: 500}
				}
				_, docs := req.RerankDocs()
				scores := make([]float64, len(docs))
				for i := range docs {
					scores[i] = float64(i) // the fused order reversed
				}
				return fakeprovider.Reply{Scores: scores}
			})
			defer srv.Close()
			h := newHarness(t, withReranker(provider, srv.URL, 4))
			id := h.newSona("alice")
			for _, n := range gardenNotes {
				h.insertText(id, n)
			}

			// A failing reranker: the fused order, nothing reranked.
			fail.Store(true)
			fused := gardenRecall(t, h, id)
			if len(fused) != 6 || !slices.Equal(rerankRanks(fused), make([]int32, 6)) {
				t.Fatalf("fallback: %d hits, rerank ranks %v", len(fused), rerankRanks(fused))
			}
			fail.Store(false)
			reranked := gardenRecall(t, h, id)
			want := texts(fused)
			slices.Reverse(want[:4]) // top_n 4: the four best reversed, the rest in place
			if got := texts(reranked); !slices.Equal(got, want) {
				t.Fatalf("reranked\n%q\nwant\n%q", got, want)
			}
			if got := rerankRanks(reranked); !slices.Equal(got, []int32{1, 2, 3, 4, 0, 0}) {
				t.Fatalf("rerank ranks %v", got)
			}
			if got := reranked[0].Explain.GetRerank(); got != 3 {
				t.Fatalf("the first hit's reranker score %v, want 3", got)
			}
			// The scores keep fusion's: the four best fused scores, handed out
			// in the reranker's order.
			for i := range 4 {
				if reranked[i].Score != fused[i].Score {
					t.Errorf("hit %d scores %v, the fused %d-th best %v", i+1, reranked[i].Score, i+1, fused[i].Score)
				}
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d rerank requests", len(reqs))
			}
			query, docs := reqs[1].RerankDocs()
			if query != "What is in the garden?" || !slices.Equal(docs, texts(fused)[:4]) {
				t.Fatalf("the reranker was asked %q about %q; want the four best fused %q", query, docs, texts(fused)[:4])
			}
			metrics := string(h.get("/metrics").body)
			for _, want := range []string{
				"memoria_recall_rerank_fallbacks_total 1",
				fmt.Sprintf(`memoria_llm_calls_total{model="bge-reranker-v2-m3",op="rerank",provider="rerank-%s"} 2`, provider),
				fmt.Sprintf(`memoria_llm_errors_total{class="server",model="bge-reranker-v2-m3",provider="rerank-%s"} 1`, provider),
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("metrics lack %s", want)
				}
			}
		})
	}
}

func TestRerankerTimeoutKeepsTheFusedOrder(t *testing.T) {
	var hang atomic.Bool
	srv := fakeprovider.Rerank(func(_ int, req fakeprovider.Request) fakeprovider.Reply {
		_, docs := req.RerankDocs()
		return fakeprovider.Reply{Hang: hang.Load(), Scores: make([]float64, len(docs))} // all alike: the fused order
	})
	defer srv.Close()
	h := newHarness(t, withReranker(config.RerankAPI, srv.URL, 20), func(c *config.Config) {
		c.Recall.Rerank.Timeout = config.Duration(150 * time.Millisecond)
	})
	id := h.newSona("alice")
	for _, n := range gardenNotes {
		h.insertText(id, n)
	}
	fused := gardenRecall(t, h, id)
	if got := rerankRanks(fused); !slices.Equal(got, []int32{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("ties keep the fused order, reranked: %v", got)
	}
	hang.Store(true)
	start := time.Now()
	timedOut := gardenRecall(t, h, id)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the recall took %s", took)
	}
	if !slices.Equal(texts(timedOut), texts(fused)) || !slices.Equal(rerankRanks(timedOut), make([]int32, 6)) {
		t.Fatalf("after a timeout\n%q (ranks %v)\nwant the fused\n%q", texts(timedOut), rerankRanks(timedOut), texts(fused))
	}
	select {
	case <-srv.Canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the reranker's request was not cancelled")
	}
	metrics := string(h.get("/metrics").body)
	for _, want := range []string{"memoria_recall_rerank_fallbacks_total 1",
		`memoria_llm_errors_total{class="timeout",model="bge-reranker-v2-m3",provider="rerank-rerank"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestChatScoredReranker(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"[1] 2/10\n[2] 9/10"}}
	})
	defer srv.Close()
	h := newHarness(t, withReranker(config.RerankChat, srv.URL, 2))
	id := h.newSona("alice")
	for _, n := range gardenNotes {
		h.insertText(id, n)
	}
	srvOff := fakeprovider.Rerank(func(int, fakeprovider.Request) fakeprovider.Reply { return fakeprovider.Reply{} })
	defer srvOff.Close()
	off := newHarness(t, withReranker(config.RerankAPI, srvOff.URL, 2), func(c *config.Config) { c.Recall.Rerank.Provider = config.RerankOff })
	offID := off.newSona("alice")
	for _, n := range gardenNotes {
		off.insertText(offID, n)
	}
	fused := texts(gardenRecall(t, off, offID))
	if srvOff.Count() != 0 {
		t.Fatal("a reranker that is off was asked")
	}
	got := gardenRecall(t, h, id)
	want := slices.Clone(fused)
	want[0], want[1] = want[1], want[0]
	if !slices.Equal(texts(got), want) || got[0].Explain.GetRerank() != 9 {
		t.Fatalf("chat-reranked\n%q\nwant\n%q", texts(got), want)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d chat requests", n)
	}
	body := string(srv.Requests()[0].Body)
	if !strings.Contains(body, `"model":"bge-reranker-v2-m3"`) || !strings.Contains(body, "[2] "+fused[1]) {
		t.Fatalf("chat request %s", body)
	}
}

// The reranker is a stage of its own in the recall's trace, and says
// there when it fell back.
func TestRerankSpan(t *testing.T) {
	var failing atomic.Bool
	srv := fakeprovider.Rerank(func(_ int, req fakeprovider.Request) fakeprovider.Reply {
		if failing.Load() {
			return fakeprovider.Reply{Raw: `{"results":[{"index":99,"relevance_score":1}]}`}
		}
		_, docs := req.RerankDocs()
		return fakeprovider.Reply{Scores: make([]float64, len(docs))}
	})
	defer srv.Close()
	h := newHarness(t, withReranker(config.RerankAPI, srv.URL, 3))
	id := h.newSona("alice")
	for _, n := range gardenNotes {
		h.insertText(id, n)
	}
	for _, fail := range []bool{false, true} {
		failing.Store(fail)
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		ctx, root := tp.Tracer("test").Start(context.Background(), "request")
		if _, _, err := h.app.Self.Recaller.Recall(ctx, recall.Query{Sona: id, Text: "What is in the garden?", Peek: true}); err != nil {
			t.Fatalf("fail=%v: the recall failed: %v", fail, err)
		}
		root.End()
		tp.Shutdown(context.Background())
		var parent, stage sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			switch sp.Name() {
			case "recall":
				parent = sp
			case "recall.rerank":
				stage = sp
			}
		}
		if parent == nil || stage == nil || stage.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Fatalf("fail=%v: no recall.rerank span under recall", fail)
		}
		attrs := map[string]string{}
		for _, a := range stage.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if attrs["memoria.recall.rerank.fallback"] != fmt.Sprint(fail) || attrs["memoria.recall.candidates"] != "3" {
			t.Fatalf("fail=%v: span attributes %v", fail, attrs)
		}
		if failed := stage.Status().Code.String() == "Error"; failed != fail {
			t.Fatalf("fail=%v: span status %v", fail, stage.Status())
		}
	}
}

// A chat reranker on OpenAI's own API needs a key (config/rerank_test.go
// checks the rest of the settings).
func TestRerankerNeedsAKeyForOpenAI(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Recall.Rerank.Provider, cfg.Recall.Rerank.Model = config.RerankChat, "gpt-4o-mini"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "recall.rerank: set the API key in $MEMORIA_RERANK_API_KEY") {
		t.Fatalf("err = %v", err)
	}
}
