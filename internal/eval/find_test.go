package eval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindData(t *testing.T) {
	// A checkout in work/repo with work/shared/data/locomo beside it.
	work := t.TempDir()
	repo := filepath.Join(work, "repo")
	data := filepath.Join(work, "shared", "data", "locomo")
	for _, d := range []string{filepath.Join(repo, "cmd", "memoria"), data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module github.com/memoria-ai/memoria\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(DataEnv, "")

	// No conversation files yet: the error says where it looked and how to say where they are.
	t.Chdir(filepath.Join(repo, "cmd", "memoria"))
	_, err := FindData()
	if !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "--data") {
		t.Fatalf("without files: %v", err)
	}
	if err := os.WriteFile(filepath.Join(data, "conv-1.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, wd := range []string{repo, filepath.Join(repo, "cmd", "memoria")} {
		t.Chdir(wd)
		if got, err := FindData(); err != nil || got != data {
			t.Fatalf("from %s: %q, %v", wd, got, err)
		}
	}
	// Outside a checkout.
	t.Chdir(work)
	if _, err := FindData(); !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "not inside a Memoria checkout") {
		t.Fatalf("outside: %v", err)
	}
	// $MEMORIA_LOCOMO wins, and must hold conversations.
	t.Setenv(DataEnv, data)
	if got, err := FindData(); err != nil || got != data {
		t.Fatalf("env: %q, %v", got, err)
	}
	t.Setenv(DataEnv, work)
	if _, err := FindData(); !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), DataEnv) {
		t.Fatalf("env without files: %v", err)
	}
}
