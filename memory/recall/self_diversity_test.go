package recall_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// k is the number of ranked hits; what co-access and expansion add is
// bounded (recall.expand_per_hit per hit, or the query's Expand) and has
// no rank.
func TestRecallKHitsRankedExpansionBounded(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	cfg.Recall.MMRLambda = 1 // rank by score alone
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clk, 80, 11)
	ctx := context.Background()
	for _, k := range []int{1, 3, 5} {
		for _, expand := range []*int{nil, new(0), new(2)} {
			rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "tomato basil aphid lisbon", K: k, Expand: expand, Budget: 1 << 20, Peek: true})
			if err != nil {
				t.Fatal(err)
			}
			hits := recall.Ranked(rs)
			if len(hits) != k {
				t.Fatalf("k %d: %d hits", k, len(hits))
			}
			for i, r := range hits {
				if r.Rank != i+1 || r.Via != recall.ViaHit {
					t.Fatalf("k %d: hit %d has rank %d, via %s", k, i, r.Rank, r.Via)
				}
				if i > 0 && (r.Score > hits[i-1].Score || r.Score == hits[i-1].Score && bytes.Compare(r.CID.Bytes(), hits[i-1].CID.Bytes()) < 0) {
					t.Fatalf("k %d: rank %d (%.4f) above rank %d (%.4f)", k, i+1, r.Score, i, hits[i-1].Score)
				}
			}
			bound := cfg.Recall.ExpandPerHit * k
			if expand != nil {
				bound = *expand
			}
			more := len(rs) - len(hits)
			for _, r := range rs {
				if r.Rank == 0 && r.Via == recall.ViaHit {
					t.Fatalf("a hit without a rank")
				}
			}
			if more > bound || bound > 0 && more == 0 {
				t.Fatalf("k %d, expand %v: %d more memories, bound %d", k, expand, more, bound)
			}
		}
	}
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "x", Expand: new(-1)}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("expand -1: %v", err)
	}
}

// The same question asked three times, at three times (three memories:
// dedup keeps distinct events), takes one place among the hits, which
// names the others; the budget holds different memories. Another speaker
// saying the same is another memory.
func TestRecallCollapsesNearIdenticalTexts(t *testing.T) {
	for _, collapse := range []float64{0.9, 0} {
		clk := clock.NewFake(memorytest.Epoch)
		cfg := memorytest.Config(t.TempDir())
		cfg.Recall.Collapse = collapse
		// Without the evidence of a memory's session and neighbours, nor
		// of the question it answers (which lift the answer amid the asks
		// above the third ask, so that k 3 is reached before it: never
		// examined, never collapsed).
		cfg.Recall.Paths.Context, cfg.Recall.Paths.Session, cfg.Recall.Paths.Reply = 0, 0, 0
		s := memorytest.Open(t, cfg, clk)
		o := memorytest.NewOwner(t, s, "gardener")
		at := func(min int) *int64 {
			clk.Set(memorytest.Epoch.Add(time.Duration(min) * time.Minute))
			ts := clk.Now().Unix()
			return &ts
		}
		q1 := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "Which bed did I plant the tomatoes in?"}}, Timestamp: at(1)}, nil)
		q2 := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "which bed did I plant the tomatoes in"}}, Timestamp: at(2)}, nil)
		q3 := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "Which bed did I plant the tomatoes in?!"}}, Timestamp: at(3)}, nil)
		maya := "maya"
		other := o.Add(&model.Memory{Data: model.Data{Other: &model.OtherData{Name: &maya, Content: "Which bed did I plant the tomatoes in?"}}, Timestamp: at(4)}, nil)
		answer := o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "I planted the tomatoes in the east bed."}}, Timestamp: at(5)}, nil)
		o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "The compost pile needs turning."}}, Timestamp: at(6)}, nil)

		// k 4: the answer and maya's words may rank above an ask (they do
		// with BM25's mean document length), which is then examined, and
		// folded, only while the fourth hit is sought.
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "which bed did I plant the tomatoes in?", K: 4, Peek: true})
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		hits := recall.Ranked(rs)
		var cids []cid.Cid
		for _, r := range hits {
			cids = append(cids, r.CID)
		}
		asks := []cid.Cid{q1, q2, q3}
		if collapse == 0 {
			if n := len(slices.DeleteFunc(slices.Clone(cids), func(c cid.Cid) bool { return !slices.Contains(asks, c) })); n < 2 {
				t.Fatalf("collapse off: %d of the asks among the hits %v", n, memorytest.Describe(hits))
			}
			continue
		}
		var kept *recall.Recalled
		for _, r := range rs {
			if slices.Contains(asks, r.CID) {
				if kept != nil {
					t.Fatalf("two of the same question returned: %v", memorytest.Describe(rs))
				}
				kept = r
			}
		}
		if kept == nil || len(kept.Collapsed) != 2 {
			t.Fatalf("the question: %+v in %v", kept, memorytest.Describe(rs))
		}
		for _, c := range kept.Collapsed {
			if !slices.Contains(asks, c) || c == kept.CID {
				t.Fatalf("collapsed %s into %s", c, kept.CID)
			}
		}
		if !slices.Contains(cids, other) || !slices.Contains(cids, answer) {
			t.Fatalf("the hits lack maya's words or the answer: %v", memorytest.Describe(hits))
		}
	}
}

