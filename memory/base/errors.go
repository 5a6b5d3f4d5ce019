package base

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The error classes. Every error of memory/ wraps one of them (or is a
// context's error), so that transports map it with errors.Is: ErrInvalid
// to a 400, ErrNotFound to a 404, ErrCorrupt to a 500 that stops an
// actor rather than restart it, and so on. Callers test them here
// (base.ErrNotFound): there is no second name for them.
var (
	// ErrInvalid marks input that breaks the schema or the rules: a
	// memory, a block, a name, a cursor.
	ErrInvalid = errors.New("memory: invalid")
	// ErrNotFound marks what is not stored (or not visible to the caller).
	ErrNotFound = errors.New("memory: not found")
	// ErrForgotten marks a block that was forgotten (excised: see
	// memory/forget): its bytes are gone, its tombstone remains. It is
	// also an ErrNotFound, so that what skips a missing memory skips a
	// forgotten one; transports answer it with 410 Gone.
	ErrForgotten error = forgottenError{}
	// ErrCorrupt marks damaged stored data: a block whose bytes do not
	// hash to its CID, a record that does not decode, a store file that
	// fails its checksums (the error names the file).
	ErrCorrupt = errors.New("memory: corrupt")
	// ErrTooLarge marks a block or a write over the store's limits.
	ErrTooLarge = errors.New("memory: too large")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("memory: store closed")
	// ErrLocked means another process has the data directory open.
	ErrLocked = errors.New("memory: data directory in use by another process")
	// ErrDiskFull means a write was refused because it would take the
	// store's file system below its free-space reserve
	// (store.min_free_mb): reads go on, and writes resume once space is
	// freed.
	ErrDiskFull = errors.New("memory: insufficient storage")
	// ErrLostWrites means the store holds fewer writes than it
	// acknowledged: a write-ahead log was damaged (see the error for
	// which). It refuses to serve until the loss is accepted
	// (`memoria repair --accept-loss`).
	ErrLostWrites = errors.New("memory: store lost acknowledged writes")
	// ErrEmbedderMismatch means the store was written with another
	// embedding space.
	ErrEmbedderMismatch = errors.New("memory: store was built with another embedder")
	// ErrChainConflict means an append did not extend the current head:
	// someone else wrote the chain, which the one-writer rule forbids.
	ErrChainConflict = errors.New("memory: chain head moved")
	// ErrAmbiguous means a name matches more than one sona.
	ErrAmbiguous = errors.New("memory: ambiguous sona name")
	// ErrExists means what was to be created exists already: a sona of
	// that name.
	ErrExists = errors.New("memory: already exists")
)

// forgottenError is ErrForgotten: "memory: forgotten", which is also an
// ErrNotFound.
type forgottenError struct{}

func (forgottenError) Error() string        { return "memory: forgotten" }
func (forgottenError) Is(target error) bool { return target == ErrNotFound }

// Page is one page of a listing.
type Page[T any] struct {
	Items []T
	// Next is the cursor of the following page, or "" at the end.
	Next string
}

// Invalidf is an ErrInvalid error with a formatted message.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ValidText checks a piece of text from a caller: not blank, at most
// maxBytes, UTF-8 (ErrInvalid naming field otherwise).
func ValidText(field, v string, maxBytes int) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%w: %s must not be empty", ErrInvalid, field)
	case len(v) > maxBytes:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, field, maxBytes)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s must be UTF-8", ErrInvalid, field)
	}
	return nil
}

// ValidateAgentID checks an agent id: printable, short.
func ValidateAgentID(id string) error {
	if len(id) > 200 || strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("%w: agent_id must be at most 200 printable characters", ErrInvalid)
	}
	return nil
}
