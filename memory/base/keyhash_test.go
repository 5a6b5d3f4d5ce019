package base

import "testing"

// A key hashes the same as a string and as bytes, differently under
// another hasher's seeds, and keys that differ in a byte hash apart.
func TestKeyHashOfBytesIsOfString(t *testing.T) {
	h, other := NewKeyHasher(), NewKeyHasher()
	seen := map[KeyHash]string{}
	for _, k := range []string{"", "h/", "h/agent\x00cid", "h/agent\x00cie", "o/0123456789abcdef0123456789abcdef0123"} {
		got := h.Of(k)
		if b := h.OfBytes([]byte(k)); b != got {
			t.Fatalf("%q: Of %x, OfBytes %x", k, got, b)
		}
		if other.Of(k) == got {
			t.Fatalf("%q hashes the same under two hashers' seeds", k)
		}
		if was, ok := seen[got]; ok {
			t.Fatalf("%q and %q share a hash", k, was)
		}
		seen[got] = k
	}
}
