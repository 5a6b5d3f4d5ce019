package transfer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// The export-and-import of whole selves is tested with a real self in
// package memory (transfer_test.go) and through the actors and the API;
// these are the document's own rules.

func cidOf(t *testing.T, codec uint64, s string) cid.Cid {
	t.Helper()
	c, err := model.SumCID(codec, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A memory's block fields go out as an export writes them and come back
// to the same CID.
func TestExportedMemoryRoundTrip(t *testing.T) {
	ts := int64(1700000000)
	name, mime := "notes.txt", "text/plain"
	for _, m := range []*model.Memory{
		{Data: model.Data{Text: &model.TextData{Content: "Maya lives in Lisbon"}}, Timestamp: &ts},
		{Data: model.Data{File: &model.FileData{Name: &name, MimeType: &mime, Content: cidOf(t, model.CodecRaw, "bytes")}},
			Edges: []model.Edge{{Target: cidOf(t, model.CodecDagCBOR, "b"), Weight: 0.25}, {Target: cidOf(t, model.CodecDagCBOR, "a"), Weight: 1}}},
	} {
		model.SortEdges(m.Edges)
		c, _, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out, err := ExportedMemory(c, m)
		if err != nil {
			t.Fatal(err)
		}
		if out.Cid != c.String() || len(out.Edges) != len(m.Edges) {
			t.Fatalf("exported %v", out)
		}
		back, err := MemoryFromExport(out.Data, out.Timestamp, out.Edges)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := back.Encode(); err != nil || got != c {
			t.Fatalf("the export reads back as %s (%v), want %s", got, err, c)
		}
	}
}

func TestMemoryFromExportRefuses(t *testing.T) {
	text, err := structpb.NewStruct(map[string]any{"kind": "text", "content": "x"})
	if err != nil {
		t.Fatal(err)
	}
	bogus, err := structpb.NewStruct(map[string]any{"kind": "gossip"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data  *structpb.Struct
		edges []*messages.Edge
		says  string
	}{
		"no data":     {nil, nil, "data is required"},
		"kind":        {bogus, nil, ""},
		"no target":   {text, []*messages.Edge{{Weight: 1}}, "needs a target"},
		"bad target":  {text, []*messages.Edge{{Target: &messages.Link{Cid: "nonsense"}, Weight: 1}}, "malformed CID"},
		"bad weight":  {text, []*messages.Edge{{Target: &messages.Link{Cid: cidOf(t, model.CodecDagCBOR, "a").String()}, Weight: math.NaN()}}, ""},
		"same target": {text, []*messages.Edge{{Target: &messages.Link{Cid: cidOf(t, model.CodecDagCBOR, "a").String()}, Weight: 1}, {Target: &messages.Link{Cid: cidOf(t, model.CodecDagCBOR, "a").String()}, Weight: 0.5}}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := MemoryFromExport(tc.data, nil, tc.edges)
			if !errors.Is(err, base.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want ErrInvalid saying %q", err, tc.says)
			}
		})
	}
}

func TestImportLinks(t *testing.T) {
	a, b := cidOf(t, model.CodecDagCBOR, "a"), cidOf(t, model.CodecDagCBOR, "b")
	link := func(c cid.Cid, typ string, strength float64) *messages.ExportLink {
		return &messages.ExportLink{Target: &messages.Link{Cid: c.String()}, Type: typ, Strength: strength, UpdatedAt: 7}
	}
	got, err := importLinks([]*messages.ExportLink{link(a, assoc.Causal, 0.5), link(b, assoc.CoAccess, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Links) != 2 || a.KeyString() != string(got.Links[0].Target) || got.Links[1].Strength != 1 || got.Links[0].UpdatedAt != 7 {
		t.Fatalf("links %v", got.Links)
	}
	many := make([]*messages.ExportLink, assoc.MaxLinks+1)
	for i := range many {
		many[i] = link(cidOf(t, model.CodecDagCBOR, fmt.Sprint(i)), assoc.Related, 0.5)
	}
	for name, tc := range map[string]struct {
		links []*messages.ExportLink
		says  string
	}{
		"target":   {[]*messages.ExportLink{{Type: assoc.Related, Strength: 0.5}}, "malformed target"},
		"type":     {[]*messages.ExportLink{link(a, "friendly", 0.5)}, "unknown type"},
		"strength": {[]*messages.ExportLink{link(a, assoc.Related, 1.5)}, "strength"},
		"nan":      {[]*messages.ExportLink{link(a, assoc.Related, math.NaN())}, "strength"},
		"twice":    {[]*messages.ExportLink{link(a, assoc.Related, 0.5), link(a, assoc.Similar, 0.5)}, "twice"},
		"too many": {many, "at most"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := importLinks(tc.links); !errors.Is(err, base.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want ErrInvalid saying %q", err, tc.says)
			}
		})
	}
}

// Runs cut the steps where the sona changes: a run may be pipelined, the
// next waits for it.
func TestRuns(t *testing.T) {
	p := &ImportPlan{}
	for _, s := range []string{"a", "a", "b", "a", "a", "a", "c"} {
		p.steps = append(p.steps, ImportStep{Sona: s})
	}
	var got []string
	for _, run := range p.Runs() {
		var r []string
		for _, st := range run {
			r = append(r, st.Sona)
		}
		got = append(got, strings.Join(r, ""))
	}
	if want := []string{"aa", "b", "aaa", "c"}; !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	if (&ImportPlan{}).Runs() != nil {
		t.Fatal("an empty plan has runs")
	}
}

func TestCheckConsensus(t *testing.T) {
	v := func(agent, content string) []*messages.Version {
		return []*messages.Version{{AgentId: agent, Content: content, Embedding: []float32{1}}}
	}
	ok := &messages.Export{
		Pending:   []*messages.PendingConcept{{ConceptKey: "k", Versions: v("a1", "x")}},
		Conflicts: []*messages.Conflict{{ConflictId: "c1", ConceptKey: "k", Versions: v("a1", "y")}},
	}
	p := &ImportPlan{}
	if err := p.checkConsensus(ok); err != nil || len(p.pending) != 1 || len(p.conflicts) != 1 {
		t.Fatalf("%v: %d pending, %d conflicts", err, len(p.pending), len(p.conflicts))
	}
	p.pending[0].ConceptKey = "changed"
	if ok.Pending[0].ConceptKey != "k" {
		t.Fatal("the plan shares the document's records")
	}
	for name, tc := range map[string]struct {
		doc  *messages.Export
		says string
	}{
		"no version":    {&messages.Export{Pending: []*messages.PendingConcept{{ConceptKey: "k"}}}, "no version"},
		"pending twice": {&messages.Export{Pending: []*messages.PendingConcept{{ConceptKey: "k", Versions: v("a", "x")}, {ConceptKey: "k", Versions: v("a", "x")}}}, "twice"},
		"agent":         {&messages.Export{Pending: []*messages.PendingConcept{{ConceptKey: "k", Versions: v("", "x")}}}, "agent_id"},
		"conflict id":   {&messages.Export{Conflicts: []*messages.Conflict{{ConflictId: "\x00", ConceptKey: "k", Versions: v("a", "x")}}}, "conflict_id"},
		"conflict twice": {&messages.Export{Conflicts: []*messages.Conflict{
			{ConflictId: "c", ConceptKey: "k", Versions: v("a", "x")}, {ConflictId: "c", ConceptKey: "k", Versions: v("a", "x")}}}, "twice"},
		"signal": {&messages.Export{Conflicts: []*messages.Conflict{{ConflictId: "c", ConceptKey: "k", Signal: math.NaN(), Versions: v("a", "x")}}}, "numbers"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := (&ImportPlan{}).checkConsensus(tc.doc); !errors.Is(err, base.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want ErrInvalid saying %q", err, tc.says)
			}
		})
	}
}
