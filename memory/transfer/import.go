package transfer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Importing an export (ExportFormat) is planned here and carried out by
// the actors: PlanImport reads and checks the whole document against the
// schema and the store, writing nothing; ImportBlocks and ImportSonas
// write the file blocks and the sona records; the plan's steps are then
// appended, in order, by each chain's one writer; FinishImport restores
// what appends do not carry — metadata, associations, co-access,
// similarity statistics, anchors, pending concepts and conflicts.
//
// The steps replay the chains so that every memory is created after what
// it links to and, when the store was empty, in the exported store's
// insertion order: the same memory CIDs, the same ACT CIDs, the same
// insertion log. A sona the store already holds with a prefix of the
// exported chain is continued (an interrupted import is run again); any
// other difference is a conflict.

// ImportStep is one append of an import.
type ImportStep struct {
	Sona string
	// Backbone: the step goes to the backbone's writer, the consensus actor.
	Backbone bool
	// Item has ExpectSeq (the exported seq) and Imported set.
	Item *model.Prepared
}

// ImportPlan is a checked import.
type ImportPlan struct {
	sonas     []*importSona
	steps     []ImportStep
	blocks    []importBlock // not stored yet
	nBlocks   int
	mems      []*importMemory // in export order
	anchors   map[cid.Cid]*messages.Anchor
	pending   []*messages.PendingConcept
	conflicts []*messages.Conflict
	embedded  int
	// forgotten are the tombstones of the memories the export lists as
	// forgotten and of the chains' memories this store forgot.
	forgotten map[cid.Cid]*messages.Tombstone
}

type importSona struct {
	exp      *messages.ExportSona
	chain    []cid.Cid // memories by seq
	create   bool
	start    int64 // ACTs the store already holds
	appended int64
}

type importMemory struct {
	c        cid.Cid
	m        *model.Memory
	block    []byte
	meta     *messages.MemoryMeta // as exported
	vec      []float32
	assoc    *messages.Associations
	coaccess map[string]*messages.Associations
	order    uint64 // the exported store's insertion-log position
}

type importBlock struct {
	c    cid.Cid
	data []byte
}

// Steps are the plan's appends, in the order they must be made.
func (p *ImportPlan) Steps() []ImportStep { return p.steps }

// Runs splits the steps into runs of consecutive appends to one sona: a
// run may be pipelined through its chain's writer, but a run must be
// durable before the next starts (it may link to what the run wrote).
func (p *ImportPlan) Runs() [][]ImportStep {
	var out [][]ImportStep
	for i := 0; i < len(p.steps); {
		j := i + 1
		for j < len(p.steps) && p.steps[j].Sona == p.steps[i].Sona {
			j++
		}
		out = append(out, p.steps[i:j])
		i = j
	}
	return out
}

// Result reports what the plan does.
func (p *ImportPlan) Result() *messages.ImportResult {
	r := &messages.ImportResult{
		Format: ExportFormat, Memories: int64(len(p.mems)), Appended: int64(len(p.steps)),
		Blocks: int64(p.nBlocks), Anchors: int64(len(p.anchors)), Pending: int64(len(p.pending)),
		Conflicts: int64(len(p.conflicts)), Embedded: int64(p.embedded), Sonas: []*messages.ImportedSona{},
	}
	for _, is := range p.sonas {
		r.Sonas = append(r.Sonas, &messages.ImportedSona{
			Uuid: is.exp.Uuid, Name: is.exp.Name, Length: int64(len(is.chain)), Appended: is.appended, Created: is.create,
		})
	}
	return r
}

