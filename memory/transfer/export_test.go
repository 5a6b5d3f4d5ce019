package transfer

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/memory/model"
)

// dataStruct builds the Struct that the data's DAG-JSON parses into, for
// every member and every optional field present or not; data it cannot
// build (a string that is not UTF-8) goes the DAG-JSON way, which fails.
func TestDataStructAsDAGJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "Maya", "kayak paddles", `quote " and \ backslash`, "<b>&amp;</b>", "line\nbreak\ttab\x00", "é 日本 😀", "\u2028", "/"}
	s := func() string { return strs[rng.IntN(len(strs))] }
	opt := func() *string {
		if rng.IntN(2) == 0 {
			return nil
		}
		v := s()
		return &v
	}
	file := cidOf(t, 0x55, "file bytes")
	var all []model.Data
	for range 400 {
		var d model.Data
		switch rng.IntN(4) {
		case 0:
			self := &model.SelfData{Name: s()}
			for range rng.IntN(3) {
				self.Parts = append(self.Parts, model.Part{Content: s(), Model: opt()})
			}
			if rng.IntN(2) == 0 {
				r := []string{"endTurn", "stopSequence", "maxTokens"}[rng.IntN(3)]
				self.StopReason = &r
			}
			d.Self = self
		case 1:
			d.Other = &model.OtherData{Name: opt(), Content: s()}
		case 2:
			d.Text = &model.TextData{Content: s()}
		default:
			d.File = &model.FileData{Name: opt(), MimeType: opt(), Content: file}
		}
		all = append(all, d)
	}
	for _, d := range all {
		raw, err := d.DataJSON()
		if err != nil {
			t.Fatal(err)
		}
		want := &structpb.Struct{}
		if err := protojson.Unmarshal(raw, want); err != nil {
			t.Fatal(err)
		}
		got, ok := dataStruct(d)
		if !ok || !proto.Equal(got, want) {
			t.Fatalf("%s:\n got %v (%v)\nwant %v", raw, got, ok, want)
		}
	}
	bad := model.Data{Text: &model.TextData{Content: "not \xff UTF-8"}}
	if _, ok := dataStruct(bad); ok {
		t.Fatal("a string that is not UTF-8 built")
	}
	if _, ok := dataStruct(model.Data{}); ok {
		t.Fatal("data without a member built")
	}
}
