package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/config"
)

// TestMCPNodeClient runs mcptest/harness.mjs: the official TypeScript MCP
// SDK's client against `memoria mcp` over stdio and against `memoria serve`
// over streamable HTTP at /mcp (with a bearer token). It needs node and
// `npm ci` in mcptest/ (.ci/run does it); without them it skips, saying so.
func TestMCPNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: skipping the MCP TypeScript client harness (mcptest/)")
	}
	harness, err := filepath.Abs(filepath.Join("..", "..", "mcptest"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(harness, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("mcptest/node_modules is missing: run `npm ci` in mcptest/ to run the MCP TypeScript client harness")
	}

	const token = "mem_harness-token-0123456789"
	cfgFile := filepath.Join(t.TempDir(), "memoria.yaml")
	cfg := "server:\n  auth:\n    tokens:\n      - name: harness\n        hash: " + config.HashToken(token) + "\n        scopes: [write]\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, t.TempDir(), "--config", cfgFile)

	cmd := exec.Command(node, filepath.Join(harness, "harness.mjs"))
	cmd.Dir = harness
	cmd.Env = append(cleanEnv(),
		"MEMORIA_BIN="+binary,
		"MEMORIA_STDIO_DATA="+t.TempDir(),
		"MEMORIA_HTTP_URL="+srv.url+"/mcp",
		"MEMORIA_TOKEN="+token,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	for _, want := range []string{"[stdio] PASS", "[http] PASS"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("harness output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("%s", out)
}
