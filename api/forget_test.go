package api_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const forgetMarker = "zqvxjtkqw"

// Forgetting over HTTP: the dry run, the excision, 410 on every read
// route, recall, the tombstone list, the exports, MCP, bad requests.
func TestForgetOverHTTP(t *testing.T) {
	h := newHarness(t)
	a := h.newSona("alpha")
	doomed := h.insertText(a, "the vault code is "+forgetMarker)
	kept := h.insertText(a, "the garden gate squeaks")
	raw := str(t, h.do("POST", "/files?sona="+a, []byte("scan of the "+forgetMarker+" letter")).obj(t, 201)["cid"])
	fileMem := str(t, h.insert(map[string]any{"sona": a, "data": map[string]any{"kind": "file", "name": "letter.txt", "mimeType": "text/plain", "content": map[string]any{"/": raw}}})["cid"])
	head := str(t, h.sona(a)["head"])

	for _, bad := range []struct {
		body   any
		status int
	}{
		{map[string]any{}, 400},
		{map[string]any{"cids": []string{"not-a-cid"}}, 400},
		{map[string]any{"label": "=x"}, 400},
		{map[string]any{"since": 20, "until": 10}, 400},
		{map[string]any{"colour": "red"}, 400},
		{map[string]any{"cids": []string{head}}, 404}, // an ACT is kept
		{map[string]any{"sona": "no-such-sona"}, 404},
	} {
		r := h.post("/forget", bad.body)
		wantError(t, r, bad.status, "")
	}

	dry := h.post("/forget", map[string]any{"cids": []string{doomed, fileMem}, "dry_run": true}).obj(t, 200)
	if num(t, dry["memories"]) != 2 || num(t, dry["files"]) != 1 || num(t, dry["batches"]) != 0 {
		t.Fatalf("dry run: %v", dry)
	}
	h.memory(doomed) // still there

	rep := h.post("/forget", map[string]any{"cids": []string{doomed, fileMem}, "reason": "GDPR request 7"}).obj(t, 200)
	if num(t, rep["memories"]) != 2 || num(t, rep["files"]) != 1 || num(t, rep["batches"]) != 1 {
		t.Fatalf("forget: %v", rep)
	}
	for _, path := range []string{"/memory/" + doomed, "/memory/" + fileMem, "/file/" + fileMem, "/file/" + raw,
		"/ipfs/" + doomed + "?format=raw", "/ipfs/" + raw + "?format=raw", "/ipfs/" + doomed + "?format=car"} {
		wantError(t, h.get(path), http.StatusGone, "forgotten")
	}
	h.memory(kept)
	// A chain's listing leaves the forgotten out.
	listed := h.get("/memories/list?sona="+a).obj(t, 200)
	if items := array(t, listed["items"]); len(items) != 1 || str(t, object(t, items[0])["cid"]) != kept {
		t.Fatalf("the chain's listing: %v", listed)
	}
	// The chain's CAR keeps the forgotten CIDs but none of their bytes.
	car := h.get("/ipfs/" + head + "?format=car")
	if car.status != 200 || strings.Contains(string(car.body), forgetMarker) {
		t.Fatalf("the chain's CAR: %d, holds the marker: %v", car.status, strings.Contains(string(car.body), forgetMarker))
	}
	if r := h.get("/ipfs/" + head + "?format=raw"); r.status != 200 {
		t.Fatalf("the head ACT: %s", r)
	}
	recalled := h.post("/sona/"+a+"/recall", map[string]any{"query": "vault code " + forgetMarker}).obj(t, 200)
	for _, m := range array(t, recalled["memories"]) {
		if c := str(t, object(t, m)["cid"]); c == doomed || c == fileMem {
			t.Fatalf("recall returned forgotten %s", c)
		}
	}
	list := h.get("/forgotten").obj(t, 200)
	if items := array(t, list["items"]); len(items) != 3 {
		t.Fatalf("tombstones: %v", list)
	} else {
		for _, it := range items {
			o := object(t, it)
			if str(t, o["reason"]) != "GDPR request 7" || str(t, o["by"]) != "local" {
				t.Fatalf("tombstone %v", o)
			}
		}
	}
	for _, path := range []string{"/export?all=1", "/export?all=1&format=car", "/export?sona=" + a} {
		r := h.get(path)
		if r.status != 200 || strings.Contains(string(r.body), forgetMarker) {
			t.Fatalf("%s: %d; holds the marker: %v", path, r.status, strings.Contains(string(r.body), forgetMarker))
		}
		if !strings.Contains(string(r.body), doomed) || !strings.Contains(string(r.body), "tombstones") {
			t.Fatalf("%s lists no tombstone of %s", path, doomed)
		}
	}
	// Storing it again is refused.
	wantError(t, h.post("/memories", map[string]any{"sona": a, "data": map[string]any{"kind": "text", "content": "the vault code is " + forgetMarker}}), http.StatusGone, "forgotten")
	// Again: nothing to do.
	again := h.post("/forget", map[string]any{"cids": []string{doomed}}).obj(t, 200)
	if num(t, again["already"]) != 1 || num(t, again["memories"]) != 0 {
		t.Fatalf("again: %v", again)
	}

	// MCP: a forgotten memory's resource is gone, and the tool forgets.
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memoria://memory/" + doomed}); err == nil || !strings.Contains(err.Error(), "forgotten") {
		t.Fatalf("MCP read of a forgotten memory: %v", err)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "forget", Arguments: map[string]any{"cids": []string{kept}}})
	if err != nil || res.IsError {
		t.Fatalf("MCP forget: %v %v", res, err)
	}
	wantError(t, h.get("/memory/"+kept), http.StatusGone, "forgotten")
}

