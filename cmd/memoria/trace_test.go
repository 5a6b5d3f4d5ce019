package main_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/otlp/otlptest"
)

// withTracing exports the commands' spans to a collector (see testEnv).
func withTracing(t *testing.T) *otlptest.Collector {
	c := otlptest.New(t)
	testEnv = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + c.URL, "OTEL_SERVICE_NAME=memoria-cmd-test"}
	t.Cleanup(func() { testEnv = nil })
	return c
}

// TestServeExportsSpansAtExit: `memoria serve` traces a request under the
// caller's traceparent and exports its span when stopped.
func TestServeExportsSpansAtExit(t *testing.T) {
	c := withTracing(t)
	srv := startServer(t, t.TempDir())
	req, _ := http.NewRequest("GET", srv.url+"/healthz", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	srv.stop(t, syscall.SIGTERM) // the batch is exported at exit, not yet
	spans := c.Named("GET /healthz")
	if len(spans) != 1 || spans[0].TraceID() != "4bf92f3577b34da6a3ce929d0e0e4736" || spans[0].ParentID() != "00f067aa0ba902b7" ||
		spans[0].Resource["service.name"].GetStringValue() != "memoria-cmd-test" {
		t.Fatalf("spans %v", spans)
	}
}

// TestMCPStdioTraced: `memoria mcp` records a root span per MCP method
// and exports them when the host closes stdin.
func TestMCPStdioTraced(t *testing.T) {
	c := withTracing(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "mcp", "--data", t.TempDir())
	cmd.Env = cleanEnv()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_sonas","arguments":{}}}`+"\n")
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && !strings.Contains(sc.Text(), `"id":2`) {
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mcp: %v\n%s", err, stderr.String())
	}
	spans := c.Named("tools/call list_sonas")
	if len(spans) != 1 || spans[0].ParentID() != "" || spans[0].Attr("mcp.method.name").GetStringValue() != "tools/call" {
		var names []string
		for _, s := range c.Spans() {
			names = append(names, s.Name)
		}
		t.Fatalf("tool spans %v; all spans %q\n%s", spans, names, stderr.String())
	}
	if len(c.Named("initialize")) != 1 {
		t.Errorf("no initialize span")
	}
}
