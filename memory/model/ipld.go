package model

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	ipld "github.com/ipld/go-ipld-prime"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	"github.com/ipld/go-ipld-prime/codec/dagjson"
	"github.com/ipld/go-ipld-prime/datamodel"
	"github.com/ipld/go-ipld-prime/node/basicnode"
	"github.com/ipld/go-ipld-prime/node/bindnode"
	"github.com/ipld/go-ipld-prime/schema"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/multiformats/go-multihash"
)

// Multicodec codes of the blocks Memoria writes.
const (
	CodecDagCBOR = 0x71
	CodecRaw     = 0x55
)

// Data union discriminants (the "kind" key of a memory's data).
const (
	KindSelf  = "self"
	KindOther = "other"
	KindText  = "text"
	KindFile  = "file"
)

//go:embed schema.ipldsch
var schemaText []byte

var (
	typeSystem = mustLoadSchema()
	typeSelf   = typeSystem.TypeByName("Self")
	typeOther  = typeSystem.TypeByName("Other")
	typeText   = typeSystem.TypeByName("Text")
	typeFile   = typeSystem.TypeByName("File")
	typeEdge   = typeSystem.TypeByName("Edge")
	typeAct    = typeSystem.TypeByName("Act")
)

func mustLoadSchema() *schema.TypeSystem {
	ts, err := ipld.LoadSchemaBytes(schemaText)
	if err != nil {
		panic("memory/model: embedded schema does not load: " + err.Error())
	}
	return ts
}

// Schema returns the IPLD schema (DSL) of memories and ACTs.
func Schema() string { return string(schemaText) }

// Memory is one immutable node of the DAG (DESIGN.md §3.1).
type Memory struct {
	Data      Data
	Timestamp *int64 // unix seconds, optional
	Edges     []Edge // sorted by target bytes; see SortEdges
}

// Data is the union of what a memory holds; exactly one member is set.
// Its IPLD representation is inline, discriminated by "kind".
type Data struct {
	Self  *SelfData
	Other *OtherData
	Text  *TextData
	File  *FileData
}

// SelfData is something the sona itself said or thought.
type SelfData struct {
	Name       string
	Parts      []Part
	StopReason *string // endTurn | stopSequence | maxTokens
}

// Part is one piece of a self memory, optionally naming the model that wrote it.
type Part struct {
	Content string
	Model   *string
}

// OtherData is something another party said.
type OtherData struct {
	Name    *string
	Content string
}

// TextData is plain text (an observation, a note, a fact).
type TextData struct {
	Content string
}

// FileData references a file block by CID.
type FileData struct {
	Name     *string
	MimeType *string
	Content  cid.Cid
}

// Edge is a weighted link to a memory that supports this one.
type Edge struct {
	Target cid.Cid
	Weight float64
}

// Act is one step of a sona's chain (DESIGN.md §3.2).
type Act struct {
	Sona   string
	Memory cid.Cid
	Prev   *cid.Cid // nil for the first ACT
	Seq    int64
}

// Kind returns the data's discriminant, or "" when no member is set.
func (d Data) Kind() string {
	switch {
	case d.Self != nil:
		return KindSelf
	case d.Other != nil:
		return KindOther
	case d.Text != nil:
		return KindText
	case d.File != nil:
		return KindFile
	}
	return ""
}

// Text returns the memory's text as it is embedded, indexed and shown to a
// model: a self memory's parts joined, another party's words prefixed by
// their name, a file as a short description.
func (m *Memory) Text() string {
	d := m.Data
	switch {
	case d.Self != nil:
		var b strings.Builder
		for i, p := range d.Self.Parts {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Content)
		}
		return b.String()
	case d.Other != nil:
		if d.Other.Name != nil && *d.Other.Name != "" {
			return *d.Other.Name + ": " + d.Other.Content
		}
		return d.Other.Content
	case d.Text != nil:
		return d.Text.Content
	case d.File != nil:
		desc := "[file"
		if d.File.Name != nil {
			desc += " " + *d.File.Name
		}
		if d.File.MimeType != nil {
			desc += " (" + *d.File.MimeType + ")"
		}
		return desc + " " + d.File.Content.String() + "]"
	}
	return ""
}

