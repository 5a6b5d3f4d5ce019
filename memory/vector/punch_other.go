//go:build !linux

package vector

import (
	"errors"
	"os"
)

// punchHole is Linux's only: elsewhere the spill stops at its first
// adoption that leaves vectors in it (the blocks would stay taken).
func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }
