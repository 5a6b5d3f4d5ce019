package model

import (
	"encoding/binary"
	"math"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
)

// The blocks' DAG-CBOR written directly from the Go structs. The schema
// is small and closed, so its canonical encoding is too: go-ipld-prime's
// (a node built field by field, then walked by its encoder) cost an
// advance 2% of its CPU and a tenth of its allocations for a memory and
// its ACT (issue 15). The bytes are the same — they are what the CIDs
// hash —: the tests and the fuzzing compare them with go-ipld-prime's
// encoding of the same memory (Node, then dagcbor.Encode).
//
// DAG-CBOR's canonical form: lengths and integers in their shortest
// form, floats in 64 bits, map keys ordered by length and then bytewise
// (so the struct fields are written in that order below, not the
// schema's), links as tag 42 over the CID's bytes behind a 0x00.

const (
	cborUint   = 0 << 5
	cborNeg    = 1 << 5
	cborBytes  = 2 << 5
	cborString = 3 << 5
	cborList   = 4 << 5
	cborMap    = 5 << 5
	cborTag    = 6 << 5
	cborFloat  = 7<<5 | 27
	cborNull   = 7<<5 | 22
	cborLink   = 42 // the CID tag
)

// cborHead appends a head of major type major (its bits in place) with
// argument n, in its shortest form.
func cborHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= math.MaxUint8:
		return append(b, major|24, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, major|25), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, major|27), n)
}

// headSize is the bytes of a head of argument n in its shortest form (as
// cborHead writes it).
func headSize(n uint64) int {
	switch {
	case n < 24:
		return 1
	case n <= math.MaxUint8:
		return 2
	case n <= math.MaxUint16:
		return 3
	case n <= math.MaxUint32:
		return 5
	}
	return 9
}

func cborText(b []byte, s string) []byte {
	return append(cborHead(b, cborString, uint64(len(s))), s...)
}

func cborInt(b []byte, v int64) []byte {
	if v < 0 {
		return cborHead(b, cborNeg, uint64(-1-v))
	}
	return cborHead(b, cborUint, uint64(v))
}

func cborFloat64(b []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, cborFloat), math.Float64bits(f))
}

func cborCID(b []byte, c cid.Cid) []byte {
	key := c.KeyString() // the CID's bytes
	b = cborHead(b, cborTag, cborLink)
	b = cborHead(b, cborBytes, uint64(len(key)+1))
	return append(append(b, 0), key...)
}

// present counts the optional fields given.
func present(fields ...bool) uint64 {
	n := uint64(0)
	for _, f := range fields {
		if f {
			n++
		}
	}
	return n
}

// sizeHint is about the bytes of the memory's block.
func (m *Memory) sizeHint() int {
	n := 64 + 56*len(m.Edges)
	switch d := m.Data; {
	case d.Self != nil:
		n += len(d.Self.Name)
		for _, p := range d.Self.Parts {
			n += 24 + len(p.Content)
			if p.Model != nil {
				n += 8 + len(*p.Model)
			}
		}
	case d.Other != nil:
		n += len(d.Other.Content) + 24
	case d.Text != nil:
		n += len(d.Text.Content)
	case d.File != nil:
		n += 96
	}
	return n
}

// appendCBOR appends the memory's block (it must be valid: Validate).
func (m *Memory) appendCBOR(b []byte) []byte {
	// data, edges, timestamp
	b = cborHead(b, cborMap, 2+present(m.Timestamp != nil))
	b = cborText(b, "data")
	b = m.Data.appendCBOR(b)
	b = cborText(b, "edges")
	b = cborHead(b, cborList, uint64(len(m.Edges)))
	for _, e := range m.Edges {
		// target, weight
		b = cborHead(b, cborMap, 2)
		b = cborCID(cborText(b, "target"), e.Target)
		b = cborFloat64(cborText(b, "weight"), e.Weight)
	}
	if m.Timestamp != nil {
		b = cborInt(cborText(b, "timestamp"), *m.Timestamp)
	}
	return b
}