// TextChars is the length of m.Text() in characters
// (utf8.RuneCountInString), counted without making the text: a recall
// weighs every candidate it takes against its budget, and joining a self
// memory's parts to count them was a fortieth of the bytes a long-lived
// sona's advance allocated (issue 15, stop 105). The separators are ASCII,
// so no character spans a part's end.
func (m *Memory) TextChars() int {
	d := m.Data
	switch {
	case d.Self != nil:
		n := max(len(d.Self.Parts)-1, 0) // the newlines between them
		for _, p := range d.Self.Parts {
			n += utf8.RuneCountInString(p.Content)
		}
		return n
	case d.Other != nil:
		n := utf8.RuneCountInString(d.Other.Content)
		if d.Other.Name != nil && *d.Other.Name != "" {
			n += utf8.RuneCountInString(*d.Other.Name) + len(": ")
		}
		return n
	case d.Text != nil:
		return utf8.RuneCountInString(d.Text.Content)
	}
	return utf8.RuneCountInString(m.Text())
}

// SortEdges sorts edges by target bytes, the canonical order.
func SortEdges(edges []Edge) {
	sort.Slice(edges, func(i, j int) bool {
		return strings.Compare(edges[i].Target.KeyString(), edges[j].Target.KeyString()) < 0
	})
}

// ValidStopReason reports whether r is one of the schema's stop reasons
// (its StopReason enum).
func ValidStopReason(r string) bool {
	return r == "endTurn" || r == "stopSequence" || r == "maxTokens"
}

// Validate checks what the schema cannot: exactly one union member, valid
// UTF-8, finite weights, defined links, edges sorted and unique.
func (m *Memory) Validate() error {
	n := 0
	for _, set := range []bool{m.Data.Self != nil, m.Data.Other != nil, m.Data.Text != nil, m.Data.File != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return base.Invalidf("data must have exactly one kind (self, other, text or file), has %d", n)
	}
	valid := true // every string valid UTF-8
	check := func(s string) { valid = valid && utf8.ValidString(s) }
	switch d := m.Data; {
	case d.Self != nil:
		if len(d.Self.Parts) == 0 {
			return base.Invalidf("self memory needs at least one part")
		}
		check(d.Self.Name)
		for _, p := range d.Self.Parts {
			check(p.Content)
			if p.Model != nil {
				check(*p.Model)
			}
		}
		if r := d.Self.StopReason; r != nil && !ValidStopReason(*r) {
			return base.Invalidf("stop_reason must be endTurn, stopSequence or maxTokens, got %q", *r)
		}
	case d.Other != nil:
		check(d.Other.Content)
		if d.Other.Name != nil {
			check(*d.Other.Name)
		}
	case d.Text != nil:
		check(d.Text.Content)
	case d.File != nil:
		if !d.File.Content.Defined() {
			return base.Invalidf("file memory needs a content CID")
		}
		for _, s := range []*string{d.File.Name, d.File.MimeType} {
			if s != nil {
				check(*s)
			}
		}
	}
	if !valid {
		return base.Invalidf("strings must be valid UTF-8")
	}
	for i, e := range m.Edges {
		if !e.Target.Defined() {
			return base.Invalidf("edge %d has no target", i)
		}
		if math.IsNaN(e.Weight) || math.IsInf(e.Weight, 0) {
			return base.Invalidf("edge %d weight must be finite", i)
		}
		if i > 0 {
			switch c := strings.Compare(m.Edges[i-1].Target.KeyString(), e.Target.KeyString()); {
			case c == 0:
				return base.Invalidf("duplicate edge to %s", e.Target)
			case c > 0:
				return base.Invalidf("edges must be sorted by target")
			}
		}
	}
	return nil
}

