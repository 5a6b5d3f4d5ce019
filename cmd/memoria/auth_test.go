package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
)

// serve refuses to listen beyond loopback without tokens: non-zero exit,
// one readable line, before opening anything.
func TestServeRefusesExposureWithoutTokens(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	_, errOut, code := run(t, "serve", "--data", data, "--listen", "0.0.0.0:0")
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "server.auth.tokens") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the refused serve created its data directory: %v", err)
	}
}

// With tokens, the CLI's clients send $MEMORIA_TOKEN; without it they get
// a one-line 401; the in-process path needs none.
func TestCLITokens(t *testing.T) {
	out, errOut, code := run(t, "token", "new", "--name", "cli", "--scope", "write", "--json")
	if code != 0 {
		t.Fatalf("token new: %d %s", code, errOut)
	}
	var tok struct {
		Token string `json:"token"`
		Entry struct {
			Hash string `json:"hash"`
		} `json:"entry"`
	}
	decodeJSONOut(t, out, &tok)
	if !strings.HasPrefix(tok.Token, "mem_") || tok.Entry.Hash != api.HashToken(tok.Token) {
		t.Fatalf("token new: %+v", tok)
	}
	cmd := cmdWithStdin(t, tok.Token+"\n", "token", "hash")
	if strings.TrimSpace(cmd) != tok.Entry.Hash {
		t.Fatalf("token hash printed %q, want %q", cmd, tok.Entry.Hash)
	}
	if _, errOut, code := run(t, "token", "new", "--name", "x", "--scope", "root"); code == 0 || !strings.Contains(errOut, "scopes") {
		t.Fatalf("token new with a bad scope: %d %s", code, errOut)
	}

	cfgFile := filepath.Join(t.TempDir(), "memoria.yaml")
	os.WriteFile(cfgFile, []byte("server:\n  auth:\n    tokens:\n      - name: cli\n        hash: "+tok.Entry.Hash+"\n        scopes: [write]\n"), 0o600)
	data := t.TempDir()
	srv := startServer(t, data, "--config", cfgFile)

	_, errOut, code = run(t, "insert", "--server", srv.url, "--sona", "tokened", "a memory")
	if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "401") {
		t.Fatalf("insert without a token: exit %d, %q", code, errOut)
	}
	testEnv = []string{config.EnvToken + "=" + tok.Token}
	t.Cleanup(func() { testEnv = nil })
	if out, errOut, code := run(t, "chat", "--server", srv.url, "--sona", "tokened", "hello"); code != 0 {
		t.Fatalf("chat with the token: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := run(t, "insert", "--server", srv.url, "--sona", "tokened", "a memory"); code != 0 || !strings.HasPrefix(out, "bafyrei") {
		t.Fatalf("insert with the token: exit %d\n%s%s", code, out, errOut)
	}
	srv.stop(t, syscall.SIGTERM)
	// In process, on the same data directory and config: no token needed.
	testEnv = nil
	if out, errOut, code := run(t, "recall", "--config", cfgFile, "--data", data, "--sona", "tokened", "memory"); code != 0 || !strings.Contains(out, "a memory") {
		t.Fatalf("embedded recall with tokens configured: exit %d\n%s%s", code, out, errOut)
	}
}

func decodeJSONOut(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// cmdWithStdin runs the binary with stdin and returns its stdout.
func cmdWithStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out)
}
