package transfer_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// docWriter collects an export into the document an import reads.
type docWriter struct {
	doc      *messages.Export
	sections []string // in the order items came
}

func (d *docWriter) Header(h *messages.ExportHeader) error {
	d.doc = &messages.Export{Format: h.Format, ExportedAt: h.ExportedAt, Embedder: h.Embedder, Dims: h.Dims, Scope: h.Scope, Sona: h.Sona}
	return nil
}

func (d *docWriter) Item(section string, m proto.Message) error {
	if n := len(d.sections); n == 0 || d.sections[n-1] != section {
		d.sections = append(d.sections, section)
	}
	switch section {
	case "sonas":
		d.doc.Sonas = append(d.doc.Sonas, m.(*messages.ExportSona))
	case "memories":
		d.doc.Memories = append(d.doc.Memories, m.(*messages.ExportMemory))
	case "blocks":
		d.doc.Blocks = append(d.doc.Blocks, m.(*messages.ExportBlock))
	case "anchors":
		d.doc.Anchors = append(d.doc.Anchors, m.(*messages.Anchor))
	case "pending":
		d.doc.Pending = append(d.doc.Pending, m.(*messages.PendingConcept))
	case "conflicts":
		d.doc.Conflicts = append(d.doc.Conflicts, m.(*messages.Conflict))
	}
	return nil
}

func exportDoc(t *testing.T, s *memory.Self, sona string) (*messages.Export, []string) {
	t.Helper()
	w := &docWriter{}
	if err := s.Transfer.Export(context.Background(), sona, w); err != nil {
		t.Fatal(err)
	}
	return w.doc, w.sections
}

// twoSonas is a small self: sona a (three memories), sona b whose memory
// links to a's second, a file memory in b, and a's first memory also
// appended to b.
type twoSonas struct {
	s                *memory.Self
	a, b             *memorytest.Owner
	a1, a2, a3       cid.Cid
	b1, bFile, bJoin cid.Cid
	file             cid.Cid
}

func newTwoSonas(t *testing.T) *twoSonas {
	t.Helper()
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	t.Cleanup(func() { s.Close() })
	x := &twoSonas{s: s, a: memorytest.NewOwner(t, s, "a"), b: memorytest.NewOwner(t, s, "b")}
	x.a1 = x.a.Text("alpha: the first thing")
	x.a2 = x.a.Text("beta: we decided to keep going")
	x.b1 = x.b.Text("gamma builds on beta", model.Edge{Target: x.a2, Weight: 0.7})
	var err error
	if x.file, err = s.Chains.PutFile(context.Background(), []byte("file bytes"), ""); err != nil {
		t.Fatal(err)
	}
	x.bFile = x.b.Add(&model.Memory{Data: model.Data{File: &model.FileData{Content: x.file}}}, &messages.MemoryMeta{Kind: "fact", Labels: map[string]string{"src": "upload"}})
	x.a3 = x.a.Text("delta: after gamma")
	x.bJoin = x.b.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "alpha: the first thing"}}}, nil) // a1, joining b
	if x.bJoin != x.a1 {
		t.Fatal("the same memory has another CID")
	}
	return x
}

func chainCIDs(es *messages.ExportSona) []string {
	var out []string
	for _, a := range es.Chain {
		out = append(out, a.Memory)
	}
	return out
}