// PlanImport checks an export document against the schema and the store
// and plans its import. Nothing is written. A malformed or inconsistent
// document is ErrInvalid (or ErrTooLarge for an oversized block); a store
// whose sonas or backbone differ from the export's is ErrChainConflict.
func (t *Transfer) PlanImport(ctx context.Context, doc *messages.Export) (*ImportPlan, error) {
	if doc.Format != ExportFormat {
		return nil, base.Invalidf("format %q is not %q", doc.Format, ExportFormat)
	}
	p := &ImportPlan{anchors: map[cid.Cid]*messages.Anchor{}}
	mems := map[cid.Cid]*importMemory{}
	sameSpace := doc.Embedder == t.o.EmbedderID && int(doc.Dims) == t.o.Dims
	var toEmbed []*importMemory
	for i, em := range doc.Memories {
		im, err := t.importMemory(em, sameSpace)
		if err != nil {
			return nil, fmt.Errorf("memories[%d]: %w", i, err)
		}
		if mems[im.c] != nil {
			return nil, base.Invalidf("memories[%d]: %s is listed twice", i, im.c)
		}
		mems[im.c] = im
		p.mems = append(p.mems, im)
		if im.vec == nil {
			toEmbed = append(toEmbed, im)
		}
	}
	blocks := map[cid.Cid]bool{}
	for i, eb := range doc.Blocks {
		c, err := cid.Decode(eb.Cid)
		if err != nil {
			return nil, base.Invalidf("blocks[%d]: malformed CID %q: %v", i, eb.Cid, err)
		}
		if c.Prefix().Codec != model.CodecRaw {
			return nil, base.Invalidf("blocks[%d]: %s is not a raw block", i, c)
		}
		if limit := t.o.Config.Store.MaxBlockBytes; len(eb.Data) > limit {
			return nil, fmt.Errorf("%w: blocks[%d]: %d bytes exceed the block limit of %d", base.ErrTooLarge, i, len(eb.Data), limit)
		}
		if err := store.VerifyBlock(c, eb.Data); err != nil {
			return nil, base.Invalidf("blocks[%d]: the bytes do not hash to %s", i, c)
		}
		if !blocks[c] {
			blocks[c] = true
			p.blocks = append(p.blocks, importBlock{c, eb.Data})
		}
	}
	p.nBlocks = len(p.blocks)

	stored, storedBlocks, err := t.presence(doc, mems)
	if err != nil {
		return nil, err
	}
	sonas, err := t.storedSonas()
	if err != nil {
		return nil, err
	}
	have := func(c cid.Cid) bool { return mems[c] != nil || stored[c] }
	p.blocks = filterBlocks(p.blocks, storedBlocks)
	if p.forgotten, err = t.forgottenIn(doc, mems, stored); err != nil {
		return nil, err
	}
	// A forgotten memory keeps its place in a chain and its CID in the
	// edges that name it: it is linked to, as the store that forgot it
	// links to it.
	linked := func(c cid.Cid) bool { return have(c) || p.forgotten[c] != nil }

	inChain := map[cid.Cid]bool{}
	seen := map[string]bool{}
	backbones := 0
	for i, es := range doc.Sonas {
		is, err := t.importSona(es, linked, sonas)
		if err != nil {
			return nil, fmt.Errorf("sonas[%d]: %w", i, err)
		}
		if seen[es.Uuid] {
			return nil, base.Invalidf("sonas[%d]: sona %s is listed twice", i, es.Uuid)
		}
		seen[es.Uuid] = true
		if es.Backbone {
			if backbones++; backbones > 1 {
				return nil, base.Invalidf("sonas[%d]: more than one sona is the backbone", i)
			}
		}
		for _, c := range is.chain {
			inChain[c] = true
		}
		p.sonas = append(p.sonas, is)
	}
	for i, im := range p.mems {
		if !inChain[im.c] {
			return nil, base.Invalidf("memories[%d]: %s is in no exported chain", i, im.c)
		}
		if err := im.checkLinks(linked, func(c cid.Cid) bool { return blocks[c] || storedBlocks[c] }); err != nil {
			return nil, fmt.Errorf("memories[%d] (%s): %w", i, im.c, err)
		}
	}
	for i, a := range doc.Anchors {
		c, err := cid.Decode(a.Cid)
		if err != nil {
			return nil, base.Invalidf("anchors[%d]: malformed CID %q: %v", i, a.Cid, err)
		}
		switch {
		case mems[c] == nil:
			return nil, base.Invalidf("anchors[%d]: %s is not an exported memory", i, c)
		case p.anchors[c] != nil:
			return nil, base.Invalidf("anchors[%d]: %s is anchored twice", i, c)
		case !printable(a.Category, 100):
			return nil, base.Invalidf("anchors[%d]: category must be 1 to 100 printable characters", i)
		}
		p.anchors[c] = proto.Clone(a).(*messages.Anchor)
	}
	if err := p.checkConsensus(doc); err != nil {
		return nil, err
	}
	if err := t.embedImport(ctx, p, toEmbed); err != nil {
		return nil, err
	}
	if err := t.replay(p, mems, stored); err != nil {
		return nil, err
	}
	return p, nil
}

