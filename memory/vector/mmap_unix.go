//go:build unix

package vector

import (
	"os"
	"syscall"
)

// mapFile maps length bytes of f from offset off (a multiple of the page
// size), private and writable: writes go to the process's copies of the
// pages, never to the file.
func mapFile(f *os.File, off, length int64) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), off, int(length), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
}

// unmapFile ends a mapping of mapFile.
func unmapFile(b []byte) error { return syscall.Munmap(b) }

// reopen returns a file of its own for f's open file (a duplicate
// descriptor): the same file whatever has been renamed over f's path
// since it was opened.
func reopen(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}