// With recall.mmr_lambda < 1, a hit nearly the same as one already chosen
// yields its place to a different memory.
func TestRecallMMRDiversifies(t *testing.T) {
	ranked := func(lambda float64) []*recall.Recalled {
		clk := clock.NewFake(memorytest.Epoch)
		cfg := memorytest.Config(t.TempDir())
		cfg.Recall.MMRLambda, cfg.Recall.Collapse = lambda, 0
		// Without the neighbours' evidence, which would order the two
		// near-identical memories by their places in the chain.
		cfg.Recall.Paths.Context = 0
		s := memorytest.Open(t, cfg, clk)
		defer s.Close()
		o := memorytest.NewOwner(t, s, "a")
		for i, text := range []string{
			"tomato basil aphid garden compost",
			"tomato basil aphid garden compost lettuce",
			"tomato seedlings in the east bed near the river",
			"lisbon train porto novel",
			"lighthouse diary sunset painting",
		} {
			clk.Set(memorytest.Epoch.Add(time.Duration(i) * time.Minute))
			ts := clk.Now().Unix()
			o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}, Timestamp: &ts}, nil)
		}
		rs, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "tomato basil aphid garden compost", K: 2, Expand: new(0), Peek: true})
		if err != nil {
			t.Fatal(err)
		}
		return recall.Ranked(rs)
	}
	plain, diverse := ranked(1), ranked(0.5)
	if len(plain) != 2 || len(diverse) != 2 {
		t.Fatalf("hits: %v, %v", memorytest.Describe(plain), memorytest.Describe(diverse))
	}
	if plain[1].Memory.Text() != "tomato basil aphid garden compost lettuce" {
		t.Fatalf("by score: %v", memorytest.Describe(plain))
	}
	if diverse[0].CID != plain[0].CID || diverse[1].CID == plain[1].CID {
		t.Fatalf("by maximal marginal relevance: %v", memorytest.Describe(diverse))
	}
}

// A fresh sona does not recall another sona's memories unless asked to
// (scope self): sonas isolate perspectives (seed 000).
func TestDefaultScopeIsTheSona(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	if s.Config().Recall.Scope != recall.ScopeSona {
		t.Fatalf("default scope %q", s.Config().Recall.Scope)
	}
	alice, bob := memorytest.NewOwner(t, s, "alice"), memorytest.NewOwner(t, s, "bob")
	alice.Text("Maya lives in Lisbon and rides her bicycle to work")
	alice.Text("I keep my bicycle in the blue shed")
	ctx := context.Background()
	rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: bob.Sona, Text: "where is my bicycle?", Peek: true})
	if err != nil || len(rs) != 0 {
		t.Fatalf("bob recalled %v (%v)", memorytest.Describe(rs), err)
	}
	rs, err = memorytest.Recall(s, ctx, recall.Query{Sona: bob.Sona, Text: "where is my bicycle?", Scope: recall.ScopeSelf, Peek: true})
	if err != nil || len(rs) == 0 {
		t.Fatalf("bob in self scope recalled nothing (%v)", err)
	}
}

// A recall under a span traces its stages as children.
func TestRecallSpans(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clk)
	defer s.Close()
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clk, 40, 2)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "tomato basil", K: 3, Peek: true}); err != nil {
		t.Fatal(err)
	}
	root.End()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		byName[sp.Name()] = sp
	}
	parentOf := func(name string) oteltrace.SpanID {
		sp, ok := byName[name]
		if !ok {
			t.Fatalf("no span %q among %v", name, names(rec.Ended()))
		}
		return sp.Parent().SpanID()
	}
	span := byName["recall"]
	if span == nil || parentOf("recall") != root.SpanContext().SpanID() {
		t.Fatalf("recall span: %v", names(rec.Ended()))
	}
	for _, child := range []string{"embed", "recall.dense", "recall.bm25", "recall.fusion", "recall.select", "recall.expand"} {
		if parentOf(child) != span.SpanContext().SpanID() {
			t.Errorf("%s is not a child of recall", child)
		}
	}
	if parentOf("recall.affinity") != byName["recall.fusion"].SpanContext().SpanID() {
		t.Errorf("recall.affinity is not a child of recall.fusion")
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name())
	}
	return out
}
