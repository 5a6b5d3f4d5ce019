// Package durable writes files so that a crash leaves either the whole new
// file under its name or none of it.
package durable

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes what r holds to path: into a temporary file in path's
// directory, synced, then renamed over path, and the directory synced. A
// failure removes the temporary file and leaves path as it was. It returns
// the number of bytes written.
func WriteFile(path string, r io.Reader) (int64, error) {
	return Write(path, func(w io.Writer) error {
		_, err := io.Copy(w, r)
		return err
	})
}

// Write is WriteFile with the content written by write: path has all of
// it or, when write or the file system fails, is left as it was. It
// returns the number of bytes write wrote (0 on a failure).
func Write(path string, write func(w io.Writer) error) (int64, error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".part-*")
	if err != nil {
		return 0, err
	}
	cw := &Counter{W: tmp}
	err = write(cw)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return 0, err
	}
	return cw.N, nil
}

// Counter counts the bytes written through it to W.
type Counter struct {
	W io.Writer
	N int64
}

func (c *Counter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}

// SyncDir makes the names in dir durable: the files created, renamed or
// removed in it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
