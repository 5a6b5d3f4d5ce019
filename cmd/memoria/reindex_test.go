package main_test

import (
	"strings"
	"testing"
)

// runWith runs the binary with extra environment variables.
func runWith(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	saved := testEnv
	testEnv = append(append([]string(nil), saved...), env...)
	defer func() { testEnv = saved }()
	return run(t, args...)
}

// A store opened with another embedder is refused with a pointer to
// reindex, which re-embeds it from the DAG; the old embedder is then the
// one refused.
func TestReindexReembedsForANewEmbedder(t *testing.T) {
	data := t.TempDir()
	for _, args := range [][]string{
		{"chat", "--data", data, "--sona", "alice", "Hello."},
		{"insert", "--data", data, "--sona", "alice", "--kind", "fact", "The shed key hangs by the door."},
		{"chat", "--data", data, "--sona", "alice", "Where is the shed key?"},
		{"chat", "--data", data, "--sona", "alice", "My sister Maya lives in Lisbon."},
	} {
		if _, stderr, code := run(t, args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	small := []string{"MEMORIA_EMBEDDER_DIMS=128"}
	_, stderr, code := runWith(t, small, "recall", "--data", data, "--sona", "alice", "shed key")
	if code == 0 || !strings.Contains(stderr, "memoria reindex") || !strings.Contains(stderr, `"hashed/v1/384"`) ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("another embedder: exit %d, stderr %q", code, stderr)
	}
	stdout, stderr, code := runWith(t, small, "reindex", "--data", data)
	if code != 0 || !strings.Contains(stdout, "re-embedded 7 memories, 1 sona names") || !strings.Contains(stdout, "hashed/v1/384 → hashed/v1/128") {
		t.Fatalf("reindex: exit %d\n%s\n%s", code, stdout, stderr)
	}
	stdout, stderr, code = runWith(t, small, "recall", "--data", data, "--sona", "alice", "where does the shed key hang")
	if code != 0 || !strings.Contains(stdout, "The shed key hangs by the door.") {
		t.Fatalf("recall after reindex: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code := runWith(t, small, "chat", "--data", data, "--sona", "alice", "Where does Maya live?"); code != 0 {
		t.Fatalf("chat after reindex: %s", stderr)
	}
	if _, stderr, code := run(t, "recall", "--data", data, "--sona", "alice", "shed"); code == 0 || !strings.Contains(stderr, `"hashed/v1/128"`) {
		t.Fatalf("the old embedder after reindex: exit %d, %s", code, stderr)
	}
}