// appendCBOR appends the data union, inline: its member's fields and kind.
func (d Data) appendCBOR(b []byte) []byte {
	switch {
	case d.Self != nil:
		s := d.Self
		// kind, name, parts, stop_reason
		b = cborHead(b, cborMap, 3+present(s.StopReason != nil))
		b = cborText(cborText(b, "kind"), KindSelf)
		b = cborText(cborText(b, "name"), s.Name)
		b = cborHead(cborText(b, "parts"), cborList, uint64(len(s.Parts)))
		for _, p := range s.Parts {
			// model, content
			b = cborHead(b, cborMap, 1+present(p.Model != nil))
			if p.Model != nil {
				b = cborText(cborText(b, "model"), *p.Model)
			}
			b = cborText(cborText(b, "content"), p.Content)
		}
		if s.StopReason != nil {
			b = cborText(cborText(b, "stop_reason"), *s.StopReason)
		}
	case d.Other != nil:
		o := d.Other
		// kind, name, content
		b = cborHead(b, cborMap, 2+present(o.Name != nil))
		b = cborText(cborText(b, "kind"), KindOther)
		if o.Name != nil {
			b = cborText(cborText(b, "name"), *o.Name)
		}
		b = cborText(cborText(b, "content"), o.Content)
	case d.Text != nil:
		// kind, content
		b = cborHead(b, cborMap, 2)
		b = cborText(cborText(b, "kind"), KindText)
		b = cborText(cborText(b, "content"), d.Text.Content)
	case d.File != nil:
		f := d.File
		// kind, name, content, mimeType
		b = cborHead(b, cborMap, 2+present(f.Name != nil, f.MimeType != nil))
		b = cborText(cborText(b, "kind"), KindFile)
		if f.Name != nil {
			b = cborText(cborText(b, "name"), *f.Name)
		}
		b = cborCID(cborText(b, "content"), f.Content)
		if f.MimeType != nil {
			b = cborText(cborText(b, "mimeType"), *f.MimeType)
		}
	}
	return b
}

// appendCBOR appends the ACT's block.
func (a *Act) appendCBOR(b []byte) []byte {
	// seq, prev, sona, memory
	b = cborHead(b, cborMap, 4)
	b = cborInt(cborText(b, "seq"), a.Seq)
	b = cborText(b, "prev")
	if a.Prev != nil {
		b = cborCID(b, *a.Prev)
	} else {
		b = append(b, cborNull)
	}
	b = cborText(cborText(b, "sona"), a.Sona)
	return cborCID(cborText(b, "memory"), a.Memory)
}

// cborReader reads the canonical DAG-CBOR the encoder above writes: a
// block in that form decodes without go-ipld-prime's nodes (half of a
// memory's decoding was building them, and most of its garbage), and
// anything else — another form of the same data, or no memory at all —
// is left to go-ipld-prime (DecodeMemory), which reads every form and
// says what is wrong. Its methods report false at the first thing they
// do not expect.
type cborReader struct {
	b []byte // what is left to read of the block
	s string // the whole block as a string: the texts read are its substrings
}

// head reads a head of major type major in its shortest form.
func (r *cborReader) head(major byte) (uint64, bool) {
	if len(r.b) == 0 || r.b[0]&0xe0 != major {
		return 0, false
	}
	info := r.b[0] & 0x1f
	var n uint64
	var size int
	switch {
	case info < 24:
		n, size = uint64(info), 1
	case info == 24 && len(r.b) >= 2:
		n, size = uint64(r.b[1]), 2
	case info == 25 && len(r.b) >= 3:
		n, size = uint64(binary.BigEndian.Uint16(r.b[1:])), 3
	case info == 26 && len(r.b) >= 5:
		n, size = uint64(binary.BigEndian.Uint32(r.b[1:])), 5
	case info == 27 && len(r.b) >= 9:
		n, size = binary.BigEndian.Uint64(r.b[1:]), 9
	default:
		return 0, false
	}
	if headSize(n) != size {
		return 0, false // not the shortest form
	}
	r.b = r.b[size:]
	return n, true
}

