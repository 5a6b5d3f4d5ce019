package memory

import (
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/meta"
)

// The memories' records live in memory/meta (Self.Memories); these names
// keep the files still to move out (recall, migrate) compiling unchanged
// during the move (issue 14).
var (
	prefixMeta   = meta.Prefix
	prefixVector = meta.VectorPrefix
	metaKey      = meta.Key
	vectorKey    = meta.VectorKey
	encodeVector = meta.EncodeVector
	decodeVector = meta.DecodeVector
	getMeta      = meta.Read
	readMemory   = meta.ReadMemory
	metaOp       = meta.Update
)

// Support is what Memories.Reinforce takes of the memories a response
// used: their CIDs and recall scores.
func Support(used []*Recalled) []meta.Used {
	out := make([]meta.Used, len(used))
	for i, r := range used {
		out[i] = meta.Used{CID: r.CID, Score: r.Score}
	}
	return out
}

// touchOp is recall's record that memories were recalled (meta.Touch):
// the activity tick is their first sona's length.
func (s *Self) touchOp(rs []*Recalled) Op {
	cids := make([]cid.Cid, len(rs))
	for i, r := range rs {
		cids[i] = r.CID
	}
	return meta.Touch(cids, s.Sonas.Activity)
}
