package memory

import "github.com/memoria-ai/memoria/memory/base"

// The error classes of memory/, re-exported from memory/base (where they
// are documented) so that callers keep writing memory.ErrNotFound.
var (
	ErrInvalid          = base.ErrInvalid
	ErrNotFound         = base.ErrNotFound
	ErrForgotten        = base.ErrForgotten
	ErrCorrupt          = base.ErrCorrupt
	ErrTooLarge         = base.ErrTooLarge
	ErrClosed           = base.ErrClosed
	ErrLocked           = base.ErrLocked
	ErrDiskFull         = base.ErrDiskFull
	ErrLostWrites       = base.ErrLostWrites
	ErrEmbedderMismatch = base.ErrEmbedderMismatch
	ErrChainConflict    = base.ErrChainConflict
	ErrAmbiguous        = base.ErrAmbiguous
	ErrExists           = base.ErrExists
)

// Page is one page of a listing (base.Page).
type Page[T any] = base.Page[T]
