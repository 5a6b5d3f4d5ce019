package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	"github.com/ipld/go-ipld-prime/datamodel"
	"github.com/ipld/go-ipld-prime/fluent/qp"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/node/basicnode"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// The CAR export: a CAR v1 whose roots are the exported sonas' heads
// (their last ACTs), the anchored memories and, last, a manifest, and
// whose blocks are everything those roots reach — ACTs, memories, file
// blocks — in depth-first order, each once.
//
// Blocks alone do not rebuild a self: sona names, memory metadata
// (kind, importance, labels, archived, …), associations, co-access,
// embeddings, pending consensus and conflicts live beside the blocks. The
// manifest carries them: a DAG-CBOR block {"format": CARFormat,
// "export": [chunk links]} whose raw chunks concatenate to the JSON export
// (transfer.ExportFormat) of the same snapshot without what the blocks
// already hold (each memory's data, timestamp and edges; the file blocks'
// bytes). Importing a CAR verifies every block against its CID, rebuilds
// that JSON export from the manifest and the blocks, and imports it
// exactly as POST /import imports JSON: checked whole first, then the
// chains replayed through their writers.

// CARFormat names the manifest of a Memoria CAR.
const CARFormat = "memoria-car/1"

// manifestChunk is the size of the manifest's raw chunks.
const manifestChunk = 1 << 20

// carCollector keeps an export's items, without the block fields.
type carCollector struct {
	doc   *messages.Export
	files []cid.Cid
}

func (c *carCollector) Header(h *messages.ExportHeader) error {
	c.doc = &messages.Export{Format: h.Format, ExportedAt: h.ExportedAt, Embedder: h.Embedder, Dims: h.Dims, Scope: h.Scope, Sona: h.Sona}
	return nil
}

func (c *carCollector) Item(section string, m proto.Message) error {
	switch section {
	case "sonas":
		c.doc.Sonas = append(c.doc.Sonas, m.(*messages.ExportSona))
	case "memories":
		em := m.(*messages.ExportMemory)
		em.Data, em.Timestamp, em.Edges = nil, nil, nil // in the memory's block
		c.doc.Memories = append(c.doc.Memories, em)
	case "blocks":
		b := m.(*messages.ExportBlock)
		f, err := cid.Decode(b.Cid)
		if err != nil {
			return err
		}
		c.files = append(c.files, f)
		c.doc.Blocks = append(c.doc.Blocks, &messages.ExportBlock{Cid: b.Cid}) // the bytes are the block
	case "anchors":
		c.doc.Anchors = append(c.doc.Anchors, m.(*messages.Anchor))
	case "pending":
		c.doc.Pending = append(c.doc.Pending, m.(*messages.PendingConcept))
	case "conflicts":
		c.doc.Conflicts = append(c.doc.Conflicts, m.(*messages.Conflict))
	case "tombstones":
		c.doc.Tombstones = append(c.doc.Tombstones, m.(*messages.Tombstone))
	default:
		return fmt.Errorf("api: export section %q", section)
	}
	return nil
}

// carPlan is a CAR ready to write: its roots, its blocks in order with
// their sizes, and the manifest's blocks (which the store does not hold).
type carPlan struct {
	roots    []cid.Cid
	order    []cid.Cid
	sizes    []int
	extra    map[cid.Cid][]byte
	header   []byte
	length   int64
	manifest cid.Cid
}

// planCAR reads one consistent snapshot (sona "" for every sona) and
// plans its CAR. Blocks are immutable and never deleted, so the blocks
// the snapshot names can be read after it.
func planCAR(ctx context.Context, self *memory.Self, sona string) (*carPlan, error) {
	col := &carCollector{}
	if err := self.Transfer.Export(ctx, sona, col); err != nil {
		return nil, err
	}
	p := &carPlan{extra: map[cid.Cid][]byte{}}
	seenRoot := map[cid.Cid]bool{}
	addRoot := func(s string) error {
		c, err := cid.Decode(s)
		if err != nil {
			return fmt.Errorf("%w: root %q: %v", base.ErrCorrupt, s, err)
		}
		if !seenRoot[c] {
			seenRoot[c] = true
			p.roots = append(p.roots, c)
		}
		return nil
	}
	for _, s := range col.doc.Sonas {
		if s.Head != nil {
			if err := addRoot(*s.Head); err != nil {
				return nil, err
			}
		}
	}
	for _, a := range col.doc.Anchors {
		if err := addRoot(a.Cid); err != nil {
			return nil, err
		}
	}
	manifest, err := buildManifest(col.doc, p.extra)
	if err != nil {
		return nil, err
	}
	p.manifest = manifest
	p.roots = append(p.roots, manifest)

	// Depth-first from each root in turn, each block once.
	seen := map[cid.Cid]struct{}{}
	err = walkDAG(ctx, p.roots, seen, func(c cid.Cid) ([]cid.Cid, error) {
		size, links, err := p.visit(self, c)
		if errors.Is(err, base.ErrForgotten) {
			return nil, nil // the manifest lists its tombstone
		}
		if err != nil {
			return nil, err
		}
		p.order = append(p.order, c)
		p.sizes = append(p.sizes, size)
		return links, nil
	})
	if err != nil {
		return nil, err
	}
	if p.header, err = carHeader(p.roots); err != nil {
		return nil, err
	}
	p.length = int64(len(p.header))
	for i, c := range p.order {
		p.length += sectionLen(c, p.sizes[i])
	}
	return p, nil
}

