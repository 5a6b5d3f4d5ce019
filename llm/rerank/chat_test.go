package rerank_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/internal/fakeprovider"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/llm/openai"
	"github.com/memoria-ai/memoria/llm/rerank"
)

var docs = []string{"The shed key hangs by the door.", "Maya's birthday is in May.", "The bicycle is in the blue shed."}

// same compares score lists, NaN equal to NaN.
func same(got, want []float64) bool {
	return slices.EqualFunc(got, want, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) })
}

func TestChatScoresThroughTheChatAPI(t *testing.T) {
	srv := fakeprovider.OpenAI(func(int, fakeprovider.Request) fakeprovider.Reply {
		return fakeprovider.Reply{Tokens: []string{"[1] 3\n[2] ", "1\n[3] 9"}}
	})
	defer srv.Close()
	chat, err := openai.NewChat(openai.Options{BaseURL: srv.URL, Model: "llama3.1:8b"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := rerank.NewChat(chat).Rerank(context.Background(), "Where is the bicycle?", docs)
	if err != nil {
		t.Fatal(err)
	}
	if !same(got, []float64{3, 1, 9}) {
		t.Fatalf("scores %v", got)
	}
	body := string(srv.Requests()[0].Body)
	for _, want := range []string{"Query: Where is the bicycle?", "[1] The shed key hangs by the door.", "[3] The bicycle is in the blue shed.", "0 (unrelated) to 10"} {
		if !strings.Contains(body, want) {
			t.Errorf("the prompt lacks %q: %s", want, body)
		}
	}
}

func TestParseChatScores(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		reply string
		want  []float64
	}{
		{"[1] 3\n[2] 10\n[3] 7", []float64{3, 10, 7}},
		{"1: 3\n2: 8.5\n3: 0", []float64{3, 8.5, 0}},
		{"Passage 2 - 9/10\nPassage 1 - 2/10\nPassage 3 - 5/10", []float64{2, 9, 5}},
		{"Here are the scores:\n- [1]: 4 (mentions the key)\n- [2]: 1\n- [3]: 6", []float64{4, 1, 6}},
		{"#1 score: 7\n#2 score: 3\n#3 relevance = 2", []float64{7, 3, 2}},
		{"```\n[1] 5\n[2] 6\n[3] 7\n```", []float64{5, 6, 7}},
		{"[1] 12\n[2] 5\n[1] 0", []float64{10, 5, nan}}, // clamped; the first wins; [3] missing
		{"[3] 4", []float64{nan, nan, 4}},
		{"7\n2\n9", []float64{7, 2, 9}},
		{"7/10\n2/10\n9/10", []float64{7, 2, 9}},
		{"[7, 2, 9]", []float64{7, 2, 9}},
		{`{"scores": [1, 2, 3]}`, []float64{1, 2, 3}},
		{`{"scores": [{"index": 3, "score": 8}, {"index": 1, "score": 2}]}`, []float64{2, nan, 8}},
		{`[{"index": 2, "score": 6}]`, []float64{nan, 6, nan}},
	} {
		got, err := rerank.ParseChatScores(tc.reply, 3)
		if err != nil || !same(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.reply, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "I cannot judge these passages.", "10", "[4] 5\n[0] 3", "7\n2", "{\"answer\": 3}"} {
		if _, err := rerank.ParseChatScores(bad, 3); !errors.Is(err, llm.ErrMalformed) {
			t.Errorf("%q: err = %v, want malformed", bad, err)
		}
	}
}
