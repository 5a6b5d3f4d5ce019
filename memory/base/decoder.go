package base

import "encoding/binary"

// Decoder reads a compact encoding of varints, fixed 64-bit words and
// length-prefixed byte strings from B. The first error sticks: it is Bad,
// and every later read returns a zero value. The states and snapshots
// that derived structures write (the text index's, the sonas' members)
// are read with it.
type Decoder struct {
	B   []byte
	Bad error // the error a malformed encoding gives
	Err error
}

// Fail records Bad, unless an error is already recorded.
func (d *Decoder) Fail() {
	if d.Err == nil {
		d.Err = d.Bad
	}
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed varint: a zig-zag encoded Uvarint, as
// binary.Varint reads it.
func (d *Decoder) Varint() int64 {
	u := d.Uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// U64 reads a little-endian 64-bit word.
func (d *Decoder) U64() uint64 {
	if b := d.word(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// U32 reads a little-endian 32-bit word.
func (d *Decoder) U32() uint32 {
	if b := d.word(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// word reads the next n bytes (nil, and the decoder failed, when fewer
// are left).
func (d *Decoder) word(n int) []byte {
	if d.Err != nil || len(d.B) < n {
		d.Fail()
		return nil
	}
	b := d.B[:n]
	d.B = d.B[n:]
	return b
}

// Bytes reads a length-prefixed byte string: a part of B, valid as long
// as it is.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Err != nil || n > uint64(len(d.B)) {
		d.Fail()
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

// Str reads a length-prefixed string (a copy).
func (d *Decoder) Str() string { return string(d.Bytes()) }

// Count reads a count of items each at least a byte long: one more than
// the bytes left is malformed.
func (d *Decoder) Count() int {
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		d.Fail()
		return 0
	}
	return int(n)
}
