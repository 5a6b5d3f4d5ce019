package api_test

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/store"
)

// The store's upkeep routes: a pass of the garbage collection, the
// storage report, a backup stream that reads back whole, and the backup
// requests refused before any byte of a stream.
func TestAdminStorageRoutes(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Evaluation.Mode = "off" })
	id := h.newSona("kept")
	for _, s := range []string{"the first note", "the second note", "the third note"} {
		h.insertText(id, s)
	}

	st := h.get("/admin/storage").obj(t, 200)
	wantKeys(t, st, "disk", "spaces", "commits", "memseq", "gc", "free_bytes", "reserve_bytes", "writes_refused")
	if num(t, st["memseq"]) != 3 || len(array(t, st["spaces"])) == 0 {
		t.Fatalf("storage: %v", st)
	}
	rep := h.post("/admin/gc", nil).obj(t, 200)
	wantKeys(t, rep, "started_at", "took_seconds", "compacted", "rewritten", "before", "after", "reclaimed", "spaces", "skipped")

	r := h.post("/admin/backup", nil)
	if r.status != 200 || r.header.Get("Content-Type") != "application/vnd.memoria.backup" {
		t.Fatalf("backup: %s", r)
	}
	m, digests, err := store.ReadBackup(bytes.NewReader(r.body), nil)
	if err != nil || m.Kind != "full" || m.MemSeq != 3 || len(digests) != m.Buckets {
		t.Fatalf("the backup stream: %+v, %v", m, err)
	}

	enc := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	for name, body := range map[string]any{
		"not JSON":            "{",
		"no digests":          map[string]any{"store_id": m.StoreID, "since_version": m.Version},
		"digests of 12 bytes": map[string]any{"store_id": m.StoreID, "since_version": m.Version, "key_digests": enc(12)},
		"another store":       map[string]any{"store_id": "0123456789abcdef0123456789abcdef", "since_version": m.Version, "key_digests": enc(8 * 256)},
		"a later version":     map[string]any{"store_id": m.StoreID, "since_version": m.Version + 1000, "key_digests": enc(8 * 256)},
		"an unknown field":    map[string]any{"since": 3},
	} {
		r := h.post("/admin/backup", body)
		if r.status != 400 || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %s", name, r)
			continue
		}
		checkErrorBody(t, r, "")
	}
}