// A sona-scoped token forgets its own sona's memories, learns that they
// are gone, and learns nothing of another sona's: forgotten or not, a
// CID of another sona is refused as one stored nowhere.
func TestForgetScopes(t *testing.T) {
	w := newAuthWorld(t)
	var writerA, readerA, admin principal
	for _, p := range principals {
		switch p.name {
		case "writer-A":
			writerA = p
		case "reader-A":
			readerA = p
		case "admin":
			admin = p
		}
	}
	nowhere := "bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
	for _, c := range []string{w.memB, nowhere, w.backboneMem, w.rawCID} {
		wantError(t, w.as(writerA, "POST", "/forget", map[string]any{"cids": []string{c}}), http.StatusForbidden, "forbidden")
	}
	wantError(t, w.as(writerA, "POST", "/forget", map[string]any{"cids": []string{w.memA}, "purge": true}), http.StatusForbidden, "forbidden")
	r := w.as(writerA, "POST", "/forget", map[string]any{"cids": []string{w.memA}}).obj(t, 200)
	if num(t, r["memories"]) != 1 {
		t.Fatalf("writer-A forgetting its memory: %v", r)
	}
	wantError(t, w.as(readerA, "GET", "/memory/"+w.memA, nil), http.StatusGone, "forgotten")
	// The admin forgets B's memory: to A's tokens it is as before, 403.
	w.as(admin, "POST", "/forget", map[string]any{"cids": []string{w.memB}}).obj(t, 200)
	before := w.as(readerA, "GET", "/memory/"+nowhere, nil)
	after := w.as(readerA, "GET", "/memory/"+w.memB, nil)
	wantError(t, after, http.StatusForbidden, "forbidden")
	if strings.ReplaceAll(string(before.body), nowhere, "X") != strings.ReplaceAll(string(after.body), w.memB, "X") {
		t.Fatalf("another sona's forgotten memory answers differently from one stored nowhere:\n%s\n%s", before.body, after.body)
	}
	wantError(t, w.as(writerA, "POST", "/forget", map[string]any{"cids": []string{w.memB}}), http.StatusForbidden, "forbidden")
	wantError(t, w.as(writerA, "GET", "/forgotten", nil), http.StatusForbidden, "forbidden")
}

// TestImportKeepsForgottenMemories: an export whose chains hold forgotten
// memories imports — each keeps its place in its chain (the same ACTs)
// and its tombstone, a memory that links to one keeps the edge — and the
// imported store exports the same document, content never included.
func TestImportKeepsForgottenMemories(t *testing.T) {
	a := newHarness(t, quiet)
	s := a.newSona("alpha")
	a.insertText(s, "the garden gate squeaks")
	doomed := a.insertText(s, "the vault code is "+forgetMarker)
	linked := str(t, a.insert(map[string]any{"sona": s, "data": map[string]any{"kind": "text", "content": "see the note before"},
		"edges": []any{map[string]any{"target": map[string]any{"/": doomed}, "weight": 1}}})["cid"])
	a.insertText(s, "the roses need water")
	a.post("/forget", map[string]any{"cids": []string{doomed}, "reason": "test"}).obj(t, 200)
	docA, raw := a.exportAll(t)
	if strings.Contains(string(raw), forgetMarker) {
		t.Fatal("the export holds the forgotten content")
	}

	b := newHarness(t, quiet)
	res := b.importDoc(t, raw, http.StatusCreated)
	if num(t, res["appended"]) != 4 || num(t, res["memories"]) != 3 {
		t.Fatalf("import: %v, want 4 ACTs of 3 memories (and one forgotten)", res)
	}
	if got := b.sonaLength(s); got != 4 {
		t.Fatalf("the imported chain has %d ACTs, want 4", got)
	}
	if str(t, b.sona(s)["head"]) != str(t, a.sona(s)["head"]) {
		t.Fatal("the imported chain's head differs from the exported one")
	}
	wantError(t, b.get("/memory/"+doomed), http.StatusGone, "forgotten")
	if !strings.Contains(string(mustJSON(t, b.get("/forgotten").obj(t, 200))), doomed) {
		t.Fatal("the import did not carry the tombstone")
	}
	if !strings.Contains(string(mustJSON(t, b.memory(linked))), doomed) {
		t.Fatal("the memory that links to the forgotten one lost its edge")
	}
	docB, rawB := b.exportAll(t)
	if !reflect.DeepEqual(docA, docB) {
		t.Fatalf("the export of the import differs:\n%s", firstDifference(t, docA, docB))
	}
	if strings.Contains(string(rawB), forgetMarker) {
		t.Fatal("the import's export holds the forgotten content")
	}
	// Storing the forgotten memory again is refused there too.
	wantError(t, b.post("/memories", map[string]any{"sona": s, "data": map[string]any{"kind": "text", "content": "the vault code is " + forgetMarker}}), http.StatusGone, "forgotten")
	// An import again changes nothing.
	if res := b.importDoc(t, raw, http.StatusOK); num(t, res["appended"]) != 0 {
		t.Fatalf("a second import appended %v", res["appended"])
	}
}