func TestExportSectionsAndClosure(t *testing.T) {
	x := newTwoSonas(t)
	doc, sections := exportDoc(t, x.s, "")
	if doc.Format != transfer.ExportFormat || doc.Scope != transfer.ExportScopeAll || doc.Dims != int32(x.s.Index().Dims()) || doc.Embedder != x.s.Embedder().ID() {
		t.Fatalf("header %+v", doc)
	}
	if want := []string{"sonas", "memories", "blocks", "anchors"}; !slices.Equal(sections, want) {
		t.Fatalf("sections %v, want %v (empty ones have no items)", sections, want)
	}
	if len(doc.Sonas) != 2 || len(doc.Memories) != 5 || len(doc.Blocks) != 1 || len(doc.Anchors) != 1 {
		t.Fatalf("%d sonas, %d memories, %d blocks, %d anchors", len(doc.Sonas), len(doc.Memories), len(doc.Blocks), len(doc.Anchors))
	}
	if doc.Blocks[0].Cid != x.file.String() || string(doc.Blocks[0].Data) != "file bytes" {
		t.Fatalf("block %+v", doc.Blocks[0])
	}
	if doc.Anchors[0].Cid != x.a2.String() || doc.Anchors[0].Category != "decision" {
		t.Fatalf("anchor %+v", doc.Anchors[0])
	}
	// Memories by sona (uuid order), in chain order, each once.
	first, second := x.a, x.b
	if x.b.Sona < x.a.Sona {
		first, second = x.b, x.a
	}
	var want []string
	seen := map[string]bool{}
	for _, o := range []*memorytest.Owner{first, second} {
		page, err := x.s.Sonas.Chain(o.Sona, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			if !seen[e.Memory.String()] {
				seen[e.Memory.String()] = true
				want = append(want, e.Memory.String())
			}
		}
	}
	var got []string
	for _, m := range doc.Memories {
		got = append(got, m.Cid)
		if len(m.Vector) != 4*x.s.Index().Dims() || m.Meta == nil {
			t.Fatalf("memory %s without its vector or metadata", m.Cid)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("memories %v, want %v", got, want)
	}

	// A sona export carries the backbone (none here) and the prefix of a's
	// chain that b's memories reach: a1 (joined) and a2 (an edge), not a3.
	doc, _ = exportDoc(t, x.s, x.b.Sona)
	if doc.Scope != transfer.ExportScopeSona || doc.Sona != x.b.Sona || len(doc.Sonas) != 2 {
		t.Fatalf("sona export: %+v", doc.Sonas)
	}
	b, a := doc.Sonas[0], doc.Sonas[1]
	if b.Uuid != x.b.Sona || b.Partial || a.Uuid != x.a.Sona || !a.Partial || a.Length != 2 ||
		!slices.Equal(chainCIDs(a), []string{x.a1.String(), x.a2.String()}) || a.GetHead() != a.Chain[1].Act {
		t.Fatalf("sona export: b %+v, a %+v", b, a)
	}
	if len(doc.Memories) != 4 {
		t.Fatalf("sona export has %d memories, want b's three and a2", len(doc.Memories))
	}
	if _, err := exportDocErr(x.s, "no-such-sona"); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("unknown sona: %v", err)
	}
}

func exportDocErr(s *memory.Self, sona string) (*messages.Export, error) {
	w := &docWriter{}
	err := s.Transfer.Export(context.Background(), sona, w)
	return w.doc, err
}