// importMemory reads and checks one exported memory: its block fields
// must encode to its CID.
func (t *Transfer) importMemory(em *messages.ExportMemory, sameSpace bool) (*importMemory, error) {
	c, err := cid.Decode(em.Cid)
	if err != nil {
		return nil, base.Invalidf("malformed CID %q: %v", em.Cid, err)
	}
	m, err := MemoryFromExport(em.Data, em.Timestamp, em.Edges)
	if err != nil {
		return nil, err
	}
	got, block, err := m.Encode()
	if err != nil {
		return nil, base.Invalidf("%v", err)
	}
	if got != c {
		return nil, base.Invalidf("the data, timestamp and edges encode to %s, not %s", got, c)
	}
	cfg := t.o.Config
	if len(block) > cfg.Store.MaxBlockBytes {
		return nil, fmt.Errorf("%w: memory of %d bytes exceeds %d", base.ErrTooLarge, len(block), cfg.Store.MaxBlockBytes)
	}
	meta := &messages.MemoryMeta{}
	if em.Meta != nil {
		meta = proto.Clone(em.Meta).(*messages.MemoryMeta)
	}
	if meta.Kind == "" {
		meta.Kind = cfg.DefaultKind
	}
	if _, ok := cfg.Kinds[meta.Kind]; !ok {
		return nil, base.Invalidf("unknown kind %q", meta.Kind)
	}
	if err := base.ValidateAgentID(meta.AgentId); err != nil {
		return nil, err
	}
	for _, f := range []float64{meta.Importance, meta.Insight.GetConfidence()} {
		if math.IsNaN(f) || f < 0 || f > 1 {
			return nil, base.Invalidf("importance and insight confidence must be within 0..1")
		}
	}
	im := &importMemory{c: c, m: m, block: block, meta: meta, order: meta.Seq, coaccess: map[string]*messages.Associations{}}
	if len(em.Vector) > 0 && sameSpace {
		if len(em.Vector) != 4*t.o.Dims {
			return nil, base.Invalidf("vector of %d bytes, want %d (%d float32s)", len(em.Vector), 4*t.o.Dims, t.o.Dims)
		}
		vec, err := base.DecodeVector(em.Vector)
		if err != nil || !llm.Normalize(vec) {
			return nil, base.Invalidf("vector is not a finite, non-zero embedding")
		}
		im.vec = vec
	}
	if im.assoc, err = importLinks(em.Associations); err != nil {
		return nil, fmt.Errorf("associations: %w", err)
	}
	for _, ca := range em.Coaccess {
		if err := base.ValidateAgentID(ca.AgentId); err != nil {
			return nil, err
		}
		if im.coaccess[ca.AgentId] != nil {
			return nil, base.Invalidf("co-access of agent %q is listed twice", ca.AgentId)
		}
		if im.coaccess[ca.AgentId], err = importLinks(ca.Links); err != nil {
			return nil, fmt.Errorf("co-access of agent %q: %w", ca.AgentId, err)
		}
	}
	return im, nil
}

// importLinks reads exported links into a stored link list.
func importLinks(ls []*messages.ExportLink) (*messages.Associations, error) {
	out := &messages.Associations{}
	seen := map[cid.Cid]bool{}
	for i, l := range ls {
		c, err := cid.Decode(l.GetTarget().GetCid())
		if err != nil {
			return nil, base.Invalidf("link %d: malformed target %q", i, l.GetTarget().GetCid())
		}
		switch l.Type {
		case assoc.Causal, assoc.Similar, assoc.Sequential, assoc.Related, assoc.CoAccess:
		default:
			return nil, base.Invalidf("link %d: unknown type %q", i, l.Type)
		}
		if math.IsNaN(l.Strength) || l.Strength < 0 || l.Strength > 1 {
			return nil, base.Invalidf("link %d: strength must be within 0..1, got %v", i, l.Strength)
		}
		if seen[c] {
			return nil, base.Invalidf("link %d: target %s is listed twice", i, c)
		}
		seen[c] = true
		out.Links = append(out.Links, &messages.Association{Type: l.Type, Strength: l.Strength, UpdatedAt: l.UpdatedAt, Target: c.Bytes()})
	}
	if len(out.Links) > assoc.MaxLinks {
		return nil, base.Invalidf("%d links, at most %d are kept", len(out.Links), assoc.MaxLinks)
	}
	return out, nil
}

// checkLinks checks that what the memory links to will be stored: edge,
// association and co-access targets, and a file's content.
func (im *importMemory) checkLinks(have func(cid.Cid) bool, haveBlock func(cid.Cid) bool) error {
	for _, e := range im.m.Edges {
		if !have(e.Target) {
			return base.Invalidf("edge target %s is neither in the export nor in this store", e.Target)
		}
	}
	if f := im.m.Data.File; f != nil && !haveBlock(f.Content) {
		return base.Invalidf("file content %s is neither in the export's blocks nor in this store", f.Content)
	}
	lists := []*messages.Associations{im.assoc}
	for _, l := range im.coaccess {
		lists = append(lists, l)
	}
	for _, list := range lists {
		for _, l := range list.Links {
			c, _ := cid.Cast(l.Target)
			if !have(c) {
				return base.Invalidf("link target %s is neither in the export nor in this store", c)
			}
		}
	}
	return nil
}

