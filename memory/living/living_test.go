package living

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// The sweep, the compressions and the dreams of a real self are tested in
// package memory (living_test.go) and through the heartbeat actor; these
// are Living Memory's own rules.

func branches(sizes map[string]int64) map[string]*messages.BranchStat {
	out := map[string]*messages.BranchStat{}
	for k, v := range sizes {
		out[k] = &messages.BranchStat{Active: v}
	}
	return out
}

func TestOversizedBranchesAtPhi(t *testing.T) {
	// mean = (a+10)/2; a > 1.618·mean ⇔ a > 42.36
	if got := OversizedBranches(branches(map[string]int64{"a": 43, "b": 10}), 1.618, 3); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("43 vs 10: %v, want [a]", got)
	}
	if got := OversizedBranches(branches(map[string]int64{"a": 42, "b": 10}), 1.618, 3); len(got) != 0 {
		t.Fatalf("42 vs 10: %v, want none", got)
	}
	// A lone branch is its own mean: never oversized.
	if got := OversizedBranches(branches(map[string]int64{"a": 1000}), 1.618, 3); len(got) != 0 {
		t.Fatalf("lone branch: %v", got)
	}
	// Below the minimum of nodes nothing compresses.
	if got := OversizedBranches(branches(map[string]int64{"a": 2, "b": 0, "c": 0}), 1.1, 3); len(got) != 0 {
		t.Fatalf("tiny branch: %v", got)
	}
}

func TestColdBranches(t *testing.T) {
	stats := map[string]*messages.BranchStat{
		"hot":  {Active: 10, Access: 100}, // 10 per memory
		"warm": {Active: 10, Access: 50},  // 5
		"cold": {Active: 10, Access: 1},   // 0.1 < 0.1 × mean(5.03)
		"tiny": {Active: 2, Access: 0},    // cold but below the minimum
	}
	if got := ColdBranches(stats, 0.1, 3); !slices.Equal(got, []string{"cold"}) {
		t.Fatalf("cold branches %v, want [cold]", got)
	}
	if got := ColdBranches(map[string]*messages.BranchStat{"a": {Active: 5}, "b": {Active: 5}}, 0.1, 3); got != nil {
		t.Fatalf("never accessed: %v, want none", got)
	}
}

func TestDreamInsights(t *testing.T) {
	c := func(i int) cid.Cid {
		id, _ := model.SumCID(model.CodecRaw, []byte{byte(i)})
		return id
	}
	in := []DreamInput{
		{CID: c(1), Text: "The deploy of the staking contract failed on gas.", Kind: "error", Vec: []float32{1, 0, 0}},
		{CID: c(2), Text: "Deploy staking contract again with more gas.", Kind: "goal", Vec: []float32{0.96, 0.28, 0}},
		{CID: c(3), Text: "The staking contract deploy succeeded.", Kind: "outcome", Vec: []float32{0.96, 0, 0.28}},
		{CID: c(4), Text: "Lunch was pasta.", Kind: "note", Vec: []float32{0, 0, 1}},
	}
	got := Dream(in, 0.9)
	byCat := map[string]InsightDraft{}
	for _, d := range got {
		if d.Confidence < 0 || d.Confidence > 1 {
			t.Fatalf("%s confidence %v", d.Category, d.Confidence)
		}
		byCat[d.Category] = d
	}
	p, ok := byCat[InsightPattern]
	if !ok || !slices.Equal(p.Sources, []cid.Cid{c(1), c(2), c(3)}) {
		t.Fatalf("pattern %+v: want the three deploy memories", p)
	}
	if d := byCat[InsightCorrection]; !slices.Equal(d.Sources, []cid.Cid{c(1)}) {
		t.Fatalf("correction %+v", d)
	}
	if d := byCat[InsightRecommendation]; !slices.Equal(d.Sources, []cid.Cid{c(2)}) {
		t.Fatalf("recommendation %+v", d)
	}
	if d := byCat[InsightSummary]; len(d.Sources) != 4 || d.Confidence < 0.4 {
		t.Fatalf("summary %+v", d)
	}
	if !slices.EqualFunc(got, Dream(in, 0.9), func(a, b InsightDraft) bool { return a.Insight == b.Insight && a.Confidence == b.Confidence }) {
		t.Fatal("dream is not deterministic")
	}
	if Dream(nil, 0.9) != nil {
		t.Fatal("nothing to dream of")
	}
}

