package durable

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := WriteFile(path, strings.NewReader("new contents"))
	if err != nil || n != 12 {
		t.Fatalf("WriteFile: %d %v", n, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new contents" {
		t.Fatalf("read back %q", b)
	}
	assertOnly(t, dir, "f")
}

type failing struct{ n int }

func (f *failing) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errors.New("source cut")
	}
	f.n--
	return copy(p, "x"), nil
}

func TestWriteFileFailureLeavesOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteFile(path, &failing{n: 3}); err == nil || !strings.Contains(err.Error(), "source cut") {
		t.Fatalf("err = %v, want the source's error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("after a failed write %q, want the old file", b)
	}
	assertOnly(t, dir, "f")
	if _, err := WriteFile(filepath.Join(dir, "missing", "f"), io.LimitReader(strings.NewReader("x"), 1)); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("directory holds %v, want %v (no temporary file left)", got, names)
	}
}
