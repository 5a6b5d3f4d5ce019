package eval

import (
	"maps"
	"math"
	"testing"
	"time"
)

func TestParseSessionTime(t *testing.T) {
	got, err := ParseSessionTime("1:56 pm on 8 May, 2023")
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if _, err := ParseSessionTime("yesterday"); err == nil {
		t.Fatal("unreadable time accepted")
	}
}

func TestNormalizeEvidence(t *testing.T) {
	cases := map[string][]string{
		"D1:3":        {"D1:3"},
		"D8:6; D9:17": {"D8:6", "D9:17"},
		"D:11:26":     {"D11:26"},
		"D":           nil,
		"D2:1, D2:4":  {"D2:1", "D2:4"},
	}
	for in, want := range cases {
		got := NormalizeEvidence(in)
		if len(got) != len(want) {
			t.Fatalf("%q → %v, want %v", in, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q → %v, want %v", in, got, want)
			}
		}
	}
}

func TestParse(t *testing.T) {
	raw := []byte(`{
	  "speaker_a": "Ann", "speaker_b": "Bo",
	  "session_2_date_time": "10:00 am on 2 June, 2023",
	  "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "Back again"}],
	  "session_1_date_time": "9:15 pm on 1 June, 2023",
	  "session_1": [
	    {"speaker": "Ann", "dia_id": "D1:1", "text": "I got a dog", "blip_caption": "a photo of a puppy"},
	    {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!"}
	  ],
	  "session_1_summary": "ignored",
	  "qa": [
	    {"question": "What pet did Ann get?", "answer": "a dog", "evidence": ["D1:1"], "category": 4},
	    {"question": "Unanswerable?", "evidence": [], "category": 5}
	  ]
	}`)
	c, err := Parse("conv-x", raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.Speakers != [2]string{"Ann", "Bo"} || len(c.Sessions) != 2 || c.Sessions[0].N != 1 || len(c.Sessions[0].Turns) != 2 {
		t.Fatalf("parsed %+v", c)
	}
	if got := c.Sessions[0].Turns[0].Content(); got != "I got a dog [shares an image: a photo of a puppy]" {
		t.Fatalf("content %q", got)
	}
	if len(c.QA) != 2 || c.QA[0].Evidence[0] != "D1:1" || c.QA[0].Category != 4 || Scored(c.QA[1].Category) {
		t.Fatalf("qa %+v", c.QA)
	}
	if _, err := Parse("bad", []byte(`{"qa": []}`)); err == nil {
		t.Fatal("conversation without sessions accepted")
	}
}

func TestAccumulator(t *testing.T) {
	a := NewAccumulator([]int{1, 2})
	a.Add(1, []string{"x", "y"}, []string{"x", "z", "y"}, []string{"y"})
	a.Add(2, []string{"q"}, []string{"a", "q"}, nil)
	a.Add(2, nil, []string{"a"}, nil) // no evidence: not scored
	n, at, budget := a.Row(0)
	if n != 2 {
		t.Fatalf("n = %d", n)
	}
	// recall@1: (0.5 + 0) / 2; recall@2: (0.5 + 1) / 2; budget: (0.5 + 0) / 2.
	for i, want := range []float64{0.25, 0.75} {
		if math.Abs(at[i]-want) > 1e-12 {
			t.Fatalf("recall@%d = %v, want %v", i+1, at[i], want)
		}
	}
	if math.Abs(budget-0.25) > 1e-12 {
		t.Fatalf("budget %v", budget)
	}
	rep := a.Report()
	if rep["recall@2"] != 0.75 || rep["by_category"].(Report)["2"].(Report)["recall@2"] != 1.0 {
		t.Fatalf("report %v", rep)
	}
}

func TestQuestions(t *testing.T) {
	convs := []Conversation{
		{ID: "a", QA: []QA{{Question: "q1", Category: 1, Evidence: []string{"D1:1"}}, {Question: "adv", Category: 5}}},
		{ID: "b", QA: []QA{{Question: "q2", Category: 4, Evidence: []string{"D2:2"}}}},
	}
	qs := Questions(convs)
	if len(qs) != 2 || qs[0].Conv != "a" || qs[1].Conv != "b" || qs[1].Category != 4 || qs[1].Evidence[0] != "D2:2" {
		t.Fatalf("questions %+v", qs)
	}
}

func TestLeaveOneOut(t *testing.T) {
	// Three conversations, two questions each (evidence "x").
	var qs []Question
	for _, c := range []string{"a", "b", "c"} {
		qs = append(qs, Question{Conv: c, Category: 1, Evidence: []string{"x"}}, Question{Conv: c, Category: 1, Evidence: []string{"x"}})
	}
	hit, miss := []string{"x"}, []string{"y", "x"} // recall@1: 1 and 0
	ranked := [][][]string{
		{hit, miss, hit, miss, hit, hit}, // setting 0: a 1, b 1, c 2
		{hit, hit, hit, hit, miss, miss}, // setting 1: a 2, b 2, c 0
		{hit, miss, hit, miss, hit, hit}, // setting 2: ties setting 0 everywhere
	}
	choice, err := LeaveOneOut(qs, ranked, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Held out a: b+c is 3 for setting 0, 2 for setting 1 → 0. Held out
	// b: a+c 3 vs 2 → 0. Held out c: a+b 2 vs 4 → 1. Setting 2 never
	// wins: ties go to the lower index.
	if want := map[string]int{"a": 0, "b": 0, "c": 1}; !maps.Equal(choice, want) {
		t.Fatalf("choice %v, want %v", choice, want)
	}
	// At k 2 every setting finds everything: the first (configured) is kept.
	if choice, _ := LeaveOneOut(qs, ranked, 2); !maps.Equal(choice, map[string]int{"a": 0, "b": 0, "c": 0}) {
		t.Fatalf("at k 2: %v", choice)
	}
	if _, err := LeaveOneOut(qs, [][][]string{ranked[0][:5]}, 1); err == nil {
		t.Fatal("a setting with a missing answer accepted")
	}
	if _, err := LeaveOneOut(qs[:2], [][][]string{ranked[0][:2]}, 1); err == nil {
		t.Fatal("one conversation accepted")
	}
	if _, err := LeaveOneOut(qs, nil, 1); err == nil {
		t.Fatal("no settings accepted")
	}
}