// count reads a map's or list's head of at most max entries, each at least
// min bytes long, so that a lying head cannot make a large allocation.
func (r *cborReader) count(major byte, max uint64, min int) (int, bool) {
	n, ok := r.head(major)
	if !ok || n > max || n > uint64(len(r.b)/min) {
		return 0, false
	}
	return int(n), true
}

func (r *cborReader) bytesOf(major byte) ([]byte, bool) {
	n, ok := r.head(major)
	if !ok || n > uint64(len(r.b)) {
		return nil, false
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b, true
}

// text reads a text, a substring of the block's string: a memory's texts
// share one object (its name, content, a model's name and a stop reason
// were one each, marked by the collector while the memory is cached).
func (r *cborReader) text() (string, bool) {
	b, ok := r.bytesOf(cborString)
	if !ok {
		return "", false
	}
	return r.str(b), true
}

// str is b, the bytes just read, as the substring of the block's string.
func (r *cborReader) str(b []byte) string {
	end := len(r.s) - len(r.b)
	return r.s[end-len(b) : end]
}

// key reads the text want (a map key) — false, reading nothing, when the
// next item is anything else.
func (r *cborReader) key(want string) bool {
	saved := r.b
	if s, ok := r.bytesOf(cborString); ok && string(s) == want {
		return true
	}
	r.b = saved
	return false
}

// optText reads an optional text field into *into (a new string's place
// when into is nil), returning its place: nil when the next key is not key.
func (r *cborReader) optText(key string, into *string) (*string, bool) {
	if !r.key(key) {
		return nil, true
	}
	if into == nil {
		into = new(string)
	}
	var ok bool
	*into, ok = r.text()
	return into, ok
}

func (r *cborReader) int() (int64, bool) {
	if len(r.b) > 0 && r.b[0]&0xe0 == cborNeg {
		n, ok := r.head(cborNeg)
		return -1 - int64(n), ok && n <= math.MaxInt64
	}
	n, ok := r.head(cborUint)
	return int64(n), ok && n <= math.MaxInt64
}

func (r *cborReader) float() (float64, bool) {
	if len(r.b) < 9 || r.b[0] != cborFloat {
		return 0, false
	}
	f := math.Float64frombits(binary.BigEndian.Uint64(r.b[1:]))
	r.b = r.b[9:]
	return f, true
}

// cid reads a link: its bytes (after the identity multibase's 0) are one
// CID's, which the CID shares as a substring of the block's string, as the
// texts do (a memory's links were an object each, the most numerous of a
// cache of memories).
func (r *cborReader) cid() (cid.Cid, bool) {
	if tag, ok := r.head(cborTag); !ok || tag != cborLink {
		return cid.Undef, false
	}
	b, ok := r.bytesOf(cborBytes)
	if !ok || len(b) < 2 || b[0] != 0 {
		return cid.Undef, false
	}
	c, err := base.CID(r.str(b)[1:])
	return c, err == nil
}

// decodeMemoryCBOR decodes block if it is a valid memory in the canonical
// form; false leaves it to go-ipld-prime (DecodeMemory).
func decodeMemoryCBOR(block []byte) (*Memory, bool) {
	r := &cborReader{b: block, s: string(block)}
	fields, ok := r.count(cborMap, 3, 1)
	if !ok || fields < 2 || !r.key("data") {
		return nil, false
	}
	m, ts, ok := r.memory()
	if !ok || !r.key("edges") {
		return nil, false
	}
	edges, ok := r.count(cborList, math.MaxInt32, 20) // an edge takes more than 20 bytes
	if !ok {
		return nil, false
	}
	if edges > 0 {
		m.Edges = make([]Edge, edges)
	}
	for i := range m.Edges {
		e := &m.Edges[i]
		if n, ok := r.head(cborMap); !ok || n != 2 || !r.key("target") {
			return nil, false
		}
		if e.Target, ok = r.cid(); !ok || !r.key("weight") {
			return nil, false
		}
		if e.Weight, ok = r.float(); !ok {
			return nil, false
		}
	}
	if fields == 3 {
		if !r.key("timestamp") {
			return nil, false
		}
		if *ts, ok = r.int(); !ok {
			return nil, false
		}
		m.Timestamp = ts
	}
	if len(r.b) != 0 || m.Validate() != nil {
		return nil, false
	}
	return m, true
}

// boxed allocates a memory with its timestamp's place and its member, in
// one object.
func boxed[D any]() (*Memory, *int64, *D) {
	b := &struct {
		m  Memory
		ts int64
		d  D
	}{}
	return &b.m, &b.ts, &b.d
}

// selfBox is a self memory's member with its first part and the places
// of its optional texts.
type selfBox struct {
	self        SelfData
	first       [1]Part
	model, stop string
}

// otherBox and fileBox are the other members with their optional texts'
// places.
type otherBox struct {
	other OtherData
	name  string
}

type fileBox struct {
	file       FileData
	name, mime string
}

// memory reads the inline data union (Data.appendCBOR) into a new memory,
// allocated with its member, its timestamp's place, a self memory's
// first part and the places of its optional texts: one object where there
// were up to six, each of which the collector marks while the memory is
// cached.
func (r *cborReader) memory() (*Memory, *int64, bool) {
	fields, ok := r.count(cborMap, 4, 1)
	if !ok || !r.key("kind") {
		return nil, nil, false
	}
	kind, ok := r.bytesOf(cborString)
	if !ok {
		return nil, nil, false
	}
	var (
		m    *Memory
		ts   *int64
		read = uint64(1) // kind
	)
	switch string(kind) {
	case KindSelf:
		var box *selfBox
		m, ts, box = boxed[selfBox]()
		s := &box.self
		if !r.key("name") {
			return nil, nil, false
		}
		if s.Name, ok = r.text(); !ok || !r.key("parts") {
			return nil, nil, false
		}
		parts, ok := r.count(cborList, math.MaxInt32, 9)
		switch {
		case !ok:
			return nil, nil, false
		case parts == 1:
			s.Parts = box.first[:]
		default:
			s.Parts = make([]Part, parts)
		}
		for i := range s.Parts {
			p := &s.Parts[i]
			n, ok := r.head(cborMap)
			if !ok {
				return nil, nil, false
			}
			var model *string // the box holds the first part's
			if i == 0 {
				model = &box.model
			}
			if p.Model, ok = r.optText("model", model); !ok || !r.key("content") {
				return nil, nil, false
			}
			if p.Content, ok = r.text(); !ok || n != 1+present(p.Model != nil) {
				return nil, nil, false
			}
		}
		if s.StopReason, ok = r.optText("stop_reason", &box.stop); !ok {
			return nil, nil, false
		}
		read += 2 + present(s.StopReason != nil)
		m.Data.Self = s
	case KindOther:
		var box *otherBox
		m, ts, box = boxed[otherBox]()
		o := &box.other
		if o.Name, ok = r.optText("name", &box.name); !ok || !r.key("content") {
			return nil, nil, false
		}
		if o.Content, ok = r.text(); !ok {
			return nil, nil, false
		}
		read += 1 + present(o.Name != nil)
		m.Data.Other = o
	case KindText:
		var t *TextData
		m, ts, t = boxed[TextData]()
		if !r.key("content") {
			return nil, nil, false
		}
		if t.Content, ok = r.text(); !ok {
			return nil, nil, false
		}
		read++
		m.Data.Text = t
	case KindFile:
		var box *fileBox
		m, ts, box = boxed[fileBox]()
		f := &box.file
		if f.Name, ok = r.optText("name", &box.name); !ok || !r.key("content") {
			return nil, nil, false
		}
		if f.Content, ok = r.cid(); !ok {
			return nil, nil, false
		}
		if f.MimeType, ok = r.optText("mimeType", &box.mime); !ok {
			return nil, nil, false
		}
		read += 1 + present(f.Name != nil, f.MimeType != nil)
		m.Data.File = f
	default:
		return nil, nil, false
	}
	return m, ts, uint64(fields) == read
}
