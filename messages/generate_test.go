package messages_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/memoria-ai/memoria/internal/protogen"
)

// TestGeneratedCodeIsFresh fails when messages/*.pb.go differ from what
// `go generate ./messages` would write from proto/.
func TestGeneratedCodeIsFresh(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := protogen.Generate(context.Background(), root, filepath.Join(root, "proto"))
	if err != nil {
		t.Fatal(err)
	}
	committed, _ := filepath.Glob(filepath.Join(root, "messages", "*.pb.go"))
	if len(committed) != len(files) {
		t.Errorf("messages/ has %d generated files, proto/ yields %d: run `go generate ./messages`", len(committed), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: %v: run `go generate ./messages`", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate ./messages`", name)
		}
	}
}