// presence finds which memories the export mentions are already stored,
// and which of its blocks.
func (t *Transfer) presence(doc *messages.Export, mems map[cid.Cid]*importMemory) (map[cid.Cid]bool, map[cid.Cid]bool, error) {
	want := map[cid.Cid]bool{}
	for c, im := range mems {
		want[c] = true
		for _, e := range im.m.Edges {
			want[e.Target] = true
		}
		for _, l := range im.assoc.Links {
			if target, err := cid.Cast(l.Target); err == nil {
				want[target] = true
			}
		}
		for _, list := range im.coaccess {
			for _, l := range list.Links {
				if target, err := cid.Cast(l.Target); err == nil {
					want[target] = true
				}
			}
		}
	}
	for _, es := range doc.Sonas {
		for _, a := range es.Chain {
			if c, err := cid.Decode(a.Memory); err == nil {
				want[c] = true
			}
		}
	}
	wantBlocks := map[cid.Cid]bool{}
	for _, im := range mems {
		if f := im.m.Data.File; f != nil {
			wantBlocks[f.Content] = true
		}
	}
	stored, storedBlocks := map[cid.Cid]bool{}, map[cid.Cid]bool{}
	err := t.store.View(func(txn store.Reader) error {
		for c := range want {
			if _, err := t.env.Meta(txn, c); err == nil {
				stored[c] = true
			} else if !errors.Is(err, base.ErrNotFound) {
				return err
			}
		}
		for c := range wantBlocks {
			if ok, err := txn.Has(store.BlockKey(c)); err != nil {
				return err
			} else if ok {
				storedBlocks[c] = true
			}
		}
		return nil
	})
	return stored, storedBlocks, err
}

func filterBlocks(bs []importBlock, stored map[cid.Cid]bool) []importBlock {
	out := bs[:0:0]
	for _, b := range bs {
		if !stored[b.c] {
			out = append(out, b)
		}
	}
	return out
}

