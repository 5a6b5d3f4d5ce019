package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/messages"
)

// The store's upkeep from the command line: backups of a running server
// (full, then incremental), status and gc against it; then, with the
// server stopped, a restore into a new directory, a refused restore into
// it again, status, gc and a backup on the data directory, and the
// restored sona served as it was at the last backup.
func TestStorageCommands(t *testing.T) {
	withoutEvaluation(t)
	data := t.TempDir()
	srv := startServer(t, data)
	ctx := context.Background()
	c := client.New(srv.url, nil)
	sona, err := c.CreateSona(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	insert := func(from, to int) {
		for i := from; i < to; i++ {
			d, _ := structpb.NewStruct(map[string]any{"kind": "text", "content": fmt.Sprintf("entry %d of the ledger", i)})
			if _, err := c.Insert(ctx, &messages.InsertRequest{Sona: sona.Uuid, Data: d, Dedup: proto.Bool(false)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(0, 20)
	backups := filepath.Join(t.TempDir(), "backups")
	mustRun := func(args ...string) string {
		t.Helper()
		stdout, stderr, code := run(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, stdout, stderr)
		}
		return stdout
	}
	if out := mustRun("backup", "--server", srv.url, "--out", backups); !strings.Contains(out, "backup 1 (full)") {
		t.Fatalf("first backup: %s", out)
	}
	insert(20, 25)
	var e struct {
		Seq     int    `json:"seq"`
		Kind    string `json:"kind"`
		Entries int64  `json:"entries"`
		Bytes   int64  `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(mustRun("backup", "--server", srv.url, "--out", backups, "--json")), &e); err != nil || e.Seq != 2 || e.Kind != "incremental" || e.Entries == 0 {
		t.Fatalf("second backup: %+v, %v", e, err)
	}
	if out := mustRun("status", "--server", srv.url); !strings.Contains(out, "on disk:") || !strings.Contains(out, "m/") {
		t.Fatalf("status: %s", out)
	}
	if out := mustRun("gc", "--server", srv.url); !strings.HasPrefix(out, "gc: compacted the tables") {
		t.Fatalf("gc: %s", out)
	}
	want, err := c.Sona(ctx, sona.Uuid)
	if err != nil {
		t.Fatal(err)
	}
	srv.stop(t, syscall.SIGTERM)

	restored := filepath.Join(t.TempDir(), "restored")
	if out := mustRun("restore", "--in", backups, "--data", restored); !strings.Contains(out, "restored backups 1–2") || !strings.Contains(out, "25 memories") {
		t.Fatalf("restore: %s", out)
	}
	_, stderr, code := run(t, "restore", "--in", backups, "--data", restored)
	if code == 0 || !strings.Contains(stderr, "not empty") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("restore into the restored directory again: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run(t, "restore", "--in", backups); code == 0 || !strings.Contains(stderr, "--data") {
		t.Fatalf("restore without --data: exit %d, %q", code, stderr)
	}
	if out := mustRun("status", "--data", restored); !strings.Contains(out, "commits:") {
		t.Fatalf("status of the restored directory: %s", out)
	}
	mustRun("gc", "--data", restored)
	if out := mustRun("backup", "--data", restored, "--out", filepath.Join(t.TempDir(), "b2")); !strings.Contains(out, "backup 1 (full)") {
		t.Fatalf("backup of the data directory: %s", out)
	}
	if _, stderr, code := run(t, "gc", "--data", filepath.Join(t.TempDir(), "none")); code == 0 || !strings.Contains(stderr, "no store in") {
		t.Fatalf("gc of a directory without a store: exit %d, %q", code, stderr)
	}
	// The parent of a data directory named store (as the bench keeps
	// them): refused, and nothing written into the data directory.
	parent := t.TempDir()
	mustRun("restore", "--in", backups, "--data", filepath.Join(parent, "store"))
	before, _ := os.ReadDir(filepath.Join(parent, "store"))
	if _, stderr, code := run(t, "gc", "--data", parent); code == 0 || !strings.Contains(stderr, "no store in") {
		t.Fatalf("gc of the parent of a data directory: exit %d, %q", code, stderr)
	}
	if after, _ := os.ReadDir(filepath.Join(parent, "store")); len(after) != len(before) {
		t.Fatalf("gc of the parent wrote into the data directory: %d entries, were %d", len(after), len(before))
	}

	srv = startServer(t, restored)
	got, err := client.New(srv.url, nil).Sona(ctx, sona.Uuid)
	if err != nil || got.GetHead() != want.GetHead() || got.Length != 25 {
		t.Fatalf("the restored sona: %v (%v), want head %s, length 25", got, err, want.GetHead())
	}
}