// member is a union member as bindnode sees it: Go value and schema type.
func (d Data) member() (kind string, ptr any, typ schema.Type) {
	switch {
	case d.Self != nil:
		return KindSelf, d.Self, typeSelf
	case d.Other != nil:
		return KindOther, d.Other, typeOther
	case d.Text != nil:
		return KindText, d.Text, typeText
	case d.File != nil:
		return KindFile, d.File, typeFile
	}
	return "", nil, nil
}

// Node builds the data union's IPLD node, written inline: the member's
// fields plus "kind".
func (d Data) Node() (datamodel.Node, error) {
	kind, ptr, typ := d.member()
	if typ == nil {
		return nil, base.Invalidf("data has no kind")
	}
	member := bindnode.Wrap(ptr, typ).Representation()
	nb := basicnode.Prototype.Map.NewBuilder()
	ma, err := nb.BeginMap(member.Length() + 1)
	if err != nil {
		return nil, err
	}
	if err := assemble(ma, "kind", basicnode.NewString(kind)); err != nil {
		return nil, err
	}
	for it := member.MapIterator(); !it.Done(); {
		k, v, err := it.Next()
		if err != nil {
			return nil, err
		}
		ks, _ := k.AsString()
		if err := assemble(ma, ks, v); err != nil {
			return nil, err
		}
	}
	if err := ma.Finish(); err != nil {
		return nil, err
	}
	return nb.Build(), nil
}

func assemble(ma datamodel.MapAssembler, key string, v datamodel.Node) error {
	if err := ma.AssembleKey().AssignString(key); err != nil {
		return err
	}
	return ma.AssembleValue().AssignNode(v)
}

// Node builds the memory's IPLD data-model node.
func (m *Memory) Node() (datamodel.Node, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	data, err := m.Data.Node()
	if err != nil {
		return nil, err
	}
	edges := basicnode.Prototype.List.NewBuilder()
	la, err := edges.BeginList(int64(len(m.Edges)))
	if err != nil {
		return nil, err
	}
	for i := range m.Edges {
		if err := la.AssembleValue().AssignNode(bindnode.Wrap(&m.Edges[i], typeEdge).Representation()); err != nil {
			return nil, err
		}
	}
	if err := la.Finish(); err != nil {
		return nil, err
	}

	nb := basicnode.Prototype.Map.NewBuilder()
	size := int64(2)
	if m.Timestamp != nil {
		size = 3
	}
	ma, err := nb.BeginMap(size)
	if err != nil {
		return nil, err
	}
	if err := assemble(ma, "data", data); err != nil {
		return nil, err
	}
	if m.Timestamp != nil {
		if err := assemble(ma, "timestamp", basicnode.NewInt(*m.Timestamp)); err != nil {
			return nil, err
		}
	}
	if err := assemble(ma, "edges", edges.Build()); err != nil {
		return nil, err
	}
	if err := ma.Finish(); err != nil {
		return nil, err
	}
	return nb.Build(), nil
}

