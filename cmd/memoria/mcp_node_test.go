package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/internal/testdeps"
)

// TestMCPNodeClient runs mcptest/harness.mjs: the official TypeScript MCP
// SDK's client against `memoria mcp` over stdio, against `memoria mcp
// --server` relaying stdio to `memoria serve`, and against `memoria serve`
// over streamable HTTP at /mcp (with a bearer token). It needs node; it
// installs mcptest/'s modules itself when they are missing or stale.
func TestMCPNodeClient(t *testing.T) {
	node, harness := testdeps.Node(t, "mcptest")

	const token = "mem_harness-token-0123456789"
	srv := startServerWithToken(t, token)

	cmd := exec.Command(node, filepath.Join(harness, "harness.mjs"))
	cmd.Dir = harness
	cmd.Env = append(cleanEnv(),
		"MEMORIA_BIN="+binary,
		"MEMORIA_STDIO_DATA="+t.TempDir(),
		"MEMORIA_HTTP_URL="+srv.url+"/mcp",
		"MEMORIA_RELAY_SERVER="+strings.TrimPrefix(srv.url, "http://"), // host:port, as a user may write it
		"MEMORIA_TOKEN="+token,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("harness: %v\n%s", err, out)
	}
	for _, want := range []string{"[stdio] PASS", "[relay] PASS", "[http] PASS"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("harness output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("%s", out)

	// Without the token the relay refuses at once, in one line.
	_, errOut, code := run(t, "mcp", "--server", srv.url)
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); code == 0 || len(lines) != 1 || !strings.Contains(errOut, "--server "+srv.url) || !strings.Contains(errOut, "Unauthorized") {
		t.Fatalf("relay without a token: exit %d, %q", code, errOut)
	}
}

// TestMCPInspectorCLI drives memoria with the official MCP Inspector's CLI
// (@modelcontextprotocol/inspector, pinned in mcptest/), over stdio and
// over streamable HTTP: tools/list with --strict (its portability check
// of every tool schema: no warnings allowed), tools/call (create a sona,
// insert, recall, a refused call), prompts/list and prompts/get.
func TestMCPInspectorCLI(t *testing.T) {
	node, dir := testdeps.Node(t, "mcptest")
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")

	const token = "mem_inspector-token-0123456789"
	srv := startServerWithToken(t, token)
	stdioData := t.TempDir()
	targets := map[string][]string{
		"stdio": {binary, "mcp", "--data", stdioData},
		"http":  {"--transport", "http", "--server-url", srv.url + "/mcp", "--header", "Authorization: Bearer " + token},
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			// inspect runs one Inspector CLI call and decodes its JSON
			// output; it returns the exit code.
			inspect := func(out any, args ...string) (int, string) {
				t.Helper()
				args = append(append([]string{cli, "--cli"}, targets[transport]...), args...)
				cmd := exec.Command(node, args...)
				cmd.Dir = dir
				cmd.Env = cleanEnv()
				stdout, stderr, code := runCmd(t, cmd)
				if out != nil {
					if err := json.Unmarshal([]byte(stdout), out); err != nil {
						t.Fatalf("inspector %v: exit %d, %v\nstdout: %s\nstderr: %s", args[2:], code, err, stdout, stderr)
					}
				}
				return code, stderr
			}

			var tools struct {
				Tools []struct {
					Name        string
					Annotations map[string]any
				}
			}
			if code, stderr := inspect(&tools, "--strict", "--method", "tools/list"); code != 0 || strings.Contains(stderr, "Warning") || strings.Contains(stderr, "Error") {
				t.Fatalf("tools/list --strict: exit %d\n%s", code, stderr)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
				if tool.Annotations["title"] == nil {
					t.Errorf("%s: no annotations", tool.Name)
				}
			}
			slices.Sort(names)
			if want := []string{"chat", "create_sona", "forget", "insert", "list_sonas", "query", "recall"}; !slices.Equal(names, want) {
				t.Fatalf("tools %v", names)
			}

			type result struct {
				IsError           bool
				Content           []struct{ Text string }
				StructuredContent map[string]any
			}
			call := func(tool string, args ...string) result {
				t.Helper()
				var r result
				code, stderr := inspect(&r, append([]string{"--method", "tools/call", "--tool-name", tool, "--tool-arg"}, args...)...)
				if code != 0 || r.IsError {
					t.Fatalf("%s %v: exit %d, %+v\n%s", tool, args, code, r, stderr)
				}
				return r
			}
			sona := "inspector-" + transport
			call("create_sona", "name="+sona)
			ins := call("insert", "sona="+sona, "content=The launch codename is Bluebird.", "kind=fact", "dedup=false")
			rec := call("recall", "sona="+sona, "query=launch codename", "k=3", "scope=sona")
			mems, _ := rec.StructuredContent["memories"].([]any)
			if len(mems) == 0 || mems[0].(map[string]any)["cid"] != ins.StructuredContent["cid"] {
				t.Fatalf("recall: %+v", rec)
			}
			var refused result
			if code, _ := inspect(&refused, "--method", "tools/call", "--tool-name", "recall", "--tool-arg", "sona="+sona, "query=x", "scope=everyone"); code == 0 ||
				!refused.IsError || len(refused.Content) == 0 || !strings.Contains(refused.Content[0].Text, "scope") {
				t.Fatalf("a bad scope: exit %d, %+v", code, refused)
			}

			var prompts struct{ Prompts []struct{ Name string } }
			inspect(&prompts, "--method", "prompts/list")
			if len(prompts.Prompts) != 2 {
				t.Fatalf("prompts/list: %+v", prompts)
			}
			var prompt struct {
				Messages []struct {
					Role    string
					Content struct{ Text string }
				}
			}
			if code, stderr := inspect(&prompt, "--method", "prompts/get", "--prompt-name", "recall_and_answer",
				"--prompt-args", "sona="+sona, "question=What is the launch codename?"); code != 0 || len(prompt.Messages) != 1 ||
				!strings.Contains(prompt.Messages[0].Content.Text, "Bluebird") {
				t.Fatalf("prompts/get: exit %d, %+v\n%s", code, prompt, stderr)
			}
		})
	}
}

// startServerWithToken runs `memoria serve` whose one token, with the
// write scope, is token.
func startServerWithToken(t *testing.T, token string) *server {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "memoria.yaml")
	cfg := "server:\n  auth:\n    tokens:\n      - name: test\n        hash: " + api.HashToken(token) + "\n        scopes: [write]\n"
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServer(t, t.TempDir(), "--config", cfgFile)
}