// importSona checks an exported sona: its chain must be the chain its
// memories make, and the store must hold nothing of it or a prefix of it.
func (t *Transfer) importSona(es *messages.ExportSona, have func(cid.Cid) bool, stored *storedSonas) (*importSona, error) {
	if id, err := uuid.Parse(es.Uuid); err != nil || id.String() != es.Uuid {
		return nil, base.Invalidf("uuid %q is not a canonical uuid", es.Uuid)
	}
	if err := t.env.ValidateSonaName(es.Name); err != nil {
		return nil, err
	}
	if es.Length != int64(len(es.Chain)) {
		return nil, base.Invalidf("length %d, but the chain has %d ACTs", es.Length, len(es.Chain))
	}
	is := &importSona{exp: es, chain: make([]cid.Cid, len(es.Chain))}
	var prev *cid.Cid
	inSona := map[cid.Cid]bool{}
	acts := make([]cid.Cid, len(es.Chain))
	for i, a := range es.Chain {
		if a.Seq != int64(i) {
			return nil, base.Invalidf("chain[%d] has seq %d", i, a.Seq)
		}
		m, err := cid.Decode(a.Memory)
		if err != nil {
			return nil, base.Invalidf("chain[%d]: malformed memory CID %q", i, a.Memory)
		}
		if !have(m) {
			return nil, base.Invalidf("chain[%d]: memory %s is neither in the export, nor in this store, nor forgotten (in the export's tombstones or this store's)", i, m)
		}
		if inSona[m] {
			return nil, base.Invalidf("chain[%d]: memory %s is in the chain twice", i, m)
		}
		inSona[m] = true
		act, _, err := (&model.Act{Sona: es.Uuid, Memory: m, Prev: prev, Seq: int64(i)}).Encode()
		if err != nil {
			return nil, err
		}
		if act.String() != a.Act {
			return nil, base.Invalidf("chain[%d]: the ACT {sona, memory, prev, seq} is %s, not %s", i, act, a.Act)
		}
		is.chain[i], acts[i], prev = m, act, &acts[i]
	}
	head, last := "", ""
	if n := len(es.Chain); n > 0 {
		head, last = acts[n-1].String(), is.chain[n-1].String()
	}
	if (es.Head == nil) != (head == "") || es.GetHead() != head {
		return nil, base.Invalidf("head %q is not the last ACT of the chain", es.GetHead())
	}
	if (es.LastMemory == nil) != (last == "") || es.GetLastMemory() != last {
		return nil, base.Invalidf("last_memory %q is not the memory of the last ACT", es.GetLastMemory())
	}
	if st := es.Similarity; st != nil && (st.N < 0 || math.IsNaN(st.Mean) || math.IsNaN(st.M2) || st.M2 < 0) {
		return nil, base.Invalidf("similarity statistics are not a distribution")
	}

	backbone := stored.backbone
	rec := stored.recs[es.Uuid]
	if rec == nil {
		switch {
		case es.Backbone && backbone != "" && backbone != es.Uuid:
			return nil, fmt.Errorf("%w: %s already has a backbone (sona %s); the export's is %s", base.ErrChainConflict, stored.of, backbone, es.Uuid)
		case !es.Backbone && es.Uuid == backbone:
			return nil, fmt.Errorf("%w: sona %s is the backbone in only one of the export and %s", base.ErrChainConflict, es.Uuid, stored.of)
		}
		is.create = true
		return is, nil
	}
	switch {
	case rec.Name != es.Name:
		return nil, fmt.Errorf("%w: sona %s is called %q in this store, %q in the export", base.ErrChainConflict, es.Uuid, rec.Name, es.Name)
	case es.Backbone != (backbone == es.Uuid):
		return nil, fmt.Errorf("%w: sona %s is the backbone in only one of the export and %s", base.ErrChainConflict, es.Uuid, stored.of)
	case rec.Length > int64(len(es.Chain)):
		return nil, fmt.Errorf("%w: sona %s has %d ACTs in this store, more than the export's %d", base.ErrChainConflict, es.Uuid, rec.Length, len(es.Chain))
	}
	var chain []Entry
	if err := t.store.View(func(r store.Reader) error {
		var err error
		chain, err = t.env.Chain(r, es.Uuid)
		return err
	}); err != nil {
		return nil, err
	}
	for i, e := range chain[:min(len(chain), int(rec.Length))] {
		if e.Act != acts[i] {
			return nil, fmt.Errorf("%w: sona %s holds another chain than the export's (they differ at seq %d)", base.ErrChainConflict, es.Uuid, i)
		}
	}
	is.start = rec.Length
	return is, nil
}

// forgottenIn reads the export's tombstones and finds this store's of
// the memories the chains name and neither holds: the memories an import
// appends as forgotten (their ACTs, their tombstones, no content). A
// memory the export lists as forgotten but holds, or that this store
// holds, is not.
func (t *Transfer) forgottenIn(doc *messages.Export, mems map[cid.Cid]*importMemory, stored map[cid.Cid]bool) (map[cid.Cid]*messages.Tombstone, error) {
	out := map[cid.Cid]*messages.Tombstone{}
	for i, tb := range doc.Tombstones {
		c, err := cid.Decode(tb.GetCid())
		if err != nil {
			return nil, base.Invalidf("tombstones[%d]: malformed CID %q", i, tb.GetCid())
		}
		if mems[c] != nil {
			return nil, base.Invalidf("tombstones[%d]: %s is forgotten, yet the export holds it", i, c)
		}
		if !stored[c] {
			out[c] = proto.Clone(tb).(*messages.Tombstone)
		}
	}
	err := t.store.View(func(r store.Reader) error {
		for _, es := range doc.Sonas {
			for _, a := range es.Chain {
				c, err := cid.Decode(a.Memory)
				if err != nil || out[c] != nil || mems[c] != nil || stored[c] {
					continue
				}
				tb := &messages.Tombstone{}
				if ok, err := store.GetProto(r, store.TombstoneKey(c), tb); err != nil {
					return err
				} else if ok {
					out[c] = tb
				}
			}
		}
		return nil
	})
	return out, err
}

// storedSonas are the sonas the store holds when an import is planned,
// and its backbone: the one it records or, in a cluster, the cluster's
// (ExpectBackbone), which of says.
type storedSonas struct {
	backbone string
	of       string
	recs     map[string]*messages.Sona
}

func (t *Transfer) storedSonas() (*storedSonas, error) {
	out := &storedSonas{of: "this store", recs: map[string]*messages.Sona{}}
	err := t.store.View(func(r store.Reader) error {
		var err error
		if out.backbone, err = t.env.Backbone(r); err != nil {
			return err
		}
		if cl := t.backbone.Load(); cl != nil && out.backbone == "" {
			out.backbone, out.of = *cl, "the cluster"
		}
		list, err := t.env.Sonas(r)
		for _, rec := range list {
			out.recs[rec.Uuid] = rec
		}
		return err
	})
	return out, err
}