// The plan replays the chains so that each memory is created after what
// it links to, in the exported store's insertion order, each append at
// its exported seq.
func TestPlanImportReplaysInInsertionOrder(t *testing.T) {
	x := newTwoSonas(t)
	doc, _ := exportDoc(t, x.s, "")
	fresh := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer fresh.Close()
	plan, err := fresh.Transfer.PlanImport(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		sona string
		c    cid.Cid
		seq  int64
	}
	var got []step
	for _, st := range plan.Steps() {
		if !st.Item.Imported || st.Item.ExpectSeq == nil {
			t.Fatalf("step %+v is not an imported append at a seq", st)
		}
		got = append(got, step{st.Sona, st.Item.CID, *st.Item.ExpectSeq})
	}
	want := []step{
		{x.a.Sona, x.a1, 0}, {x.a.Sona, x.a2, 1}, {x.b.Sona, x.b1, 0}, {x.b.Sona, x.bFile, 1},
		{x.a.Sona, x.a3, 2}, {x.b.Sona, x.a1, 2},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("steps\n%v\nwant\n%v", got, want)
	}
	if runs := plan.Runs(); len(runs) != 4 || len(runs[0]) != 2 || len(runs[1]) != 2 {
		t.Fatalf("runs %v", runs)
	}
	r := plan.Result()
	if r.Memories != 5 || r.Appended != 6 || r.Blocks != 1 || r.Anchors != 1 || r.Embedded != 0 || len(r.Sonas) != 2 || !r.Sonas[0].Created {
		t.Fatalf("result %+v", r)
	}
	if s, m := fresh.Counts(); s != 0 || m != 0 {
		t.Fatalf("planning wrote %d sonas and %d memories", s, m)
	}
	// Without ACT positions, memories are created in insertion order and
	// existing ones appended as early as they can be.
	for _, s := range doc.Sonas {
		for _, a := range s.Chain {
			a.LogSeq = 0
		}
	}
	if plan, err = fresh.Transfer.PlanImport(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, st := range plan.Steps() {
		got = append(got, step{st.Sona, st.Item.CID, *st.Item.ExpectSeq})
	}
	want[4], want[5] = want[5], want[4]
	if !slices.Equal(got, want) {
		t.Fatalf("steps without positions\n%v\nwant\n%v", got, want)
	}
	// Without vectors (or from another embedding space), memories are embedded again.
	for _, m := range doc.Memories {
		m.Vector = nil
	}
	if plan, err = fresh.Transfer.PlanImport(context.Background(), doc); err != nil || plan.Result().Embedded != 5 {
		t.Fatalf("without vectors: %v, %+v", err, plan)
	}
}

func TestPlanImportRefusesBadDocuments(t *testing.T) {
	x := newTwoSonas(t)
	fresh := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer fresh.Close()
	memIndex := func(doc *messages.Export, c cid.Cid) *messages.ExportMemory {
		for _, m := range doc.Memories {
			if m.Cid == c.String() {
				return m
			}
		}
		t.Fatalf("%s not exported", c)
		return nil
	}
	sonaOf := func(doc *messages.Export, o *memorytest.Owner) *messages.ExportSona {
		for _, s := range doc.Sonas {
			if s.Uuid == o.Sona {
				return s
			}
		}
		t.Fatal("sona not exported")
		return nil
	}
	for _, tc := range []struct {
		name   string
		breaks func(doc *messages.Export)
		want   error
		says   string
	}{
		{"format", func(d *messages.Export) { d.Format = "memoria-export/2" }, base.ErrInvalid, "format"},
		{"content", func(d *messages.Export) {
			memIndex(d, x.a3).Data.Fields["content"] = structpb.NewStringValue("changed")
		}, base.ErrInvalid, "encode to"},
		{"cid", func(d *messages.Export) { d.Memories[0].Cid = "nonsense" }, base.ErrInvalid, "malformed CID"},
		{"kind", func(d *messages.Export) { d.Memories[0].Meta.Kind = "gossip" }, base.ErrInvalid, "unknown kind"},
		{"vector", func(d *messages.Export) { d.Memories[0].Vector = d.Memories[0].Vector[:8] }, base.ErrInvalid, "vector"},
		{"twice", func(d *messages.Export) { d.Memories = append(d.Memories, d.Memories[0]) }, base.ErrInvalid, "twice"},
		{"no chain", func(d *messages.Export) {
			a := sonaOf(d, x.a)
			a.Chain, a.Length, a.Head, a.LastMemory = a.Chain[:2], 2, proto.String(a.Chain[1].Act), proto.String(a.Chain[1].Memory)
		}, base.ErrInvalid, "no exported chain"},
		{"missing memory", func(d *messages.Export) {
			d.Memories = slices.DeleteFunc(d.Memories, func(m *messages.ExportMemory) bool { return m.Cid == x.a3.String() })
		}, base.ErrInvalid, "neither in the export"},
		{"gap", func(d *messages.Export) {
			a := sonaOf(d, x.a)
			a.Chain = slices.DeleteFunc(a.Chain, func(e *messages.ExportAct) bool { return e.Memory == x.a2.String() })
			a.Length = int64(len(a.Chain))
		}, base.ErrInvalid, "seq"},
		{"act", func(d *messages.Export) { sonaOf(d, x.a).Chain[1].Act = sonaOf(d, x.a).Chain[0].Act }, base.ErrInvalid, "ACT"},
		{"seq", func(d *messages.Export) { sonaOf(d, x.a).Chain[1].Seq = 5 }, base.ErrInvalid, "seq"},
		{"head", func(d *messages.Export) { sonaOf(d, x.a).Head = proto.String(sonaOf(d, x.a).Chain[0].Act) }, base.ErrInvalid, "head"},
		{"length", func(d *messages.Export) { sonaOf(d, x.a).Length = 7 }, base.ErrInvalid, "length"},
		{"uuid", func(d *messages.Export) { sonaOf(d, x.a).Uuid = strings.ToUpper(x.a.Sona) }, base.ErrInvalid, "uuid"},
		{"name", func(d *messages.Export) { sonaOf(d, x.a).Name = "" }, base.ErrInvalid, "name"},
		{"block", func(d *messages.Export) { d.Blocks[0].Data = []byte("other bytes") }, base.ErrInvalid, "hash"},
		{"file", func(d *messages.Export) { d.Blocks = nil }, base.ErrInvalid, "file content"},
		{"anchor", func(d *messages.Export) { d.Anchors[0].Cid = x.file.String() }, base.ErrInvalid, "not an exported memory"},
		{"link", func(d *messages.Export) {
			m := memIndex(d, x.a1)
			m.Associations = append(m.Associations, &messages.ExportLink{Target: &messages.Link{Cid: x.file.String()}, Type: assoc.Related, Strength: 0.5})
		}, base.ErrInvalid, "link target"},
		{"link type", func(d *messages.Export) { memIndex(d, x.a1).Associations[0].Type = "friendly" }, base.ErrInvalid, "type"},
		{"pending", func(d *messages.Export) {
			d.Pending = []*messages.PendingConcept{{ConceptKey: "k", Versions: []*messages.Version{{AgentId: "a", Content: " "}}}}
		}, base.ErrInvalid, "content"},
		{"conflict", func(d *messages.Export) {
			d.Conflicts = []*messages.Conflict{{ConceptKey: "k", Versions: []*messages.Version{{AgentId: "a", Content: "x"}}}}
		}, base.ErrInvalid, "conflict_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, _ := exportDoc(t, x.s, "")
			tc.breaks(doc)
			_, err := fresh.Transfer.PlanImport(context.Background(), doc)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("err = %v, want %v saying %q", err, tc.want, tc.says)
			}
		})
	}
	if s, m := fresh.Counts(); s != 0 || m != 0 {
		t.Fatalf("refused plans wrote %d sonas and %d memories", s, m)
	}
}

