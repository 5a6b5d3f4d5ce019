package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/messages"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// A damaged write-ahead log after a kill: every command refuses the data
// directory, naming the loss and `memoria repair --accept-loss`; repair
// without the flag refuses too; with it, what remains is served again.
func TestRepairAcceptsALoss(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data)
	ctx := context.Background()
	c := client.New(srv.url, nil)
	sona, err := c.CreateSona(ctx, "witness")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		d, _ := structpb.NewStruct(map[string]any{"kind": "text", "content": fmt.Sprintf("line %d of the witness statement", i)})
		if _, err := c.Insert(ctx, &messages.InsertRequest{Sona: sona.Uuid, Data: d, Dedup: proto.Bool(false)}); err != nil {
			t.Fatal(err)
		}
	}
	srv.cmd.Process.Kill()
	<-srv.exited

	wals, _ := filepath.Glob(filepath.Join(data, "store", "*.mem"))
	if len(wals) == 0 {
		t.Fatal("no write-ahead log after the kill")
	}
	for _, w := range wals {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		if last := bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 }); last > 1000 {
			b[last/2] ^= 0xff
			if err := os.WriteFile(w, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, args := range [][]string{{"sonas", "--data", data}, {"repair", "--data", data}} {
		_, stderr, code := run(t, args...)
		if code == 0 || !strings.Contains(stderr, "lost acknowledged writes") || !strings.Contains(stderr, "memoria repair --accept-loss") ||
			strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	stdout, stderr, code := run(t, "repair", "--data", data, "--accept-loss")
	if code != 0 || !strings.Contains(stdout, "accepted the loss") || !strings.Contains(stdout, "memories lost") {
		t.Fatalf("repair --accept-loss: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if stdout, stderr, code := run(t, "repair", "--data", data); code != 0 || !strings.Contains(stdout, "the store is sound") {
		t.Fatalf("repair after accepting: exit %d\n%s\n%s", code, stdout, stderr)
	}
	srv = startServer(t, data)
	got, err := client.New(srv.url, nil).Sona(ctx, sona.Uuid)
	if err != nil || got.Length == 0 || got.Length >= 300 {
		t.Fatalf("after the repair: %v, %v", got, err)
	}
}
