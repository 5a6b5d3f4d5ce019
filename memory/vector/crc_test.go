package vector

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

// crc32Combine(CRC(a), CRC(b), len(b)) is CRC(a‖b), for splits anywhere,
// empty parts included.
func TestCRC32Combine(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 7, 64, 4096, 100_003} {
		b := make([]byte, n)
		rng.Read(b)
		want := crc32.Checksum(b, castagnoli)
		for _, at := range []int{0, n / 3, n / 2, n} {
			if got := crc32Combine(crc32.Checksum(b[:at], castagnoli), crc32.Checksum(b[at:], castagnoli), int64(n-at)); got != want {
				t.Fatalf("%d bytes split at %d: %08x, want %08x", n, at, got, want)
			}
		}
	}
}
