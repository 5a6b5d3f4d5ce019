//go:build unix

package vector

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of f, private and writable: writes
// go to the process's copies of the pages, never to the file.
func mapFile(f *os.File, size int64) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
}

// unmapFile ends a mapping of mapFile.
func unmapFile(b []byte) error { return syscall.Munmap(b) }
