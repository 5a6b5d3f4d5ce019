package actors_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// docWriter collects an export into the document an import reads.
type docWriter struct{ doc *messages.Export }

func (d *docWriter) Header(h *messages.ExportHeader) error {
	d.doc = &messages.Export{Format: h.Format, ExportedAt: h.ExportedAt, Embedder: h.Embedder, Dims: h.Dims, Scope: h.Scope, Sona: h.Sona}
	return nil
}

func (d *docWriter) Item(section string, m proto.Message) error {
	switch section {
	case "sonas":
		d.doc.Sonas = append(d.doc.Sonas, m.(*messages.ExportSona))
	case "memories":
		d.doc.Memories = append(d.doc.Memories, m.(*messages.ExportMemory))
	case "anchors":
		d.doc.Anchors = append(d.doc.Anchors, m.(*messages.Anchor))
	}
	return nil
}

// While an import runs, no heartbeat tick and no other import does: a
// merge appended to a chain being replayed would fork it from the export.
func TestImportExcludesTicksAndOtherImports(t *testing.T) {
	ctx := context.Background()
	src := start(t, testConfig(t.TempDir()), nil, actors.TestingKnobs{})
	rec, err := src.self.Sonas.Create(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"one", "two", "three"} {
		insertText(t, src, rec.Uuid, s)
	}
	w := &docWriter{}
	if err := src.self.Transfer.Export(ctx, "", w); err != nil {
		t.Fatal(err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	dst := start(t, testConfig(t.TempDir()), nil, actors.TestingKnobs{BeforeAppend: func(string, int64) {
		once.Do(func() { close(entered); <-release })
	}})
	done := make(chan error, 1)
	var res *messages.ImportResult
	go func() {
		var err error
		res, err = dst.sys.Import(ctx, w.doc)
		done <- err
	}()
	<-entered // the import holds its first append
	if _, err := dst.sys.Heartbeat(ctx, false); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("a heartbeat during an import: %v, want ErrUnavailable", err)
	}
	if _, err := dst.sys.Import(ctx, w.doc); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("a second import: %v, want ErrUnavailable", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if res.Appended != 3 {
		t.Fatalf("import appended %d", res.Appended)
	}
	if _, err := dst.sys.Heartbeat(ctx, false); err != nil {
		t.Fatalf("a heartbeat after the import: %v", err)
	}
	got, err := dst.self.Sonas.Get(rec.Uuid)
	if want, _ := src.self.Sonas.Get(rec.Uuid); err != nil || !proto.Equal(got, want) {
		t.Fatalf("imported sona %v, source %v (%v)", got, want, err)
	}
	var _ memory.ExportWriter = w
}
