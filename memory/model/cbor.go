package model

import (
	"encoding/binary"
	"math"

	"github.com/ipfs/go-cid"
)

// The blocks' DAG-CBOR written directly from the Go structs. The schema
// is small and closed, so its canonical encoding is too: go-ipld-prime's
// (a node built field by field, then walked by its encoder) cost an
// advance 2% of its CPU and a tenth of its allocations for a memory and
// its ACT (issue 15). The bytes are the same — they are what the CIDs
// hash —: the tests and the fuzzing compare them with go-ipld-prime's
// encoding of the same memory (Node, encodeNode).
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
