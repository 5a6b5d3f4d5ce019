package memory

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestMemoryIsPureOfTransports keeps memory/ free of actors, HTTP and model
// SDKs (DESIGN.md §2): no package under memory/ imports protoactor,
// net/http or a provider SDK, and none of them is reachable through its
// dependencies either (net/http excepted: Badger's expvar pulls it in).
func TestMemoryIsPureOfTransports(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbiddenDirect := []string{"net/http", "github.com/asynkron/protoactor-go", "github.com/openai/", "github.com/anthropics/", "github.com/modelcontextprotocol/"}
	forbiddenDeps := []string{"github.com/asynkron/protoactor-go", "github.com/openai/", "github.com/anthropics/", "github.com/modelcontextprotocol/", "google.golang.org/grpc",
		"go.opentelemetry.io/otel/sdk"} // spans through internal/trace: the OpenTelemetry API only
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range p.Imports {
			for _, f := range forbiddenDirect {
				if imp == f || strings.HasPrefix(imp, f) {
					t.Errorf("%s imports %s", p.ImportPath, imp)
				}
			}
		}
		for _, dep := range p.Deps {
			for _, f := range forbiddenDeps {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", p.ImportPath, dep)
				}
			}
		}
	}
	if n < 2 {
		t.Fatalf("go list saw %d packages under memory/", n)
	}
}
