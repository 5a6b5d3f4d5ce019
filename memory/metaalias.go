package memory

import "github.com/memoria-ai/memoria/memory/meta"

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
