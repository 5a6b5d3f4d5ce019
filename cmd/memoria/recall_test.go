package main

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// TestPrintRecallExplainsEvidence checks that `memoria recall --explain`
// shows the context, time, speaker, session, feedback and reply evidence,
// each in its column.
func TestPrintRecallExplainsEvidence(t *testing.T) {
	resp := &messages.RecallResponse{Memories: []*messages.RecalledMemory{{
		Cid: "bafyreiexample", Score: 0.9, Rank: proto.Int32(1),
		Explain: &messages.Explain{Context: 0.25, Time: 0.75, Speaker: 1, Session: 0.4, Feedback: 2.5, FeedbackRank: 3, Reply: 0.6, Relevance: 0.5, KindWeight: 1},
	}}}
	var out strings.Builder
	printRecall(&out, resp, true)
	lines := strings.Split(out.String(), "\n")
	var header, row []string
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "#" {
			header, row = f, strings.Fields(lines[i+1])
			break
		}
	}
	if header == nil {
		t.Fatalf("no table in:\n%s", out.String())
	}
	for col, want := range map[string]string{"CTX": "0.25", "TIME": "0.75", "SPKR": "1.00", "SESS": "0.40", "FEEDBK": "2.50#3", "REPLY": "0.60", "REL": "0.500"} {
		i := slices.Index(header, col)
		if i < 0 || i >= len(row) || row[i] != want {
			t.Errorf("column %s: header %v, row %v, want %s", col, header, row, want)
		}
	}
}
