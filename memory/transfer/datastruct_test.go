package transfer

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/memory/model"
)

// dataCases are data (an insert's, an import's) with whether
// dataFromStruct reads them itself (the rest take the general path).
var dataCases = []struct {
	json string
	fast bool
}{
	{`{"kind":"text","content":"hello"}`, true},
	{`{"kind":"text","content":""}`, true},
	{`{"kind":"text","content":"caf\u00e9 \ud83d\ude00 \"q\" \\ /"}`, true},
	{`{"kind":"other","content":"hi","name":"Caroline"}`, true},
	{`{"kind":"other","content":"hi"}`, true},
	{`{"kind":"self","name":"sona","parts":[{"content":"a"},{"content":"b","model":"m"}]}`, true},
	{`{"kind":"self","name":"sona","parts":[{"content":"a"}],"stop_reason":"endTurn"}`, true},
	{`{"kind":"self","name":"sona","parts":[]}`, true}, // refused by Validate on both paths
	{`{"kind":"self","name":"sona","parts":[{"content":"a"}],"stop_reason":"later"}`, false},
	{`{"kind":"self","name":"sona","parts":[{"content":"a","extra":"x"}]}`, false},
	{`{"kind":"self","name":"sona","parts":["a"]}`, false},
	{`{"kind":"self","parts":[{"content":"a"}]}`, false},
	{`{"kind":"text","content":"a","extra":1}`, false},
	{`{"kind":"text","content":1}`, false},
	{`{"kind":"text","content":{"/":"bafkqaaa"}}`, false},
	{`{"kind":"text"}`, false},
	{`{"kind":"other","content":"hi","name":null}`, false},
	{`{"kind":"file","content":{"/":"bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"}}`, false},
	{`{"kind":"note","content":"x"}`, false},
	{`{"content":"x"}`, false},
	{`{"kind":3}`, false},
}

// TestDataFromStruct: the common data are read straight, and each gives
// the block the general path gives; the rest are left to it.
func TestDataFromStruct(t *testing.T) {
	for _, c := range dataCases {
		var s structpb.Struct
		if err := protojson.Unmarshal([]byte(c.json), &s); err != nil {
			t.Fatalf("%s: %v", c.json, err)
		}
		if _, ok := dataFromStruct(&s); ok != c.fast {
			t.Errorf("%s: read straight %v, want %v", c.json, ok, c.fast)
		}
		sameAsGeneral(t, &s)
	}
}

// FuzzDataFromStruct holds dataFromStruct to the general way: whatever it
// reads, the general way reads too, into a memory of the same block (or
// the same refusal by Validate).
func FuzzDataFromStruct(f *testing.F) {
	for _, c := range dataCases {
		f.Add(c.json)
	}
	f.Fuzz(func(t *testing.T, js string) {
		var s structpb.Struct
		if protojson.Unmarshal([]byte(js), &s) != nil {
			return
		}
		sameAsGeneral(t, &s)
	})
}

func sameAsGeneral(t *testing.T, s *structpb.Struct) {
	t.Helper()
	fast, ok := dataFromStruct(s)
	if !ok {
		return
	}
	raw, err := protojson.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	general, err := model.DataFromJSON(raw)
	if err != nil {
		t.Fatalf("%s: read straight, refused by the general path: %v", raw, err)
	}
	c1, b1, err1 := (&model.Memory{Data: fast}).Encode()
	c2, b2, err2 := (&model.Memory{Data: general}).Encode()
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("%s: encoded with %v, the general path's with %v", raw, err1, err2)
	}
	if c1 != c2 || !bytes.Equal(b1, b2) {
		t.Fatalf("%s: block %s, the general path's %s", raw, c1, c2)
	}
}

// BenchmarkDataFromStruct reads a text memory's data both ways.
func BenchmarkDataFromStruct(b *testing.B) {
	var s structpb.Struct
	if err := protojson.Unmarshal([]byte(`{"kind":"text","content":"Caroline went to the support group yesterday; it was so powerful, she said."}`), &s); err != nil {
		b.Fatal(err)
	}
	b.Run("general", func(b *testing.B) {
		for b.Loop() {
			raw, _ := protojson.Marshal(&s)
			if _, err := model.DataFromJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("straight", func(b *testing.B) {
		for b.Loop() {
			if _, ok := dataFromStruct(&s); !ok {
				b.Fatal("not read straight")
			}
		}
	})
}
