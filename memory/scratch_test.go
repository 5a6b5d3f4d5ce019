package memory

import (
	"bytes"
	"github.com/ipld/go-ipld-prime/codec/dagjson"
	"testing"
)

func TestScratch(t *testing.T) {
	name := "bob"
	sr := "endTurn"
	ts := int64(1700000000)
	tgt, _ := SumCID(CodecRaw, []byte("x"))
	for _, m := range []Memory{
		{Data: Data{Self: &SelfData{Name: "a", Parts: []Part{{Content: "hi"}}, StopReason: &sr}}, Timestamp: &ts},
		{Data: Data{Other: &OtherData{Name: &name, Content: "yo"}}, Edges: []Edge{{Target: tgt, Weight: 0.5}}},
		{Data: Data{Text: &TextData{Content: "t"}}},
		{Data: Data{File: &FileData{Content: tgt}}},
	} {
		c, b, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := m.Node()
		var j bytes.Buffer
		dagjson.Encode(n, &j)
		t.Log(c, j.String())
		m2, err := DecodeMemory(b)
		if err != nil {
			t.Fatal(err)
		}
		c2, _, _ := m2.Encode()
		if c2 != c {
			t.Fatal("mismatch")
		}
	}
	a := Act{Sona: "u", Memory: tgt, Seq: 0}
	c, b, err := a.Encode()
	t.Log(c, err)
	a2, err := DecodeAct(b)
	t.Log(a2, err)
	bad := "xx"
	m := Memory{Data: Data{Self: &SelfData{Name: "a", Parts: []Part{{Content: "hi"}}, StopReason: &bad}}}
	_, _, err = m.Encode()
	t.Log(err)
}