// A store that holds an exported sona with a prefix of its chain is
// continued; anything else is a conflict.
func TestPlanImportAgainstTheStore(t *testing.T) {
	x := newTwoSonas(t)
	doc, _ := exportDoc(t, x.s, "")
	plan, err := x.s.Transfer.PlanImport(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Steps()) != 0 || plan.Result().Sonas[0].Created {
		t.Fatalf("importing a store into itself plans %d appends", len(plan.Steps()))
	}
	x.a.Text("epsilon: the store moved on")
	if _, err := x.s.Transfer.PlanImport(context.Background(), doc); !errors.Is(err, base.ErrChainConflict) || !strings.Contains(err.Error(), "more than the export") {
		t.Fatalf("a longer chain in the store: %v", err)
	}
	doc, _ = exportDoc(t, x.s, "")
	for _, s := range doc.Sonas {
		s.Name += "-renamed"
	}
	if _, err := x.s.Transfer.PlanImport(context.Background(), doc); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("another name: %v", err)
	}
}

// applyPlan carries out a plan as the actors do, one append at a time.
func applyPlan(t *testing.T, s *memory.Self, p *transfer.ImportPlan) {
	t.Helper()
	ctx := context.Background()
	if err := s.Transfer.ImportBlocks(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.Transfer.ImportSonas(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, st := range p.Steps() {
		if st.Backbone {
			if _, err := s.Backbone.Append(ctx, st.Item); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rec, err := s.Sonas.Get(st.Sona)
		if err != nil {
			t.Fatal(err)
		}
		var head *cid.Cid
		if rec.Head != nil {
			h := cid.MustParse(*rec.Head)
			head = &h
		}
		plan, err := model.PlanAppend(st.Sona, head, rec.Length, st.Item, s.Clock().Now().Unix())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Store().Update(ctx, s.Chains.Op(plan)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Transfer.FinishImport(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// What appends do not carry — metadata, associations, co-access,
// similarity statistics, anchors, consensus records, the backbone — is
// restored, so exporting the import gives the export again.
func TestImportRestoresWhatAppendsDoNot(t *testing.T) {
	x := newTwoSonas(t)
	ctx := context.Background()
	s := x.s
	if err := s.Store().Update(ctx, func(tx store.Tx) error {
		tx.Set(assoc.SimStatsKey(x.a.Sona), assoc.EncodeStats(assoc.SimStats{N: 3, Mean: 0.4, M2: 0.02}))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().Update(ctx, assoc.Strengthen("agent", []cid.Cid{x.a1, x.b1}, 0.3, memorytest.Epoch.Unix())); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().Update(ctx, meta.Update([]cid.Cid{x.a3}, func(m *messages.MemoryMeta, _ cid.Cid) {
		m.Archived, m.Importance, m.AccessCount = true, 0.7, 4
	})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Backbone.Write(ctx, "ceo", "We tell the truth.", nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*messages.Contribute{
		{AgentId: "a1", ConceptKey: "pending", Content: "Memory organizes itself."},
		{AgentId: "a1", ConceptKey: "split", Content: "Pizza on Fridays."},
		{AgentId: "a2", ConceptKey: "split", Content: "Taxes are due in April."},
	} {
		if _, err := s.Consensus.Contribute(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	doc, _ := exportDoc(t, s, "")
	if len(doc.Pending) != 2 || len(doc.Conflicts) != 1 || doc.Sonas[0].Name != chain.BackboneName {
		t.Fatalf("source: %d pending, %d conflicts, first sona %s", len(doc.Pending), len(doc.Conflicts), doc.Sonas[0].Name)
	}

	fresh := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch.Add(time.Hour)))
	defer fresh.Close()
	plan, err := fresh.Transfer.PlanImport(ctx, doc)
	if err != nil {
		t.Fatal(err)
	}
	applyPlan(t, fresh, plan)
	again, _ := exportDoc(t, fresh, "")
	again.ExportedAt = doc.ExportedAt
	if !proto.Equal(doc, again) {
		t.Fatalf("the import exports differently:\n%v\n%v", doc, again)
	}
	if fresh.Backbone.Sona() != doc.Sonas[0].Uuid {
		t.Fatal("the backbone's sona was not restored")
	}
	// The restored pending concept carries its versions' embeddings again.
	pcs, err := fresh.Consensus.PendingConcepts()
	if err != nil || len(pcs) != 2 || len(pcs[0].Versions[0].Embedding) != fresh.Index().Dims() {
		t.Fatalf("pending after the import: %v %v", pcs, err)
	}
}

// A memory appended to several sonas at the same insertion-log position
// is created by the sona it joined first, and joins the others in order,
// whatever their uuids.
func TestImportKeepsTheJoinOrderAtOnePosition(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o1, o2, o3 := memorytest.NewOwner(t, s, "one"), memorytest.NewOwner(t, s, "two"), memorytest.NewOwner(t, s, "three")
	owners := []*memorytest.Owner{o1, o2, o3}
	slices.SortFunc(owners, func(a, b *memorytest.Owner) int { return strings.Compare(b.Sona, a.Sona) }) // largest uuid first
	shared := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "said in every sona"}}}
	for _, o := range owners {
		o.Add(shared, nil)
	}
	doc, _ := exportDoc(t, s, "")
	fresh := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer fresh.Close()
	plan, err := fresh.Transfer.PlanImport(context.Background(), doc)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range plan.Steps() {
		if st.Sona != owners[i].Sona {
			t.Fatalf("step %d appends to %s, want %s (the order the memory joined its sonas)", i, st.Sona, owners[i].Sona)
		}
	}
	applyPlan(t, fresh, plan)
	again, _ := exportDoc(t, fresh, "")
	again.ExportedAt = doc.ExportedAt
	if !proto.Equal(doc, again) {
		t.Fatal("the import exports differently")
	}
}

// The recalls' touches wait in memory (recall.touch_flush): an export
// writes them first, so the document holds every access.
func TestExportHoldsTheBufferedTouches(t *testing.T) {
	x := newTwoSonas(t)
	s, ctx := x.s, context.Background()
	touch := s.Memories.Touch([]cid.Cid{x.a2, x.a2, x.a3}, []string{x.a.Sona, x.a.Sona, x.a.Sona}, s.Sonas.Activity)
	if err := s.Store().Update(ctx, touch); err != nil {
		t.Fatal(err)
	}
	stored := func(c cid.Cid) int64 {
		t.Helper()
		var n int64
		if err := s.Store().View(func(r store.Reader) error {
			m, err := meta.Read(r, c)
			if err == nil {
				n = m.AccessCount
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := stored(x.a2); n != 0 {
		t.Fatalf("a2 stored with %d accesses before the export, want the touches still buffered", n)
	}
	doc, _ := exportDoc(t, s, "")
	want := map[string]int64{x.a2.String(): 2, x.a3.String(): 1, x.a1.String(): 0}
	for _, m := range doc.Memories {
		if n, ok := want[m.Cid]; ok && m.Meta.GetAccessCount() != n {
			t.Errorf("%s exported with %d accesses, want %d", m.Cid, m.Meta.GetAccessCount(), n)
		}
	}
	if n := stored(x.a2); n != 2 {
		t.Fatalf("a2 stored with %d accesses after the export, want 2", n)
	}
}
