package memory

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// StoreVersion is the layout version of the key spaces in doc.go. A store
// written by a newer layout is refused.
const StoreVersion = 3

var (
	prefixSona    = []byte("s/")
	prefixName    = []byte("n/")
	prefixChain   = []byte("c/")
	prefixNameVec = []byte("k/")
	prefixLog     = []byte("q/")
	keyVersion    = []byte("x/version")
)

func sonaKey(uuid string) []byte       { return base.Join(prefixSona, []byte(uuid)) }
func nameVectorKey(uuid string) []byte { return base.Join(prefixNameVec, []byte(uuid)) }
func nameKey(name, uuid string) []byte {
	return base.Join(prefixName, []byte(name), []byte{0}, []byte(uuid))
}
func namePrefix(name string) []byte { return base.Join(prefixName, []byte(name), []byte{0}) }
func chainPrefix(uuid string) []byte {
	return base.Join(prefixChain, []byte(uuid), []byte{0})
}
func chainKey(uuid string, seq int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return base.Join(chainPrefix(uuid), b[:])
}

func logKey(seq uint64) []byte { return base.Join(prefixLog, base.U64(seq)) }

// A chain entry (the value of a c/ key) is the ACT, its memory, and the
// insertion-log position of the store when the ACT was appended.
func encodeChainEntry(act, mem cid.Cid, logSeq uint64) []byte {
	return base.Join(act.Bytes(), mem.Bytes(), base.U64(logSeq))
}

func decodeChainEntry(b []byte) (act, mem cid.Cid, logSeq uint64, err error) {
	n, act, err := cid.CidFromBytes(b)
	if err != nil {
		return cid.Undef, cid.Undef, 0, fmt.Errorf("%w: chain entry: %v", ErrCorrupt, err)
	}
	m, mem, err := cid.CidFromBytes(b[n:])
	if err != nil || len(b[n+m:]) != 8 {
		return cid.Undef, cid.Undef, 0, fmt.Errorf("%w: chain entry: %v", ErrCorrupt, err)
	}
	return act, mem, binary.BigEndian.Uint64(b[n+m:]), nil
}

// scanChainMemories calls f with the sona and the memory of every chain
// entry, sona by sona, each chain in seq order.
func scanChainMemories(txn Reader, f func(sona string, mem cid.Cid) error) error {
	return store.Scan(txn, prefixChain, func(k, v []byte) error {
		id, _, ok := bytes.Cut(k[len(prefixChain):], []byte{0})
		if !ok {
			return fmt.Errorf("%w: chain key", ErrCorrupt)
		}
		_, mem, _, err := decodeChainEntry(v)
		if err != nil {
			return err
		}
		return f(string(id), mem)
	})
}