// printable reports whether v is 1 to n bytes of printable UTF-8.
func printable(v string, n int) bool {
	return strings.TrimSpace(v) != "" && len(v) <= n && strings.IndexFunc(v, unicode.IsControl) < 0 && strings.ToValidUTF8(v, "\uFFFD") == v
}

// checkConsensus checks the pending concepts and conflicts.
func (p *ImportPlan) checkConsensus(doc *messages.Export) error {
	versions := func(where string, vs []*messages.Version) error {
		if len(vs) == 0 {
			return base.Invalidf("%s has no version", where)
		}
		for j, v := range vs {
			if err := base.ValidText("agent_id", v.AgentId, 200); err != nil {
				return fmt.Errorf("%s.versions[%d]: %w", where, j, err)
			}
			if err := base.ValidateAgentID(v.AgentId); err != nil {
				return fmt.Errorf("%s.versions[%d]: %w", where, j, err)
			}
			if err := base.ValidText("content", v.Content, consensus.MaxContentBytes); err != nil {
				return fmt.Errorf("%s.versions[%d]: %w", where, j, err)
			}
		}
		return nil
	}
	keys := map[string]bool{}
	for i, pc := range doc.Pending {
		where := fmt.Sprintf("pending[%d]", i)
		if err := base.ValidText("concept_key", pc.ConceptKey, consensus.MaxConceptKey); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if keys[pc.ConceptKey] {
			return base.Invalidf("%s: concept %q is listed twice", where, pc.ConceptKey)
		}
		keys[pc.ConceptKey] = true
		if pc.ConflictId != "" && !printable(pc.ConflictId, 200) {
			return base.Invalidf("%s: malformed conflict_id", where)
		}
		if err := versions(where, pc.Versions); err != nil {
			return err
		}
		p.pending = append(p.pending, proto.Clone(pc).(*messages.PendingConcept))
	}
	ids := map[string]bool{}
	for i, cf := range doc.Conflicts {
		where := fmt.Sprintf("conflicts[%d]", i)
		if !printable(cf.ConflictId, 200) {
			return base.Invalidf("%s: conflict_id must be 1 to 200 printable characters", where)
		}
		if ids[cf.ConflictId] {
			return base.Invalidf("%s: conflict %q is listed twice", where, cf.ConflictId)
		}
		ids[cf.ConflictId] = true
		if err := base.ValidText("concept_key", cf.ConceptKey, consensus.MaxConceptKey); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if math.IsNaN(cf.Signal) || math.IsNaN(cf.Threshold) {
			return base.Invalidf("%s: signal and threshold must be numbers", where)
		}
		if err := versions(where, cf.Versions); err != nil {
			return err
		}
		p.conflicts = append(p.conflicts, proto.Clone(cf).(*messages.Conflict))
	}
	return nil
}

// embedImport embeds the memories the export gave no usable vector and
// the consensus versions (exports carry no version embeddings).
func (t *Transfer) embedImport(ctx context.Context, p *ImportPlan, mems []*importMemory) error {
	const batch = 256
	for i := 0; i < len(mems); i += batch {
		part := mems[i:min(i+batch, len(mems))]
		texts := make([]string, len(part))
		for j, im := range part {
			texts[j] = im.m.Text()
		}
		vecs, err := t.env.Embed(ctx, texts...)
		if err != nil {
			return err
		}
		for j, im := range part {
			im.vec = vecs[j]
		}
	}
	p.embedded = len(mems)
	var vs []*messages.Version
	for _, pc := range p.pending {
		vs = append(vs, pc.Versions...)
	}
	for _, cf := range p.conflicts {
		vs = append(vs, cf.Versions...)
	}
	for i := 0; i < len(vs); i += batch {
		part := vs[i:min(i+batch, len(vs))]
		texts := make([]string, len(part))
		for j, v := range part {
			texts[j] = v.Content
		}
		vecs, err := t.env.Embed(ctx, texts...)
		if err != nil {
			return err
		}
		for j, v := range part {
			v.Embedding = vecs[j]
		}
	}
	return nil
}

