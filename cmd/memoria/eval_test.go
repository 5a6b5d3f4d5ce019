package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConversations writes n small conversations in LoCoMo's format.
func writeConversations(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	topics := []string{"a red kayak on the lake", "a sourdough starter named Bob", "a trip to Lisbon in May", "violin lessons on Tuesdays"}
	for c := range n {
		var turns []string
		for i, topic := range topics {
			turns = append(turns, fmt.Sprintf(`{"speaker": "Ann", "dia_id": "D1:%d", "text": "I have %s (%d)."}`, 2*i+1, topic, c),
				fmt.Sprintf(`{"speaker": "Bo", "dia_id": "D1:%d", "text": "Nice, tell me more."}`, 2*i+2))
		}
		raw := fmt.Sprintf(`{"conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
			"session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": [%s]},
			"qa": [{"question": "What boat does Ann have?", "evidence": ["D1:1"], "category": 4},
			       {"question": "What is the sourdough starter called?", "evidence": ["D1:3"], "category": 1},
			       {"question": "When is Ann going to Lisbon?", "evidence": ["D1:5"], "category": 2}]}`,
			strings.Join(turns, ","))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("conv-%d.json", c)), []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEvalLoCoMoLeaveOneOut(t *testing.T) {
	data := writeConversations(t, 3)
	out, errOut, code := run(t, "eval", "locomo", "--data", data, "--configs", "bm25,coaccess", "--k", "1,5", "--loo", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Configurations map[string]map[string]any `json:"configurations"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	bm25 := rep.Configurations["bm25"]
	loo, ok := bm25["leave_one_out"].(map[string]any)
	if !ok {
		t.Fatalf("no leave-one-out figure: %s", out)
	}
	// recall@10 is added: the settings are chosen for it.
	if loo["n"] != 9.0 || loo["recall@10"] == nil || bm25["recall@10"] == nil {
		t.Fatalf("leave-one-out %v", loo)
	}
	choice := bm25["leave_one_out_choice"].(map[string]any)
	if len(choice) != 3 || !strings.Contains(choice["conv-0"].(string), "b ") {
		t.Fatalf("choices %v", choice)
	}
	// Learning online changes the store question by question: no figure.
	if _, ok := rep.Configurations["coaccess"]["leave_one_out"]; ok {
		t.Fatal("leave-one-out figure for the learning configuration")
	}
	out, errOut, code = run(t, "eval", "locomo", "--data", data, "--configs", "bm25", "--loo")
	if code != 0 || !strings.Contains(out, "LOO recall@10") || !strings.Contains(out, "conv-2: recency") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
}
