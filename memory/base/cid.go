package base

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
	"github.com/multiformats/go-varint"
)

// CID is the CID whose bytes are key, sharing key's bytes where cid.Cast
// copies them: a key read back as a CID — from an index's or a cache's
// map, or a memory's link read from its block — is then no object of its
// own for the collector to mark while it is kept. What holds the CID holds
// the bytes key lies in (a chunk of a base.KeyTable, a memory's block):
// where those are dropped and the CIDs kept, cid.Cast's copy is the
// lighter. It accepts what cid.Cast accepts, with cid.ErrInvalidCid for
// the rest. key's bytes must not change afterwards (a Go string's never
// do; one made with unsafe.String from a buffer reused later must not be
// given).
func CID(key string) (cid.Cid, error) {
	n, err := cidLen(unsafe.Slice(unsafe.StringData(key), len(key)))
	switch {
	case err != nil:
		return cid.Undef, cid.ErrInvalidCid{Err: err}
	case n != len(key):
		return cid.Undef, cid.ErrInvalidCid{Err: errors.New("trailing bytes after the CID")}
	}
	// A cid.Cid is its bytes as a string, its one field
	// (TestCIDReadsAsCast holds that).
	return *(*cid.Cid)(unsafe.Pointer(&key)), nil
}

// cidLen is the length of the CID at the start of b, by cid.CidFromBytes'
// rules, without the copy that function makes.
func cidLen(b []byte) (int, error) {
	if len(b) > 2 && b[0] == mh.SHA2_256 && b[1] == 32 { // a version 0 CID: a bare SHA-256 multihash
		if len(b) < 34 {
			return 0, errors.New("not enough bytes for cid v0")
		}
		if _, err := mh.Cast(b[:34]); err != nil {
			return 0, err
		}
		return 34, nil
	}
	version, n, err := varint.FromUvarint(b)
	if err != nil {
		return 0, err
	}
	if version != 1 {
		return 0, fmt.Errorf("expected 1 as the cid version number, got: %d", version)
	}
	_, c, err := varint.FromUvarint(b[n:])
	if err != nil {
		return 0, err
	}
	h, _, err := mh.MHFromBytes(b[n+c:])
	if err != nil {
		return 0, err
	}
	return n + c + h, nil
}
