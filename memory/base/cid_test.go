package base

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// cids are CIDs of the kinds a store holds and others cid.Cast reads: a
// version 0 one, version 1 ones of other codecs and hashes, an identity
// hash of no bytes.
func cids(t testing.TB) []cid.Cid {
	var out []cid.Cid
	for _, p := range []cid.Prefix{
		{Version: 0, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1},
		{Version: 1, Codec: cid.DagCBOR, MhType: mh.SHA2_256, MhLength: -1},
		{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_512, MhLength: -1},
		{Version: 1, Codec: 0x300001, MhType: mh.BLAKE3, MhLength: 32}, // a codec of a three-byte varint
		{Version: 1, Codec: cid.Raw, MhType: mh.IDENTITY, MhLength: -1},
	} {
		for _, data := range []string{"", "a memory"} {
			c, err := p.Sum([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
	}
	return out
}

// TestCIDReadsAsCast holds CID to cid.Cast's rule over valid CIDs, every
// prefix of them, them with trailing bytes and with each byte changed: the
// same CID or both refusing, and the CID sharing the key's bytes.
func TestCIDReadsAsCast(t *testing.T) {
	same := func(key string) {
		t.Helper()
		want, werr := cid.Cast([]byte(key))
		got, err := CID(key)
		switch {
		case (werr == nil) != (err == nil):
			t.Fatalf("CID(%x): error %v, cid.Cast's %v", key, err, werr)
		case err != nil && !errors.As(err, new(cid.ErrInvalidCid)):
			t.Fatalf("CID(%x): error %v is not a cid.ErrInvalidCid", key, err)
		case err == nil && (!got.Equals(want) || got.String() != want.String()):
			t.Fatalf("CID(%x) = %s, cid.Cast's %s", key, got, want)
		case err == nil && unsafe.StringData(got.KeyString()) != unsafe.StringData(key):
			t.Fatalf("CID(%x) copied the key's bytes", key)
		}
	}
	checked := 0
	for _, c := range cids(t) {
		key := c.KeyString()
		same(key)
		same(key + "\x00")
		for i := range len(key) {
			same(key[:i])
			b := []byte(key)
			for _, x := range []byte{0x00, 0x01, 0x7f, 0x80, 0xff, b[i] ^ 0x20} {
				b[i] = x
				same(string(b))
				checked++
			}
		}
	}
	if checked < 500 {
		t.Fatalf("only %d changed keys checked", checked)
	}
}

// TestCIDAllocatesNothing: the point of CID is the copy it does not make.
func TestCIDAllocatesNothing(t *testing.T) {
	for _, c := range cids(t) {
		key := c.KeyString()
		if n := testing.AllocsPerRun(100, func() {
			if _, err := CID(key); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("CID(%s) allocates %.0f objects", c, n)
		}
	}
}

func FuzzCID(f *testing.F) {
	for _, c := range cids(f) {
		f.Add(c.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := cid.Cast(b)
		got, err := CID(string(b))
		if (werr == nil) != (err == nil) || err == nil && !got.Equals(want) {
			t.Fatalf("CID(%x) = %v, %v; cid.Cast's %v, %v", b, got, err, want, werr)
		}
	})
}