// replay orders the appends: each chain in seq order, a memory created
// (its first append) only after everything it links to, and otherwise in
// the order the exported store appended the ACTs (their log_seq; at one
// position a memory's creation first, then appends of existing memories
// in the order their meta.sonas gives). An export
// without positions falls back on the memories' insertion order, with
// appends of existing memories as early as they can go.
func (t *Transfer) replay(p *ImportPlan, mems map[cid.Cid]*importMemory, stored map[cid.Cid]bool) error {
	created := map[cid.Cid]bool{}
	for c := range stored {
		created[c] = true
	}
	for c := range p.forgotten {
		created[c] = true // linked to as it is: forgotten
	}
	built := map[cid.Cid]*model.Prepared{}
	prepared := func(c cid.Cid) (*model.Prepared, error) {
		if pr := built[c]; pr != nil {
			return pr, nil
		}
		var pr *model.Prepared
		var err error
		if tomb := p.forgotten[c]; tomb != nil && mems[c] == nil && !stored[c] {
			pr = &model.Prepared{CID: c, Forgotten: tomb} // its place in the chain, its tombstone
		} else if im := mems[c]; im != nil {
			meta := proto.Clone(im.meta).(*messages.MemoryMeta)
			meta.Sonas, meta.Seq = nil, 0
			pr, err = t.env.Prepare(im.m, c, im.block, im.vec, meta)
		} else { // a memory of this store the export only appends to a chain
			pr, err = t.stored(c)
		}
		if err != nil {
			return nil, err
		}
		pr.Imported = true
		built[c] = pr
		return pr, nil
	}
	type queue struct {
		is   *importSona
		next int64
	}
	var queues []*queue
	remaining := 0
	for _, is := range p.sonas {
		if is.start < int64(len(is.chain)) {
			queues = append(queues, &queue{is, is.start})
			remaining += len(is.chain) - int(is.start)
		}
	}
	head := func(q *queue) (cid.Cid, bool) {
		if q.next >= int64(len(q.is.chain)) {
			return cid.Undef, false
		}
		return q.is.chain[q.next], true
	}
	emit := func(q *queue, c cid.Cid) error {
		pr, err := prepared(c)
		if err != nil {
			return err
		}
		step := *pr
		step.ExpectSeq = proto.Int64(q.next)
		p.steps = append(p.steps, ImportStep{Sona: q.is.exp.Uuid, Backbone: q.is.exp.Backbone, Item: &step})
		q.next++
		q.is.appended++
		remaining--
		return nil
	}
	ready := func(c cid.Cid) bool {
		if mems[c] == nil {
			return true // forgotten: it links to nothing
		}
		for _, e := range mems[c].m.Edges {
			if !created[e.Target] {
				return false
			}
		}
		return true
	}
	// rank is where a sona stands in the order a memory joined its sonas.
	rank := func(q *queue, c cid.Cid) int {
		if im := mems[c]; im != nil {
			if i := slices.Index(im.meta.Sonas, q.is.exp.Uuid); i >= 0 {
				return i
			}
		}
		return math.MaxInt
	}
	for remaining > 0 {
		var best *queue
		var bestC cid.Cid
		var bestKey uint64
		bestJoin, bestRank := false, 0
		for _, q := range queues {
			c, ok := head(q)
			if !ok {
				continue
			}
			join := created[c]
			if !join && !ready(c) {
				continue
			}
			key := q.is.exp.Chain[q.next].LogSeq
			if key == 0 && !join && mems[c] != nil { // an export without positions: the memory's
				key = mems[c].order
			}
			r := rank(q, c)
			// At one position, a creation first, then appends of existing
			// memories; either by the order the memory joined its sonas
			// (its creation is by the first).
			if best == nil || key < bestKey || key == bestKey && (bestJoin && !join || join == bestJoin && r < bestRank) {
				best, bestC, bestKey, bestJoin, bestRank = q, c, key, join, r
			}
		}
		if best == nil {
			for _, q := range queues {
				if c, ok := head(q); ok {
					return base.Invalidf("the chains cannot be replayed: sona %s at seq %d needs memory %s, which links to memories no chain holds before it", q.is.exp.Uuid, q.next, c)
				}
			}
		}
		if err := emit(best, bestC); err != nil {
			return err
		}
		created[bestC] = true
	}
	return nil
}

// stored prepares the append of a memory this store holds.
func (t *Transfer) stored(c cid.Cid) (*model.Prepared, error) {
	var (
		m    *model.Memory
		meta *messages.MemoryMeta
		vec  []float32
	)
	err := t.store.View(func(r store.Reader) error {
		var err error
		if meta, err = t.env.Meta(r, c); err != nil {
			return err
		}
		if m, err = t.env.Memory(r, c); err != nil {
			return err
		}
		vec, err = t.env.Vector(r, c)
		return err
	})
	if err != nil {
		return nil, err
	}
	block, err := t.store.Block(c)
	if err != nil {
		return nil, err
	}
	return t.env.Prepare(m, c, block, vec, &messages.MemoryMeta{Kind: meta.Kind, AgentId: meta.AgentId})
}

