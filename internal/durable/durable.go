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
	var n int64
	err := Write(path, func(w io.Writer) error {
		var err error
		n, err = io.Copy(w, r)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Write is WriteFile with the content written by write: path has all of
// it or, when write or the file system fails, is left as it was.
func Write(path string, write func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".part-*")
	if err != nil {
		return err
	}
	err = write(tmp)
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
	}
	return err
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
