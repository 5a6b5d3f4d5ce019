package memory

import (
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/memory/model"
)

// mustCIDOf is the CID of b under codec.
func mustCIDOf(t testing.TB, codec uint64, b []byte) cid.Cid {
	t.Helper()
	c, err := model.SumCID(codec, b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
