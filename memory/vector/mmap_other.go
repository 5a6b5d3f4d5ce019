//go:build !unix

package vector

import "os"

// mapFile reads the first size bytes of f into the heap where nothing
// maps files.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	_, err := f.ReadAt(b, 0)
	return b, err
}

func unmapFile([]byte) error { return nil }