// DataJSON renders the data union as DAG-JSON: {"kind": ..., fields},
// links as {"/": "<cid>"}.
func (d Data) DataJSON() ([]byte, error) {
	n, err := d.Node()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := dagjson.Encode(n, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DataFromJSON reads the data union from DAG-JSON and checks it against
// the schema.
func DataFromJSON(b []byte) (Data, error) {
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dagjson.Decode(nb, bytes.NewReader(b)); err != nil {
		return Data{}, base.Invalidf("data is not valid DAG-JSON: %v", err)
	}
	return DataFromNode(nb.Build())
}

// Encode returns the memory's canonical DAG-CBOR block and its CID.
func (m *Memory) Encode() (cid.Cid, []byte, error) {
	if err := m.Validate(); err != nil { // one kind, strings valid, edges sorted
		return cid.Undef, nil, err
	}
	return sum(m.appendCBOR(make([]byte, 0, m.sizeHint())))
}

// sum is block with its CID.
func sum(block []byte) (cid.Cid, []byte, error) {
	c, err := SumCID(CodecDagCBOR, block)
	if err != nil {
		return cid.Undef, nil, err
	}
	return c, block, nil
}

// SumCID returns the CIDv1 (sha2-256) of a block of the given codec.
func SumCID(codec uint64, block []byte) (cid.Cid, error) {
	return cid.Prefix{Version: 1, Codec: codec, MhType: multihash.SHA2_256, MhLength: -1}.Sum(block)
}

// DecodeMemory decodes a memory block, checking it against the schema.
func DecodeMemory(block []byte) (*Memory, error) {
	if m, ok := decodeMemoryCBOR(block); ok {
		return m, nil
	}
	return decodeMemoryIPLD(block)
}

// decodeMemoryIPLD decodes a memory block of any form through
// go-ipld-prime, checking it against the schema.
func decodeMemoryIPLD(block []byte) (*Memory, error) {
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dagcbor.Decode(nb, bytes.NewReader(block)); err != nil {
		return nil, base.Invalidf("not dag-cbor: %v", err)
	}
	return MemoryFromNode(nb.Build())
}

// MemoryFromNode reads a memory from a data-model node (decoded from
// DAG-CBOR or DAG-JSON), checking it against the schema.
func MemoryFromNode(n datamodel.Node) (*Memory, error) {
	if n.Kind() != datamodel.Kind_Map {
		return nil, base.Invalidf("a memory is a map, got %s", n.Kind())
	}
	var m Memory
	seen := map[string]bool{}
	for it := n.MapIterator(); !it.Done(); {
		k, v, err := it.Next()
		if err != nil {
			return nil, base.Invalidf("%v", err)
		}
		key, err := k.AsString()
		if err != nil {
			return nil, base.Invalidf("map keys must be strings")
		}
		if seen[key] {
			return nil, base.Invalidf("duplicate key %q", key)
		}
		seen[key] = true
		switch key {
		case "data":
			d, err := DataFromNode(v)
			if err != nil {
				return nil, err
			}
			m.Data = d
		case "timestamp":
			if v.IsNull() {
				return nil, base.Invalidf("timestamp is optional, not nullable: omit it")
			}
			ts, err := v.AsInt()
			if err != nil {
				return nil, base.Invalidf("timestamp must be an integer")
			}
			m.Timestamp = &ts
		case "edges":
			if v.Kind() != datamodel.Kind_List {
				return nil, base.Invalidf("edges must be a list")
			}
			for it := v.ListIterator(); !it.Done(); {
				_, en, err := it.Next()
				if err != nil {
					return nil, base.Invalidf("%v", err)
				}
				e, err := buildRepr[Edge](en, typeEdge)
				if err != nil {
					return nil, base.Invalidf("edge: %v", err)
				}
				m.Edges = append(m.Edges, *e)
			}
		default:
			return nil, base.Invalidf("unknown field %q (a memory has data, timestamp, edges)", key)
		}
	}
	if !seen["data"] {
		return nil, base.Invalidf("missing data")
	}
	if !seen["edges"] {
		return nil, base.Invalidf("missing edges (use an empty list)")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// DataFromNode reads the inline data union: a map with "kind" and the
// member's fields.
func DataFromNode(n datamodel.Node) (Data, error) {
	if n.Kind() != datamodel.Kind_Map {
		return Data{}, base.Invalidf("data must be a map with a kind, got %s", n.Kind())
	}
	kn, err := n.LookupByString("kind")
	if err != nil {
		return Data{}, base.Invalidf("data needs a kind (self, other, text or file)")
	}
	kind, err := kn.AsString()
	if err != nil {
		return Data{}, base.Invalidf("kind must be a string")
	}
	// The member's fields are the map without its discriminant.
	fb := basicnode.Prototype.Map.NewBuilder()
	fma, err := fb.BeginMap(n.Length() - 1)
	if err != nil {
		return Data{}, err
	}
	for it := n.MapIterator(); !it.Done(); {
		k, v, err := it.Next()
		if err != nil {
			return Data{}, base.Invalidf("%v", err)
		}
		if s, _ := k.AsString(); s == "kind" {
			continue
		}
		if err := fma.AssembleKey().AssignNode(k); err != nil {
			return Data{}, base.Invalidf("%v", err)
		}
		if err := fma.AssembleValue().AssignNode(v); err != nil {
			return Data{}, base.Invalidf("%v", err)
		}
	}
	if err := fma.Finish(); err != nil {
		return Data{}, base.Invalidf("%v", err)
	}
	fields := fb.Build()
	var d Data
	switch kind {
	case KindSelf:
		d.Self, err = buildRepr[SelfData](fields, typeSelf)
		if err != nil {
			return Data{}, base.Invalidf("self: %v", err)
		}
	case KindOther:
		d.Other, err = buildRepr[OtherData](fields, typeOther)
		if err != nil {
			return Data{}, base.Invalidf("other: %v", err)
		}
	case KindText:
		d.Text, err = buildRepr[TextData](fields, typeText)
		if err != nil {
			return Data{}, base.Invalidf("text: %v", err)
		}
	case KindFile:
		d.File, err = buildRepr[FileData](fields, typeFile)
		if err != nil {
			return Data{}, base.Invalidf("file: %v", err)
		}
	default:
		return Data{}, base.Invalidf("unknown kind %q (want self, other, text or file)", kind)
	}
	return d, nil
}

// buildRepr builds a Go value of type T from a node through bindnode's
// representation prototype, which enforces the schema type.
func buildRepr[T any](n datamodel.Node, typ schema.Type) (v *T, err error) {
	defer func() {
		// bindnode panics on some malformed inputs; keep bad data an error.
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%v", r)
		}
	}()
	proto := bindnode.Prototype((*T)(nil), typ)
	nb := proto.Representation().NewBuilder()
	if err := datamodel.Copy(n, nb); err != nil {
		return nil, err
	}
	return bindnode.Unwrap(nb.Build()).(*T), nil
}

// Node builds the ACT's IPLD node.
func (a *Act) Node() datamodel.Node {
	return bindnode.Wrap(a, typeAct).Representation()
}

// Encode returns the ACT's canonical DAG-CBOR block and its CID.
func (a *Act) Encode() (cid.Cid, []byte, error) {
	if !a.Memory.Defined() {
		return cid.Undef, nil, base.Invalidf("act without memory")
	}
	if a.Prev != nil && !a.Prev.Defined() {
		return cid.Undef, nil, base.Invalidf("act with an undefined prev")
	}
	return sum(a.appendCBOR(make([]byte, 0, 64+len(a.Sona)+2*40)))
}

// DecodeAct decodes an ACT block.
func DecodeAct(block []byte) (*Act, error) {
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dagcbor.Decode(nb, bytes.NewReader(block)); err != nil {
		return nil, base.Invalidf("not dag-cbor: %v", err)
	}
	a, err := buildRepr[Act](nb.Build(), typeAct)
	if err != nil {
		return nil, base.Invalidf("act: %v", err)
	}
	return a, nil
}

// Speaker is the name of who said a memory: a self memory's sona name, an
// other memory's speaker; "" when unnamed.
func Speaker(m *Memory) string {
	switch d := m.Data; {
	case d.Self != nil:
		return d.Self.Name
	case d.Other != nil && d.Other.Name != nil:
		return *d.Other.Name
	}
	return ""
}

// Said is what a memory says, without its speaker's name.
func Said(m *Memory) string {
	if o := m.Data.Other; o != nil {
		return o.Content
	}
	return m.Text()
}