// ImportBlocks writes the file blocks of a plan that the store lacks.
func (t *Transfer) ImportBlocks(ctx context.Context, p *ImportPlan) error {
	const perOp = 8 << 20
	for i := 0; i < len(p.blocks); {
		j, size := i, 0
		for j < len(p.blocks) && (j == i || size+len(p.blocks[j].data) <= perOp) {
			size += len(p.blocks[j].data)
			j++
		}
		part := p.blocks[i:j]
		if err := t.store.Update(ctx, func(tx store.Tx) error {
			for _, b := range part {
				if err := tx.PutBlock(b.c, b.data); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// ImportSonas creates, in one transaction, the sonas of a plan that the
// store lacks, with their exported uuids, names and creation times (and
// the backbone's record, if the export has one).
func (t *Transfer) ImportSonas(ctx context.Context, p *ImportPlan) error {
	var create []*importSona
	var names []string
	for _, is := range p.sonas {
		if is.create {
			create = append(create, is)
			names = append(names, is.exp.Name)
		}
	}
	if len(create) == 0 {
		return nil
	}
	vecs, err := t.env.Embed(ctx, names...)
	if err != nil {
		return err
	}
	return t.store.Update(ctx, func(tx store.Tx) error {
		for i, is := range create {
			rec := &messages.Sona{Uuid: is.exp.Uuid, Name: is.exp.Name, CreatedAt: is.exp.CreatedAt}
			if err := t.env.PutSona(tx, rec, vecs[i], is.exp.Backbone); err != nil {
				return fmt.Errorf("made while the import was planned: %w", err)
			}
		}
		return nil
	})
}

// FinishImport restores, once the steps are appended, what the appends
// do not carry: each memory's exported metadata (its sonas and
// insertion-log position stay this store's), associations, co-access
// partners and anchor; each sona's similarity statistics; the pending
// concepts and conflicts. The import's values replace the store's.
func (t *Transfer) FinishImport(ctx context.Context, p *ImportPlan) error {
	const perOp = 256
	for i := 0; i < len(p.mems); i += perOp {
		part := p.mems[i:min(i+perOp, len(p.mems))]
		if err := t.store.Update(ctx, func(tx store.Tx) error { return t.restoreOp(tx, p, part) }); err != nil {
			return err
		}
	}
	raws := map[string][]byte{}
	for _, is := range p.sonas {
		if st := is.exp.Similarity; st != nil {
			raws[string(assoc.SimStatsKey(is.exp.Uuid))] = assoc.EncodeStats(assoc.SimStats{N: st.N, Mean: st.Mean, M2: st.M2})
		}
	}
	for _, pc := range p.pending {
		raw, err := proto.Marshal(pc)
		if err != nil {
			return err
		}
		raws[string(consensus.PendingKey(pc.ConceptKey))] = raw
	}
	for _, cf := range p.conflicts {
		raw, err := proto.Marshal(cf)
		if err != nil {
			return err
		}
		raws[string(consensus.ConflictKey(cf.ConflictId))] = raw
	}
	return t.store.Update(ctx, func(tx store.Tx) error {
		for k, v := range raws {
			tx.Set([]byte(k), v)
		}
		return nil
	})
}

func (t *Transfer) restoreOp(tx store.Tx, p *ImportPlan, part []*importMemory) error {
	for _, im := range part {
		cur, err := t.env.Meta(tx, im.c)
		if errors.Is(err, base.ErrNotFound) {
			return fmt.Errorf("%w: memory %s is not stored after its appends", base.ErrNotFound, im.c)
		}
		if err != nil {
			return err
		}
		meta := proto.Clone(im.meta).(*messages.MemoryMeta)
		meta.Sonas, meta.Seq = cur.Sonas, cur.Seq
		if err := t.env.SetMeta(tx, im.c, meta); err != nil {
			return err
		}
		t.env.SetLinks(tx, im.c, im.assoc)
		for agent, list := range im.coaccess {
			tx.Set(assoc.CoAccessKey(agent, im.c), assoc.Marshal(list))
		}
		if a := p.anchors[im.c]; a != nil {
			if err := store.SetProto(tx, anchor.Key(cur.Seq), a); err != nil {
				return err
			}
		}
	}
	return nil
}