// visit returns a block's size and links: a raw block's size without
// reading it; a DAG-CBOR block is read (verified) and decoded.
func (p *carPlan) visit(self *memory.Self, c cid.Cid) (int, []cid.Cid, error) {
	data, ok := p.extra[c]
	if !ok {
		if c.Prefix().Codec == cid.Raw {
			n, err := self.Store().BlockSize(c)
			return n, nil, err
		}
		var err error
		if data, err = self.Block(c); err != nil {
			return 0, nil, err
		}
	}
	links, err := blockLinks(c, data)
	return len(data), links, err
}

// buildManifest renders doc as JSON in raw chunks under a DAG-CBOR root,
// adds them to blocks and returns the root.
func buildManifest(doc *messages.Export, blocks map[cid.Cid][]byte) (cid.Cid, error) {
	raw, err := MarshalJSON(doc)
	if err != nil {
		return cid.Undef, err
	}
	var chunks []cid.Cid
	for i := 0; i < len(raw); i += manifestChunk {
		part := raw[i:min(i+manifestChunk, len(raw))]
		c, err := model.SumCID(model.CodecRaw, part)
		if err != nil {
			return cid.Undef, err
		}
		blocks[c] = part
		chunks = append(chunks, c)
	}
	n, err := qp.BuildMap(basicnode.Prototype.Any, 2, func(ma datamodel.MapAssembler) {
		qp.MapEntry(ma, "export", qp.List(int64(len(chunks)), func(la datamodel.ListAssembler) {
			for _, c := range chunks {
				qp.ListEntry(la, qp.Link(cidlink.Link{Cid: c}))
			}
		}))
		qp.MapEntry(ma, "format", qp.String(CARFormat))
	})
	if err != nil {
		return cid.Undef, err
	}
	var buf bytes.Buffer
	if err := dagcbor.Encode(n, &buf); err != nil {
		return cid.Undef, err
	}
	root, err := model.SumCID(model.CodecDagCBOR, buf.Bytes())
	if err != nil {
		return cid.Undef, err
	}
	blocks[root] = buf.Bytes()
	return root, nil
}

// write streams the planned CAR to w.
func (p *carPlan) write(ctx context.Context, self *memory.Self, w io.Writer) error {
	cw := newCARWriter(w)
	if _, err := cw.w.Write(p.header); err != nil {
		return err
	}
	for i, c := range p.order {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		data, ok := p.extra[c]
		if !ok {
			var err error
			if data, err = self.Block(c); err != nil {
				return err
			}
		}
		if len(data) != p.sizes[i] {
			return fmt.Errorf("%w: block %s changed size during the export", base.ErrCorrupt, c)
		}
		if err := cw.section(c, data); err != nil {
			return err
		}
	}
	return cw.flush()
}