// A merge's text comes from the summarizer when one is set (trimmed), and
// from the extractive summary when it fails.
func TestMergeSummaryFromTheSummarizerOrExtractive(t *testing.T) {
	texts := []string{"Bob planted tomatoes.", "The train was late.", "Bob likes trains."}
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("fail=", fail), func(t *testing.T) {
			var got []string
			l := New(nil, nil, Options{Logger: slog.New(slog.DiscardHandler), Summarize: func(_ context.Context, texts []string) (string, error) {
				got = texts
				if fail {
					return "", errors.New("model down")
				}
				return "  Bob planted tomatoes and took a late train.  ", nil
			}})
			text, err := l.summary(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, texts) {
				t.Errorf("the summarizer saw %q", got)
			}
			if !fail && text != "Bob planted tomatoes and took a late train." {
				t.Errorf("summary %q, want the summarizer's (trimmed)", text)
			}
			if fail && !strings.Contains(text, "Bob planted tomatoes.") {
				t.Errorf("summary %q, want the extractive one", text)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l := New(nil, nil, Options{Summarize: func(ctx context.Context, _ []string) (string, error) { return "", ctx.Err() }})
	if _, err := l.summary(ctx, texts); !errors.Is(err, context.Canceled) {
		t.Fatalf("a done context: %v", err)
	}
}

// The merge of a compression starts at the least important memory and
// takes those nearest it among the 2n least important, in chain order.
func TestLeastImportantRelated(t *testing.T) {
	mk := func(i int, importance float64, vec ...float32) member {
		c, _ := model.SumCID(model.CodecRaw, []byte{byte(i)})
		return member{c: c, meta: &messages.MemoryMeta{Importance: importance}, vec: vec}
	}
	members := []member{
		mk(0, 0.5, 1, 0),     // in the pool, far from the seed
		mk(1, 0.1, 0, 1),     // the seed: least important
		mk(2, 0.9, 0, 1),     // nearest, but too important for the pool of 4
		mk(3, 0.2, 0.6, 0.8), // nearer than 0
		mk(4, 0.3, 0.8, 0.6),
		mk(5, 0.8, 0, 1),
	}
	got := leastImportantRelated(members, 2)
	var idx []cid.Cid
	for _, m := range got {
		idx = append(idx, m.c)
	}
	if want := []cid.Cid{members[1].c, members[3].c}; !slices.Equal(idx, want) {
		t.Fatalf("picked %v, want the seed (1) and its nearest in the pool (3), in chain order", idx)
	}
}

// A pattern's themes are words as the memories wrote them, not stems
// (issue 19: "Recurring theme (liv, maya, lisbon)").
func TestDreamThemesAreWords(t *testing.T) {
	c := func(i int) cid.Cid {
		id, _ := model.SumCID(model.CodecRaw, []byte{byte(i)})
		return id
	}
	in := []DreamInput{
		{CID: c(1), Text: "Maya lives in Lisbon.", Kind: "fact", Vec: []float32{1, 0}},
		{CID: c(2), Text: "Maya loves Lisbon and lives by the river.", Kind: "fact", Vec: []float32{0.96, 0.28}},
		{CID: c(3), Text: "maya lived in lisbon", Kind: "fact", Vec: []float32{0.96, -0.28}},
	}
	var pattern string
	for _, d := range Dream(in, 0.9) {
		if d.Category == InsightPattern {
			pattern = d.Insight
		}
	}
	if want := "Recurring theme (Lisbon, lives, Maya) across 3 memories: "; !strings.HasPrefix(pattern, want) {
		t.Fatalf("pattern %q, want it to begin %q", pattern, want)
	}
	// On a tie of forms, the one written first; a stem's forms count
	// together ("paints", "painted", "painting" are one theme).
	got := themes([]string{"Painting walls. painted doors.", "She paints; DOORS too."}, 2)
	if !slices.Equal(got, []string{"Painting", "doors"}) {
		t.Fatalf("themes %q, want [Painting doors]", got)
	}
}

// An insight is its memory, its mark and its sona; the API's view names
// each field, CIDs as strings, and a memory without edges has no sources.
func TestInsightView(t *testing.T) {
	src1, src2 := cidOf(t, "first source"), cidOf(t, "second source")
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "Recurring theme"}},
		Edges: []model.Edge{{Target: src1, Weight: 1}, {Target: src2, Weight: 1}}}
	c := cidOf(t, "the insight")
	v := InsightOf(c, m, &messages.InsightMark{Category: InsightPattern, Confidence: 0.8}, "sona-1", 1700000000).View()
	want := &messages.Insight{Cid: c.String(), Insight: "Recurring theme", Category: InsightPattern, Confidence: 0.8,
		Sources: []string{src1.String(), src2.String()}, Sona: "sona-1", GeneratedAt: 1700000000}
	if !proto.Equal(v, want) {
		t.Fatalf("view %v, want %v", v, want)
	}
	bare := InsightOf(c, &model.Memory{Data: model.Data{Text: &model.TextData{Content: "x"}}}, nil, "", 0).View()
	if len(bare.Sources) != 0 || bare.Category != "" || bare.Confidence != 0 {
		t.Fatalf("an insight without mark or edges: %v", bare)
	}
}

func cidOf(t *testing.T, s string) cid.Cid {
	t.Helper()
	c, err := model.SumCID(model.CodecRaw, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
