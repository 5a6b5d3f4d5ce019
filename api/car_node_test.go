package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/internal/testdeps"
)

// TestCARNodeVerifies has independent JavaScript IPLD libraries
// (cartest/verify.mjs: @ipld/car, @ipld/dag-cbor, multiformats) read the
// gateway's CAR of a chain deeper than 1,024 ACTs and the CAR export of
// the same self: every block must hash to its CID, every link be answered
// and every block follow one that links to it. It needs node; it installs
// cartest/'s modules itself when they are missing or stale.
func TestCARNodeVerifies(t *testing.T) {
	node, dir := testdeps.Node(t, "cartest")

	const n = 3000
	h := newHarness(t, quiet, noEvaluation)
	d := buildChain(t, h.app.Self, n)
	gw := h.do("GET", "/ipfs/"+d.head().String()+"?format=car", nil)
	if gw.status != 200 {
		t.Fatalf("%s", gw)
	}
	export := h.exportCAR(t)
	exportRoots, exportOrder, _ := readCARData(t, export)
	files := []string{filepath.Join(t.TempDir(), "gateway.car"), filepath.Join(t.TempDir(), "export.car")}
	for i, body := range [][]byte{gw.body, export} {
		if err := os.WriteFile(files[i], body, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(node, append([]string{filepath.Join(dir, "verify.mjs")}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("verify.mjs: %v\n%s", err, stderr.String())
	}
	type report struct {
		Version, Blocks, Unique, Missing, Unordered int
		Roots                                       []string
	}
	var reports []report
	for line := range bytes.Lines(out) {
		var r report
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("verify.mjs printed %q: %v", line, err)
		}
		reports = append(reports, r)
	}
	want := []report{
		{Version: 1, Blocks: len(d.all()), Unique: len(d.all()), Roots: []string{d.head().String()}},
		{Version: 1, Blocks: len(exportOrder), Unique: len(exportOrder), Roots: exportRoots},
	}
	if len(reports) != 2 {
		t.Fatalf("verify.mjs reported %d CARs, want 2:\n%s", len(reports), out)
	}
	for i, r := range reports {
		w := want[i]
		if r.Version != w.Version || r.Blocks != w.Blocks || r.Unique != w.Unique || r.Missing != 0 || r.Unordered != 0 || !slices.Equal(r.Roots, w.Roots) {
			t.Errorf("%s: the JavaScript reader found %+v, want %+v", files[i], r, w)
		}
	}
}
