package base

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCosine(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []float32
		want float64
	}{
		{"same", []float32{1, 2, 3}, []float32{2, 4, 6}, 1},
		{"opposite", []float32{1, 0}, []float32{-3, 0}, -1},
		{"orthogonal", []float32{1, 0}, []float32{0, 5}, 0},
		{"zero", []float32{0, 0}, []float32{1, 1}, 0},
		{"lengths differ", []float32{1, 0}, []float32{1, 0, 0}, 0},
		{"empty", nil, nil, 0},
		{"45°", []float32{1, 0}, []float32{1, 1}, 1 / math.Sqrt2},
	} {
		if got := Cosine(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: Cosine = %v, want %v", c.name, got, c.want)
		}
	}
	if got := Dot([]float32{1, 2, 3}, []float32{4, 5, 6}); got != 32 {
		t.Errorf("Dot = %v, want 32", got)
	}
}

func TestKeys(t *testing.T) {
	if got := Join([]byte("a/"), []byte("b"), nil, []byte{0}); !bytes.Equal(got, []byte("a/b\x00")) {
		t.Errorf("Join = %q", got)
	}
	if a, b := U64(255), U64(256); bytes.Compare(a, b) >= 0 || len(a) != 8 {
		t.Errorf("U64 does not sort numerically: %x, %x", a, b)
	}
	short := strings.Repeat("é", MaxKeyText/2)
	if got := KeyText(short); string(got) != short {
		t.Errorf("KeyText changed a text of %d bytes", len(short))
	}
	long := strings.Repeat("x", 1000)
	k := KeyText(long)
	if len(k) != MaxKeyText || utf8.Valid(k) || !strings.HasPrefix(string(k), "xxx") {
		t.Errorf("KeyText(1000 bytes) = %q (%d bytes)", k, len(k))
	}
	if bytes.Equal(k, KeyText(long+"y")) {
		t.Error("two long texts with the same start share a key")
	}
}

func TestValidateAgentID(t *testing.T) {
	for _, id := range []string{"", "agent-1", "ü-agent", strings.Repeat("a", 200)} {
		if err := ValidateAgentID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"a\x00b", "a\nb", "a\x7f", strings.Repeat("a", 201)} {
		if err := ValidateAgentID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", id, err)
		}
	}
}

func TestVectorCodec(t *testing.T) {
	v := []float32{1, -0.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32, 0}
	b := EncodeVector(v)
	if !bytes.Equal(b[:4], []byte{0, 0, 0x80, 0x3f}) { // 1.0, little-endian
		t.Fatalf("1.0 encodes as % x", b[:4])
	}
	got, err := DecodeVector(b)
	if err != nil || len(got) != len(v) {
		t.Fatalf("decode: %v, %v", got, err)
	}
	for i := range v {
		if math.Float32bits(got[i]) != math.Float32bits(v[i]) {
			t.Fatalf("element %d: %v, want %v", i, got[i], v[i])
		}
	}
	if _, err := DecodeVector(b[:5]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("5 bytes: %v, want ErrCorrupt", err)
	}
}

// A mean is summed in float64 in order; a vector of another length starts
// it again; what readers hold of an earlier mean does not change.
func TestMean(t *testing.T) {
	var m Mean
	var got []float32
	for _, v := range [][]float32{{1, 2}, {3, 4}, {2, 0}} {
		m, got = m.Add(v)
	}
	if !slices.Equal(got, []float32{2, 2}) {
		t.Fatalf("mean %v", got)
	}
	before := m
	if _, got = m.Add([]float32{5}); !slices.Equal(got, []float32{5}) {
		t.Fatalf("a vector of another length: mean %v", got)
	}
	if _, got = before.Add([]float32{6, 6}); !slices.Equal(got, []float32{3, 3}) {
		t.Fatalf("the earlier mean changed: %v", got)
	}
}

// AddInPlace then Value gives exactly what the same Adds give, a vector of
// another length starting it again; an empty mean has no value.
func TestMeanAddInPlace(t *testing.T) {
	if (Mean{}).Value() != nil {
		t.Fatal("an empty mean has a value")
	}
	vecs := [][]float32{{0.1, 0.7, -0.3}, {0.30000001, 0.2, 0.9}, {1e-7, -0.5, 0.25}, {0.33, 0.1, 0.1}}
	var added, inPlace Mean
	var want []float32
	for _, v := range vecs {
		added, want = added.Add(v)
		inPlace.AddInPlace(v)
		if got := inPlace.Value(); !slices.Equal(got, want) {
			t.Fatalf("in place %v, added %v", got, want)
		}
	}
	inPlace.AddInPlace([]float32{5})
	if got := inPlace.Value(); !slices.Equal(got, []float32{5}) {
		t.Fatalf("a vector of another length: mean %v", got)
	}
}

// The decoder reads what binary's appenders wrote, and the first error
// sticks: the reads after it return zeros, even where bytes would fit.
func TestDecoder(t *testing.T) {
	bad := errors.New("bad")
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -7)
	b = binary.LittleEndian.AppendUint64(b, 1<<60)
	b = binary.LittleEndian.AppendUint32(b, 1<<30)
	b = binary.AppendUvarint(b, 3)
	b = append(b, "abc"...)
	d := &Decoder{B: b, Bad: bad}
	if u, i, w, h, s := d.Uvarint(), d.Varint(), d.U64(), d.U32(), d.Str(); u != 300 || i != -7 || w != 1<<60 || h != 1<<30 || s != "abc" || d.Err != nil || len(d.B) != 0 {
		t.Fatalf("read %d %d %d %d %q, err %v, %d bytes left", u, i, w, h, s, d.Err, len(d.B))
	}
	if d = (&Decoder{B: []byte{1, 2, 3}, Bad: bad}); d.U32() != 0 || !errors.Is(d.Err, bad) {
		t.Fatal("a word read from 3 bytes")
	}
	d = &Decoder{B: []byte{5, 'a', 1, 2}, Bad: bad} // a string of 5 bytes in 3
	if s := d.Bytes(); s != nil || !errors.Is(d.Err, bad) {
		t.Fatalf("a truncated string read %q, err %v", s, d.Err)
	}
	if v := d.Uvarint(); v != 0 {
		t.Fatalf("a read after the error gave %d", v)
	}
	if d = (&Decoder{B: []byte{9, 0}, Bad: bad}); d.Count() != 0 || d.Err == nil {
		t.Fatal("a count beyond the bytes left was taken")
	}
}
