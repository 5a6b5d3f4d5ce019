package vector

import (
	"os"

	"golang.org/x/sys/unix"
)

// punchHole frees the blocks of f's bytes from off for n bytes, which
// read as zeros afterwards; f keeps its size.
func punchHole(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}
