package memory

import (
	"testing"

	"github.com/ipfs/go-cid"
)

// mustCIDOf is the CID of b under codec.
func mustCIDOf(t testing.TB, codec uint64, b []byte) cid.Cid {
	t.Helper()
	c, err := SumCID(codec, b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
