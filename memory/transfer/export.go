package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Living Memory's JSON export: the self's memories with their metadata,
// associations and embeddings, the sonas with their chains, the backbone,
// pending consensus and conflicts, and the anchors — everything an import
// needs to rebuild the same chains. The document is written in one pass
// over one consistent snapshot; the transport renders it (see
// ExportWriter).

// ExportFormat names and versions the export document.
const ExportFormat = "memoria-export/1"

// Export scopes.
const (
	ExportScopeAll  = "all"
	ExportScopeSona = "sona"
)

// ExportSections are the sections of an export document, in the order
// they are written.
var ExportSections = []string{"sonas", "memories", "blocks", "anchors", "pending", "conflicts", "tombstones"}

// ExportWriter receives an export as it is read: the header, then the
// items of each section, the sections in ExportSections order (a section
// may have no item).
type ExportWriter interface {
	Header(*messages.ExportHeader) error
	Item(section string, m proto.Message) error
}

// exportChain is the part of a sona's chain an export carries.
type exportChain struct {
	rec      *messages.Sona
	backbone bool
	rows     []Entry // the whole chain
	upto     int     // rows[:upto] are exported
	listed   bool    // in exporter.order
}

// Export writes one consistent snapshot of the self to w: with sona ""
// every sona; with a sona's uuid that sona, the backbone, and the prefixes
// of other sonas' chains that their memories' edges reach (transitively),
// so the export imports on its own. The snapshot is taken once every
// write submitted before the call is durable: an export holds what the
// caller's earlier requests did, the traces they left included (and the
// co-access learning the self keeps in memory: Env.Flush). (The
// wait is for writes already queued, a group commit or two: ctx bounds the
// export, not it.)
func (t *Transfer) Export(ctx context.Context, sona string, w ExportWriter) error {
	if err := t.store.Barrier(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	if err := t.env.Flush(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	return t.store.View(func(txn store.Reader) error {
		x := &exporter{t: t, env: t.env, txn: txn, ctx: ctx, chains: map[string]*exportChain{}, exported: map[cid.Cid]bool{}}
		return x.run(sona, w)
	})
}

type exporter struct {
	t        *Transfer
	env      Env
	txn      store.Reader
	ctx      context.Context
	chains   map[string]*exportChain
	order    []*exportChain
	exported map[cid.Cid]bool
	mems     []cid.Cid // in export order: by sona, in chain order
	// forgotten are the memories of the exported chains that were
	// forgotten (their tombstones are exported).
	forgotten []cid.Cid
}

func (x *exporter) run(sona string, w ExportWriter) error {
	backbone, err := x.env.Backbone(x.txn)
	if err != nil {
		return err
	}
	list, err := x.env.Sonas(x.txn)
	if err != nil {
		return err
	}
	recs := make(map[string]*messages.Sona, len(list))
	for _, rec := range list {
		recs[rec.Uuid] = rec
	}
	scope := ExportScopeAll
	var selected []string
	if sona != "" {
		if _, ok := recs[sona]; !ok {
			return fmt.Errorf("%w: sona %q", base.ErrNotFound, sona)
		}
		scope, selected = ExportScopeSona, []string{sona}
	} else {
		for id := range recs {
			selected = append(selected, id)
		}
	}
	if backbone != "" && !slices.Contains(selected, backbone) && recs[backbone] != nil {
		selected = append(selected, backbone)
	}
	slices.SortFunc(selected, func(a, b string) int { // the backbone first, then by uuid
		switch {
		case a == backbone:
			return -1
		case b == backbone:
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, id := range selected {
		ch, err := x.chain(recs[id], id == backbone)
		if err != nil {
			return err
		}
		x.extend(ch, len(ch.rows))
	}
	if scope == ExportScopeSona {
		if err := x.closure(recs, backbone); err != nil {
			return err
		}
	}

	o := x.t.o
	err = w.Header(&messages.ExportHeader{
		Format: ExportFormat, ExportedAt: o.Clock.Now().Unix(),
		Embedder: o.EmbedderID, Dims: int32(o.Dims), Scope: scope, Sona: sona,
	})
	if err != nil {
		return err
	}
	for _, ch := range x.order {
		if err := w.Item("sonas", x.sonaItem(ch)); err != nil {
			return err
		}
	}
	files, err := x.memories(w)
	if err != nil {
		return err
	}
	for _, c := range files {
		data, err := store.ReadBlock(x.txn, c)
		if err != nil {
			return err
		}
		if err := w.Item("blocks", &messages.ExportBlock{Cid: c.String(), Data: data}); err != nil {
			return err
		}
	}
	if err := x.anchors(w); err != nil {
		return err
	}
	pending, err := store.ReadAll(x.txn, consensus.KeyPending, func() *messages.PendingConcept { return &messages.PendingConcept{} })
	if err != nil {
		return err
	}
	for _, p := range pending {
		p.Versions = stripEmbeddings(p.Versions)
		if err := w.Item("pending", p); err != nil {
			return err
		}
	}
	conflicts, err := store.ReadAll(x.txn, consensus.KeyConflict, func() *messages.Conflict { return &messages.Conflict{} })
	if err != nil {
		return err
	}
	for _, c := range conflicts {
		c.Versions = stripEmbeddings(c.Versions)
		if err := w.Item("conflicts", c); err != nil {
			return err
		}
	}
	return x.tombstones(w, scope)
}

// tombstones writes the tombstones: all of them for a whole export, those
// of the exported chains' forgotten memories for a sona's.
func (x *exporter) tombstones(w ExportWriter, scope string) error {
	if scope == ExportScopeAll {
		return store.Scan(x.txn, store.PrefixTombstone, func(_, v []byte) error {
			t := &messages.Tombstone{}
			if err := proto.Unmarshal(v, t); err != nil {
				return fmt.Errorf("%w: tombstone: %v", base.ErrCorrupt, err)
			}
			return w.Item("tombstones", t)
		})
	}
	for _, c := range x.forgotten {
		t := &messages.Tombstone{}
		if ok, err := store.GetProto(x.txn, store.TombstoneKey(c), t); err != nil {
			return err
		} else if ok {
			if err := w.Item("tombstones", t); err != nil {
				return err
			}
		}
	}
	return nil
}

// chain reads a sona's chain entries (once).
func (x *exporter) chain(rec *messages.Sona, backbone bool) (*exportChain, error) {
	if ch, ok := x.chains[rec.Uuid]; ok {
		return ch, nil
	}
	rows, err := x.env.Chain(x.txn, rec.Uuid)
	if err != nil {
		return nil, err
	}
	ch := &exportChain{rec: rec, backbone: backbone, rows: rows}
	for i, r := range ch.rows {
		if r.Seq != int64(i) {
			return nil, fmt.Errorf("%w: chain of sona %s has seq %d at position %d", base.ErrCorrupt, rec.Uuid, r.Seq, i)
		}
	}
	x.chains[rec.Uuid] = ch
	return ch, nil
}

// extend exports ch's chain up to upto ACTs.
func (x *exporter) extend(ch *exportChain, upto int) {
	if !ch.listed {
		ch.listed = true
		x.order = append(x.order, ch)
	}
	for _, r := range ch.rows[ch.upto:upto] {
		if !x.exported[r.Memory] {
			x.exported[r.Memory] = true
			x.mems = append(x.mems, r.Memory)
		}
	}
	ch.upto = max(ch.upto, upto)
}

// closure adds the chain prefixes that hold what the exported memories'
// edges reach, until nothing is missing.
func (x *exporter) closure(recs map[string]*messages.Sona, backbone string) error {
	for i := 0; i < len(x.mems); i++ {
		m, err := x.env.Memory(x.txn, x.mems[i])
		if errors.Is(err, base.ErrForgotten) {
			continue // its edges went with it
		}
		if err != nil {
			return err
		}
		for _, e := range m.Edges {
			if x.exported[e.Target] {
				continue
			}
			meta, err := x.env.Meta(x.txn, e.Target)
			if err != nil {
				return err
			}
			if len(meta.Sonas) == 0 || recs[meta.Sonas[0]] == nil {
				return fmt.Errorf("%w: memory %s belongs to no sona", base.ErrCorrupt, e.Target)
			}
			ch, err := x.chain(recs[meta.Sonas[0]], meta.Sonas[0] == backbone)
			if err != nil {
				return err
			}
			at := slices.IndexFunc(ch.rows, func(r Entry) bool { return r.Memory == e.Target })
			if at < 0 {
				return fmt.Errorf("%w: memory %s is not in the chain of its sona %s", base.ErrCorrupt, e.Target, meta.Sonas[0])
			}
			x.extend(ch, at+1)
		}
	}
	return nil
}

func (x *exporter) sonaItem(ch *exportChain) *messages.ExportSona {
	out := &messages.ExportSona{
		Uuid: ch.rec.Uuid, Name: ch.rec.Name, CreatedAt: ch.rec.CreatedAt, Backbone: ch.backbone,
		Length: int64(ch.upto), Partial: ch.upto < len(ch.rows),
		Chain: make([]*messages.ExportAct, ch.upto),
	}
	for i, r := range ch.rows[:ch.upto] {
		out.Chain[i] = &messages.ExportAct{Seq: r.Seq, Act: r.Act.String(), Memory: r.Memory.String(), LogSeq: r.LogSeq}
	}
	if ch.upto > 0 {
		last := ch.rows[ch.upto-1]
		out.Head, out.LastMemory = proto.String(last.Act.String()), proto.String(last.Memory.String())
	}
	if item, err := x.txn.Item(assoc.SimStatsKey(ch.rec.Uuid)); err == nil {
		_ = item.Value(func(v []byte) error {
			st, err := assoc.DecodeStats(v)
			if err == nil {
				out.Similarity = &messages.SimilarityStats{N: st.N, Mean: st.Mean, M2: st.M2}
			}
			return err
		})
	}
	return out
}

// memories writes the memories and returns the file blocks they point at.
func (x *exporter) memories(w ExportWriter) ([]cid.Cid, error) {
	coaccess, err := x.coAccess()
	if err != nil {
		return nil, err
	}
	var files []cid.Cid
	seenFile := map[cid.Cid]bool{}
	for i, c := range x.mems {
		if i%256 == 0 {
			if err := x.ctx.Err(); err != nil {
				return nil, err
			}
		}
		m, err := x.env.Memory(x.txn, c)
		if errors.Is(err, base.ErrForgotten) {
			x.forgotten = append(x.forgotten, c) // listed as a tombstone, never as content
			continue
		}
		if err != nil {
			return nil, err
		}
		out, err := ExportedMemory(c, m)
		if err != nil {
			return nil, err
		}
		if out.Meta, err = x.env.Meta(x.txn, c); err != nil {
			return nil, err
		}
		vec, err := x.env.Vector(x.txn, c)
		if err != nil {
			return nil, fmt.Errorf("%w: memory %s has no embedding: %v", base.ErrCorrupt, c, err)
		}
		out.Vector = base.EncodeVector(vec)
		links, err := assoc.ReadList(x.txn, assoc.Key(c))
		if err != nil {
			return nil, err
		}
		if out.Associations, err = x.links(links); err != nil {
			return nil, err
		}
		out.Coaccess = coaccess[c]
		if f := m.Data.File; f != nil && !seenFile[f.Content] {
			seenFile[f.Content] = true
			files = append(files, f.Content)
		}
		if err := w.Item("memories", out); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// links renders the links of a list whose targets are exported.
func (x *exporter) links(list *messages.Associations) ([]*messages.ExportLink, error) {
	out := []*messages.ExportLink{}
	for _, l := range list.Links {
		t, err := cid.Cast(l.Target)
		if err != nil {
			return nil, fmt.Errorf("%w: link target: %v", base.ErrCorrupt, err)
		}
		if x.exported[t] {
			out = append(out, &messages.ExportLink{Target: &messages.Link{Cid: t.String()}, Type: l.Type, Strength: l.Strength, UpdatedAt: l.UpdatedAt})
		}
	}
	return out, nil
}

// coAccess reads the co-access partners of the exported memories, per
// agent in agent order.
func (x *exporter) coAccess() (map[cid.Cid][]*messages.ExportCoAccess, error) {
	out := map[cid.Cid][]*messages.ExportCoAccess{}
	err := store.Scan(x.txn, assoc.KeyCoAccess, func(k, v []byte) error {
		agent, raw, ok := bytes.Cut(k[len(assoc.KeyCoAccess):], []byte{0})
		if !ok {
			return fmt.Errorf("%w: co-access key %q", base.ErrCorrupt, k)
		}
		c, err := cid.Cast(raw)
		if err != nil {
			return fmt.Errorf("%w: co-access key: %v", base.ErrCorrupt, err)
		}
		if !x.exported[c] {
			return nil
		}
		list, err := assoc.Unmarshal(v)
		if err != nil {
			return fmt.Errorf("co-access of %s: %w", c, err)
		}
		links, err := x.links(list)
		if err != nil {
			return err
		}
		if len(links) > 0 {
			out[c] = append(out[c], &messages.ExportCoAccess{AgentId: string(agent), Links: links})
		}
		return nil
	})
	return out, err
}

// anchors writes the anchors of the exported memories, in list order.
func (x *exporter) anchors(w ExportWriter) error {
	it := x.txn.NewIterator(store.IterOptions{Prefix: anchor.KeyPrefix, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		a, err := anchor.Decode(it.Item().Key(), it.Item())
		if err != nil {
			return err
		}
		if x.exported[a.CID] {
			if err := w.Item("anchors", a.Proto()); err != nil {
				return err
			}
		}
	}
	return nil
}

// stripEmbeddings drops the versions' embeddings (an import embeds the
// content again).
func stripEmbeddings(vs []*messages.Version) []*messages.Version {
	for _, v := range vs {
		v.Embedding = nil
	}
	return vs
}

// ExportedMemory renders a memory's block fields as an export (and the
// API) writes them: the data union as DAG-JSON, timestamp and edges.
func ExportedMemory(c cid.Cid, m *model.Memory) (*messages.ExportMemory, error) {
	data, ok := dataStruct(m.Data)
	if !ok {
		raw, err := m.Data.DataJSON()
		if err != nil {
			return nil, err
		}
		data = &structpb.Struct{}
		if err := protojson.Unmarshal(raw, data); err != nil {
			return nil, err
		}
	}
	out := &messages.ExportMemory{Cid: c.String(), Data: data, Timestamp: m.Timestamp, Edges: []*messages.Edge{}}
	for _, e := range m.Edges {
		out.Edges = append(out.Edges, &messages.Edge{Target: &messages.Link{Cid: e.Target.String()}, Weight: e.Weight})
	}
	return out, nil
}

// MemoryFromExport reads a memory's block fields back: the inverse of
// ExportedMemory, checked against the schema.
func MemoryFromExport(data *structpb.Struct, timestamp *int64, edges []*messages.Edge) (*model.Memory, error) {
	if data == nil {
		return nil, base.Invalidf(`data is required, e.g. {"kind":"text","content":"..."}`)
	}
	d, err := DataFromStruct(data)
	if err != nil {
		return nil, err
	}
	m := &model.Memory{Data: d, Timestamp: timestamp}
	for i, e := range edges {
		if e.GetTarget().GetCid() == "" {
			return nil, base.Invalidf(`edge %d needs a target {"/": "<cid>"}`, i)
		}
		c, err := cid.Decode(e.Target.Cid)
		if err != nil {
			return nil, base.Invalidf("edge %d: malformed CID %q: %v", i, e.Target.Cid, err)
		}
		m.Edges = append(m.Edges, model.Edge{Target: c, Weight: e.Weight})
	}
	model.SortEdges(m.Edges)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// dataStruct is the data union as its DAG-JSON reads into a Struct, built
// from its fields (the union's members have strings and a link, no
// numbers) rather than encoded and parsed again: the same Struct, a
// tenth of the work. ok is false for data it leaves to that way (no
// member, or a string that is not UTF-8, which the parse refuses).
func dataStruct(d model.Data) (data *structpb.Struct, ok bool) {
	f := map[string]*structpb.Value{}
	valid := true
	str := func(s string) *structpb.Value {
		valid = valid && utf8.ValidString(s)
		return structpb.NewStringValue(s)
	}
	opt := func(name string, s *string) {
		if s != nil {
			f[name] = str(*s)
		}
	}
	switch {
	case d.Self != nil:
		f["kind"], f["name"] = str(model.KindSelf), str(d.Self.Name)
		parts := make([]*structpb.Value, len(d.Self.Parts))
		for i, p := range d.Self.Parts {
			pf := map[string]*structpb.Value{"content": str(p.Content)}
			if p.Model != nil {
				pf["model"] = str(*p.Model)
			}
			parts[i] = structpb.NewStructValue(&structpb.Struct{Fields: pf})
		}
		f["parts"] = structpb.NewListValue(&structpb.ListValue{Values: parts})
		opt("stop_reason", d.Self.StopReason)
	case d.Other != nil:
		f["kind"], f["content"] = str(model.KindOther), str(d.Other.Content)
		opt("name", d.Other.Name)
	case d.Text != nil:
		f["kind"], f["content"] = str(model.KindText), str(d.Text.Content)
	case d.File != nil:
		f["kind"] = str(model.KindFile)
		f["content"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"/": str(d.File.Content.String())}})
		opt("name", d.File.Name)
		opt("mimeType", d.File.MimeType)
	default:
		return nil, false
	}
	return &structpb.Struct{Fields: f}, valid
}

// DataFromStruct reads the data union from its JSON object as protojson
// decoded it (an insert's or an import's data): model.DataFromJSON of its
// JSON. Text, other and self data whose fields are all strings — nearly
// every memory's — are read straight (dataFromStruct, the inverse of
// dataStruct); the rest is written as JSON and read as DAG-JSON through
// the schema's bindings, which also give the errors — three passes over
// the data, which every insert and import paid until issue 15's stop 69.
func DataFromStruct(data *structpb.Struct) (model.Data, error) {
	if d, ok := dataFromStruct(data); ok {
		return d, nil
	}
	raw, err := protojson.Marshal(data)
	if err != nil {
		return model.Data{}, base.Invalidf("data: %v", err)
	}
	return model.DataFromJSON(raw)
}

// dataFromStruct is model.DataFromJSON of s's JSON, for text, other and
// self data whose every field is a string (a self's parts a list of
// objects of strings, its stop reason one of the enum's). ok is false for
// anything else — a file (its content a link), a field of another type or
// name, a missing one —, which DataFromStruct leaves to the general way.
// FuzzDataFromStruct holds the two to the same blocks.
func dataFromStruct(s *structpb.Struct) (d model.Data, ok bool) {
	f := s.GetFields()
	kind, ok := stringOf(f["kind"])
	if !ok {
		return model.Data{}, false
	}
	switch kind {
	case model.KindText:
		content, ok := stringOf(f["content"])
		if !ok || len(f) != 2 {
			return model.Data{}, false
		}
		return model.Data{Text: &model.TextData{Content: content}}, true
	case model.KindOther:
		content, ok := stringOf(f["content"])
		if !ok {
			return model.Data{}, false
		}
		o := &model.OtherData{Content: content}
		if o.Name, ok = optString(f, "name"); !ok || len(f) != 2+ifSet(o.Name) {
			return model.Data{}, false
		}
		return model.Data{Other: o}, true
	case model.KindSelf:
		name, ok := stringOf(f["name"])
		if !ok {
			return model.Data{}, false
		}
		list := f["parts"].GetListValue()
		if list == nil {
			return model.Data{}, false
		}
		sd := &model.SelfData{Name: name, Parts: make([]model.Part, len(list.GetValues()))}
		for i, v := range list.GetValues() {
			pf := v.GetStructValue().GetFields()
			p := &sd.Parts[i]
			if p.Content, ok = stringOf(pf["content"]); !ok {
				return model.Data{}, false
			}
			if p.Model, ok = optString(pf, "model"); !ok || len(pf) != 1+ifSet(p.Model) {
				return model.Data{}, false
			}
		}
		if sd.StopReason, ok = optString(f, "stop_reason"); !ok || len(f) != 3+ifSet(sd.StopReason) {
			return model.Data{}, false
		}
		if r := sd.StopReason; r != nil && !model.ValidStopReason(*r) {
			return model.Data{}, false
		}
		return model.Data{Self: sd}, true
	}
	return model.Data{}, false
}

// stringOf is v's string, ok false when v is not one.
func stringOf(v *structpb.Value) (string, bool) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return "", false
	}
	return s.StringValue, true
}

// optString is f[name]'s string, nil when f has no name; ok false when it
// holds something else.
func optString(f map[string]*structpb.Value, name string) (*string, bool) {
	v, in := f[name]
	if !in {
		return nil, true
	}
	s, ok := stringOf(v)
	return &s, ok
}

// ifSet is 1 for a field that is set, 0 for one that is not.
func ifSet(s *string) int {
	if s != nil {
		return 1
	}
	return 0
}
