//go:build !unix

package vector

import (
	"errors"
	"os"
)

// mapFile reads length bytes of f from offset off into the heap where
// nothing maps files.
func mapFile(f *os.File, off, length int64) ([]byte, error) {
	b := make([]byte, length)
	_, err := f.ReadAt(b, off)
	return b, err
}

func unmapFile([]byte) error { return nil }

// reopen opens f's path again and checks that it is still f's file.
func reopen(f *os.File) (*os.File, error) {
	g, err := os.Open(f.Name())
	if err != nil {
		return nil, err
	}
	a, err := f.Stat()
	if err != nil {
		g.Close()
		return nil, err
	}
	b, err := g.Stat()
	if err != nil || !os.SameFile(a, b) {
		g.Close()
		return nil, errors.Join(err, errors.New("the file was replaced"))
	}
	return g, nil
}
