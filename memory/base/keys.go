package base

import (
	"crypto/sha256"
	"encoding/binary"
)

// Join concatenates key parts into a new slice.
func Join(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]byte, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// U64 is v as 8 big-endian bytes: the key part of a sequence number, so
// that keys sort in numeric order.
func U64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// MaxKeyText bounds the bytes of text from users in a key (Badger refuses
// keys over 65,000 bytes, and one long word must not poison a key space):
// longer text is keyed by its first bytes, 0xff (never in UTF-8), and the
// SHA-256 of the whole, in MaxKeyText bytes.
const MaxKeyText = 128

// KeyText is text as a bounded key part (see MaxKeyText).
func KeyText(s string) []byte {
	if len(s) <= MaxKeyText {
		return []byte(s)
	}
	sum := sha256.Sum256([]byte(s))
	return Join([]byte(s[:MaxKeyText-1-len(sum)]), []byte{0xff}, sum[:])
}

// DecodeU64 is the number of big-endian bytes b (U64's inverse; shorter
// input is read as the low bytes).
func DecodeU64(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		n = n<<8 | uint64(c)
	}
	return n
}
