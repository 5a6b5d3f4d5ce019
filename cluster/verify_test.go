package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// car builds a CAR v1 of blocks (its header's content is not read by
// verifyCAR, only skipped).
func car(blocks ...[]byte) ([]byte, []cid.Cid) {
	header := []byte{0xa2, 0x65, 'r', 'o', 'o', 't', 's', 0x80, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01}
	out := binary.AppendUvarint(nil, uint64(len(header)))
	out = append(out, header...)
	var cids []cid.Cid
	for _, b := range blocks {
		c, _ := model.SumCID(model.CodecRaw, b)
		sec := append(c.Bytes(), b...)
		out = binary.AppendUvarint(out, uint64(len(sec)))
		out = append(out, sec...)
		cids = append(cids, c)
	}
	return out, cids
}

func TestVerifyCAR(t *testing.T) {
	body, cids := car([]byte("first block"), []byte("second block"))
	if err := verifyCAR(cids[1], body); err != nil {
		t.Fatalf("a good CAR: %v", err)
	}
	other, _ := model.SumCID(model.CodecRaw, []byte("elsewhere"))
	if err := verifyCAR(other, body); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a CAR without the block asked for: %v", err)
	}
	bad := append([]byte{}, body...)
	bad[len(bad)-1] ^= 1 // the last block's last byte
	if err := verifyCAR(cids[1], bad); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a CAR with a tampered block: %v", err)
	}
	if err := verifyCAR(cids[1], body[:len(body)-3]); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a CAR cut short: %v", err)
	}
	if err := verifyCAR(cids[0], []byte{0x05, 1}); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("not a CAR: %v", err)
	}
}

// rendered renders a memory as the API does (GET /memory/{cid}).
func rendered(t *testing.T, data string, ts *int64, edges ...model.Edge) (cid.Cid, *messages.Memory) {
	t.Helper()
	d, err := model.DataFromJSON([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	m := &model.Memory{Data: d, Timestamp: ts, Edges: edges}
	model.SortEdges(m.Edges)
	c, _, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	e, err := transfer.ExportedMemory(c, m)
	if err != nil {
		t.Fatal(err)
	}
	return c, &messages.Memory{Cid: e.Cid, Data: e.Data, Timestamp: e.Timestamp, Edges: e.Edges, Meta: &messages.MemoryMeta{Kind: "note", Importance: 0.25}}
}

// TestVerifyMemoriesJSON: the API's JSON of a memory, and of a recall of
// several, verifies; the same with its content, an edge, its timestamp
// or its CID altered does not; GET /memory/{cid}'s answer must render
// the memory asked for. Metadata is not content-addressed: altering it
// passes (it is trusted).
func TestVerifyMemoriesJSON(t *testing.T) {
	ts := int64(1_700_000_000)
	a, ma := rendered(t, `{"kind":"text","content":"the lighthouse door is green"}`, &ts)
	b, mb := rendered(t, `{"kind":"other","name":"ann","content":"I painted it, ünïcode ✓"}`, nil,
		model.Edge{Target: a, Weight: 0.7312345678901234})
	one, err := api.MarshalJSON(mb)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyMemoriesJSON(one, b); err != nil {
		t.Fatalf("an honest memory: %v", err)
	}
	if err := verifyMemoriesJSON(one, a); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("the answer for %s renders another memory: %v", a, err)
	}
	rank := int32(1)
	recalled, err := api.MarshalJSON(&messages.RecallResponse{Memories: []*messages.RecalledMemory{
		{Cid: a.String(), Score: 0.5, Via: "hit", Rank: &rank, Memory: ma}, {Cid: b.String(), Score: 0.25, Via: "expansion", Memory: mb}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyMemoriesJSON(recalled, cid.Undef); err != nil {
		t.Fatalf("an honest recall: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"content", "the lighthouse door is green", "the lighthouse door is red"},
		{"edge weight", "0.7312345678901234", "0.9"},
		{"timestamp", "1700000000", "1700000001"},
		{"cid", a.String(), b.String()},
		{"speaker", `"ann"`, `"bob"`},
	} {
		bad := bytes.Replace(recalled, []byte(tc.from), []byte(tc.to), 1)
		if bytes.Equal(bad, recalled) {
			t.Fatalf("%s: %q is not in %s", tc.name, tc.from, recalled)
		}
		if err := verifyMemoriesJSON(bad, cid.Undef); !errors.Is(err, base.ErrCorrupt) {
			t.Errorf("a recall with its %s altered: %v, want corrupt", tc.name, err)
		}
	}
	meta := bytes.Replace(recalled, []byte(`"importance":0.25`), []byte(`"importance":0.75`), 1)
	if bytes.Equal(meta, recalled) {
		t.Fatalf("no importance in %s", recalled)
	}
	if err := verifyMemoriesJSON(meta, cid.Undef); err != nil {
		t.Fatalf("metadata altered (trusted): %v", err)
	}
}