// exportCAR answers GET /export?format=car. Errors found before the first
// byte are JSON errors; a failure after it cuts the response short (and
// Content-Length tells the client it did).
func (s *Server) exportCAR(w http.ResponseWriter, r *http.Request, sona string) {
	p, err := planCAR(r.Context(), s.self, sona)
	if err != nil {
		s.fail(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", carContentType(false))
	h.Set("Content-Disposition", `attachment; filename="memoria-export.car"`)
	h.Set("Content-Length", strconv.FormatInt(p.length, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if err := p.write(r.Context(), s.self, w); err != nil {
		if r.Context().Err() != nil {
			s.log.Info("CAR export stopped after its first byte: response cut short", "err", err)
		} else {
			s.log.Error("CAR export failed after its first byte: response cut short", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// importCAR answers POST /import with a CAR body: every block is
// verified against its CID, the manifest and the blocks make the JSON
// export again, and that is imported as JSON is. Nothing is written unless
// all of it checks.
func (s *Server) importCAR(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, err)
		return
	}
	doc, err := ExportFromCAR(body)
	if err != nil {
		s.fail(w, err)
		return
	}
	res, err := s.sys.Import(r.Context(), doc)
	if err != nil {
		s.fail(w, err)
		return
	}
	res.Format = CARFormat
	status := http.StatusOK
	if res.Appended > 0 || slices.ContainsFunc(res.Sonas, func(s *messages.ImportedSona) bool { return s.Created }) {
		status = http.StatusCreated
	}
	writeJSON(w, status, res)
}

// carError is a 400 about a CAR.
func carError(format string, args ...any) error {
	return badRequest("invalid_car", format, args...)
}

// ExportFromCAR reads a Memoria CAR back into the JSON export it carries:
// every block must hash to its CID, the last root must be a manifest, and
// every block the manifest names — the chains' ACTs and memories, the
// file blocks — must be in the CAR, as must every root.
func ExportFromCAR(body []byte) (*messages.Export, error) {
	br, err := newCARReader(body)
	if err != nil {
		return nil, carError("%v", err)
	}
	blocks := map[cid.Cid][]byte{}
	for i := 0; ; i++ {
		c, data, err := br.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, carError("block %d: %v", i, err)
		}
		sum, err := c.Prefix().Sum(data)
		if err != nil {
			return nil, carError("block %d (%s): cannot hash: %v", i, c, err)
		}
		if !sum.Equals(c) {
			return nil, carError("block %d: its bytes do not hash to its CID %s (the file is corrupt)", i, c)
		}
		blocks[c] = data
	}
	if len(br.roots) == 0 {
		return nil, carError("the CAR has no roots")
	}
	for _, root := range br.roots {
		if _, ok := blocks[root]; !ok {
			return nil, carError("root %s is not in the CAR", root)
		}
	}
	raw, err := readManifest(br.roots[len(br.roots)-1], blocks)
	if err != nil {
		return nil, err
	}
	doc := &messages.Export{}
	if err := UnmarshalJSON(raw, doc); err != nil {
		return nil, carError("the manifest is not an export: %s", jsonProblem("the manifest", raw, err))
	}
	if doc.Format != transfer.ExportFormat {
		return nil, carError("the manifest holds format %q, this server reads %q", doc.Format, transfer.ExportFormat)
	}
	need := func(where, s string) ([]byte, error) {
		c, err := cid.Decode(s)
		if err != nil {
			return nil, carError("%s: malformed CID %q", where, s)
		}
		data, ok := blocks[c]
		if !ok {
			return nil, carError("%s: block %s is not in the CAR", where, c)
		}
		return data, nil
	}
	for i, es := range doc.Sonas {
		for j, a := range es.Chain {
			if _, err := need(fmt.Sprintf("sonas[%d].chain[%d]", i, j), a.Act); err != nil {
				return nil, err
			}
		}
	}
	for i, em := range doc.Memories {
		data, err := need(fmt.Sprintf("memories[%d]", i), em.Cid)
		if err != nil {
			return nil, err
		}
		m, err := model.DecodeMemory(data)
		if err != nil {
			return nil, carError("memories[%d] (%s): %v", i, em.Cid, err)
		}
		full, err := transfer.ExportedMemory(cid.MustParse(em.Cid), m)
		if err != nil {
			return nil, carError("memories[%d] (%s): %v", i, em.Cid, err)
		}
		em.Data, em.Timestamp, em.Edges = full.Data, full.Timestamp, full.Edges
	}
	for i, eb := range doc.Blocks {
		data, err := need(fmt.Sprintf("blocks[%d]", i), eb.Cid)
		if err != nil {
			return nil, err
		}
		eb.Data = data
	}
	return doc, nil
}

// readManifest returns the JSON the manifest root's chunks make.
func readManifest(root cid.Cid, blocks map[cid.Cid][]byte) ([]byte, error) {
	missing := carError("the CAR's last root %s is not a %s manifest: import a CAR written by `memoria export --out FILE.car` (or GET /export?format=car)", root, CARFormat)
	if root.Prefix().Codec != cid.DagCBOR {
		return nil, missing
	}
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dagcbor.Decode(nb, bytes.NewReader(blocks[root])); err != nil {
		return nil, missing
	}
	n := nb.Build()
	f, err := n.LookupByString("format")
	if err != nil {
		return nil, missing
	}
	if v, err := f.AsString(); err != nil || v != CARFormat {
		return nil, missing
	}
	list, err := n.LookupByString("export")
	if err != nil || list.Kind() != datamodel.Kind_List {
		return nil, carError("the manifest %s has no export list", root)
	}
	var out []byte
	it := list.ListIterator()
	for !it.Done() {
		i, v, err := it.Next()
		if err != nil {
			return nil, carError("manifest: %v", err)
		}
		l, err := v.AsLink()
		if err != nil {
			return nil, carError("manifest chunk %d is not a link", i)
		}
		c := l.(cidlink.Link).Cid
		data, ok := blocks[c]
		if !ok || c.Prefix().Codec != cid.Raw {
			return nil, carError("manifest chunk %d (%s) is not a raw block of the CAR", i, c)
		}
		out = append(out, data...)
	}
	return out, nil
}
