package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// parseExport reads an export and drops the one field that differs
// between two exports of the same self, exported_at.
func parseExport(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("export is not JSON: %v", err)
	}
	if doc["format"] != "memoria-export/1" {
		t.Fatalf("format %v", doc["format"])
	}
	delete(doc, "exported_at")
	return doc
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return out
}

func TestExportImportAnchorsCLI(t *testing.T) {
	withoutEvaluation(t)
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	mustRun(t, "sonas", "create", "--data", a, "ops")
	mustRun(t, "insert", "--data", a, "--sona", "ops", "--kind", "error", "The database went down at noon.")
	mustRun(t, "insert", "--data", a, "--sona", "ops", "--label", "anchor=milestone", "Version one is out.")
	mustRun(t, "chat", "--data", a, "--sona", "ops", "We decided to keep Postgres.")

	file := filepath.Join(dir, "self.json")
	_, errOut, code := run(t, "export", "--format", "json", "--all", "--data", a, "--out", file)
	if code != 0 || !strings.HasPrefix(errOut, "exported ") {
		t.Fatalf("export --out: exit %d: %s", code, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".self.json.part-*")); len(leftovers) != 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}

	var res struct {
		Appended int64 `json:"appended"`
		Anchors  int64 `json:"anchors"`
		Sonas    []struct {
			Name string `json:"name"`
		} `json:"sonas"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "import", "--format", "json", "--data", b, "--json", file)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Appended != 4 || res.Anchors != 3 || len(res.Sonas) != 1 || res.Sonas[0].Name != "ops" {
		t.Fatalf("import result %+v", res)
	}
	again := mustRun(t, "export", "--all", "--data", b) // json is the default format, stdout the default output
	if want, got := parseExport(t, raw), parseExport(t, []byte(again)); !reflect.DeepEqual(want, got) {
		t.Fatal("the export of the imported data differs from the export")
	}
	out := mustRun(t, "anchors", "--data", b)
	for _, category := range []string{"incident", "milestone", "decision"} {
		if !strings.Contains(out, category) {
			t.Fatalf("anchors lack %s:\n%s", category, out)
		}
	}
	if sona := parseExport(t, []byte(mustRun(t, "export", "--sona", "ops", "--data", a))); sona["scope"] != "sona" {
		t.Fatalf("sona export scope %v", sona["scope"])
	}

	// A bad file is refused in one line and writes nothing.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(raw), "The database went down", "The database came up", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"import", "--data", c, bad},
		{"import", "--data", c, filepath.Join(dir, "missing.json")},
		{"import", "--data", c, "--format", "car", file},
		{"export", "--data", c},
		{"export", "--data", c, "--all", "--sona", "ops"},
		{"export", "--data", c, "--format", "tar", "--all"},
		{"export", "--data", c, "--sona", "nobody"},
	} {
		_, errOut, code := run(t, args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "memoria: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if out := mustRun(t, "sonas", "--data", c, "--json"); !strings.Contains(out, `"items":[]`) {
		t.Fatalf("a refused import left sonas: %s", out)
	}

	// Against a running server: import from stdin, export over HTTP.
	srv := startServer(t, c)
	cmd := exec.Command(binary, "import", "--server", srv.url, "-")
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(string(raw))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "imported 1 sonas") {
		t.Fatalf("import over HTTP: %v\n%s", err, out)
	}
	served := mustRun(t, "export", "--server", srv.url, "--all")
	if want, got := parseExport(t, raw), parseExport(t, []byte(served)); !reflect.DeepEqual(want, got) {
		t.Fatal("the server's export differs from the imported one")
	}
	srv.stop(t, syscall.SIGTERM)
}

// memoria export --out FILE.car and memoria import FILE.car: a round trip
// into an empty data directory, and damaged files refused in one line with
// nothing written.
func TestCARExportImportCLI(t *testing.T) {
	withoutEvaluation(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mustRun(t, "sonas", "create", "--data", a, "ops")
	mustRun(t, "insert", "--data", a, "--sona", "ops", "--kind", "error", "The database went down at noon.")
	mustRun(t, "chat", "--data", a, "--sona", "ops", "We decided to keep Postgres.")

	file := filepath.Join(dir, "self.car")
	if _, errOut, code := run(t, "export", "--all", "--data", a, "--out", file); code != 0 || !strings.HasPrefix(errOut, "exported ") {
		t.Fatalf("export --out self.car: exit %d: %s", code, errOut)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 || raw[0] == '{' {
		t.Fatalf("self.car is not a CAR: %.40q", raw)
	}
	if out := mustRun(t, "import", "--data", b, file); !strings.Contains(out, "imported 1 sonas") {
		t.Fatalf("import self.car: %s", out)
	}
	if want, got := parseExport(t, []byte(mustRun(t, "export", "--all", "--data", a))), parseExport(t, []byte(mustRun(t, "export", "--all", "--data", b))); !reflect.DeepEqual(want, got) {
		t.Fatal("the imported CAR makes another self")
	}
	if sa, sb := mustRun(t, "sonas", "--data", a, "--json"), mustRun(t, "sonas", "--data", b, "--json"); sa != sb {
		t.Fatalf("sonas and heads differ:\n%s\n%s", sa, sb)
	}
	// A sona's CAR, to stdout with --format car.
	if out := mustRun(t, "export", "--sona", "ops", "--format", "car", "--data", a); len(out) == 0 || out[0] == '{' {
		t.Fatal("export --sona --format car wrote no CAR")
	}

	at := bytes.Index(raw, []byte("The database went down"))
	if at < 0 {
		t.Fatal("the memory's text is not in the CAR")
	}
	corrupt := bytes.Clone(raw)
	corrupt[at] ^= 0x20
	for name, data := range map[string][]byte{"corrupt.car": corrupt, "truncated.car": raw[:len(raw)-40]} {
		bad, c := filepath.Join(dir, name), filepath.Join(dir, "c-"+name)
		if err := os.WriteFile(bad, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := run(t, "import", "--data", filepath.Join(c, "nested"), bad)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "memoria: ") {
			t.Errorf("import %s: exit %d, stderr %q", name, code, errOut)
		}
		// Into a data directory that did not exist: none is left behind.
		if _, err := os.Stat(c); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused import of %s created %s: %v", name, c, err)
		}
		// Into one that exists: it stays, with nothing written.
		if out := mustRun(t, "sonas", "--data", c, "--json"); !strings.Contains(out, `"items":[]`) {
			t.Fatalf("sonas of a new data directory: %s", out)
		}
		if _, errOut, code := run(t, "import", "--data", c, bad); code == 0 {
			t.Fatalf("import %s into an existing directory: %q", name, errOut)
		}
		if out := mustRun(t, "sonas", "--data", c, "--json"); !strings.Contains(out, `"items":[]`) {
			t.Fatalf("a refused import of %s left sonas: %s", name, out)
		}
	}
}

// The demo's store — many sonas advanced concurrently, memories shared
// between sonas — exports, imports and exports again to the same document.
func TestDemoStoreRoundTrip(t *testing.T) {
	withoutEvaluation(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	mustRun(t, "demo", "--data", a, "--json", "--per-theme", "2", "--rounds", "2")
	file := filepath.Join(dir, "demo.json")
	mustRun(t, "export", "--all", "--data", a, "--out", file)
	mustRun(t, "import", "--data", b, file)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := parseExport(t, raw)
	if sonas, _ := want["sonas"].([]any); len(sonas) < 8 {
		t.Fatalf("the demo store exported %d sonas", len(sonas))
	}
	if got := parseExport(t, []byte(mustRun(t, "export", "--all", "--data", b))); !reflect.DeepEqual(want, got) {
		t.Fatal("the demo store's export differs after an import")
	}
}
