// Package testdeps gives tests what they need from outside Go: the node
// modules of mcptest/ and cartest/, installed from the project's own lock
// files, and the LoCoMo conversations. A test that cannot have one fails,
// saying how to get it: `go test` shows a skip only with -v, so a skip
// would go unseen. MEMORIA_TEST_SKIP (node, locomo; comma-separated) skips
// those tests instead, for whoever asks for it by name.
package testdeps

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/memoria-ai/memoria/internal/eval"
)

// SkipEnv lists the dependencies whose tests are to be skipped.
const SkipEnv = "MEMORIA_TEST_SKIP"

// missing fails t for a dependency it cannot have, or skips it when
// MEMORIA_TEST_SKIP names the dependency.
func missing(t testing.TB, dep, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if slices.Contains(strings.Split(os.Getenv(SkipEnv), ","), dep) {
		t.Skipf("%s (skipped: %s=%s)", msg, SkipEnv, os.Getenv(SkipEnv))
	}
	t.Fatalf("%s\n(to skip the tests that need %s instead, set %s=%s)", msg, dep, SkipEnv, dep)
}

// Root is the repository's root: the nearest parent of the working
// directory (a package's directory, under go test) with go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := root()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// root is the nearest parent of the working directory with go.mod.
func root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testdeps: no go.mod above the working directory")
		}
		dir = parent
	}
}

var npmMu sync.Mutex

// Node returns the node binary and the absolute path of the repository's
// folder sub (mcptest, cartest) with its node modules installed: when
// node_modules is missing or older than package.json or package-lock.json,
// it runs `npm ci` there first (about half a minute). Without node and
// npm, or when npm ci fails, the test fails.
func Node(t testing.TB, sub string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node", "node is not installed: the tests of %s/ need node 20 or later and npm (Debian: apt-get install -y nodejs npm)", sub)
	}
	dir = filepath.Join(Root(t), sub)
	npmMu.Lock()
	defer npmMu.Unlock()
	// Another test process may be installing the same folder.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "memoria-npm-"+strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_")+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	why, err := stale(dir)
	if err != nil {
		t.Fatal(err)
	}
	if why == "" {
		return node, dir
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing(t, "node", "%s/node_modules %s, and npm is not installed to run `npm ci` there (Debian: apt-get install -y npm)", sub, why)
	}
	t.Logf("%s/node_modules %s: running npm ci", sub, why)
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		missing(t, "node", "%s/node_modules %s, and `npm ci` in %s failed (%v); it needs the npm registry or a filled npm cache:\n%s", sub, why, dir, err, out)
	}
	if why, err := stale(dir); err != nil || why != "" {
		t.Fatalf("%s/node_modules still %s after npm ci (%v)", sub, why, err)
	}
	return node, dir
}

// stale says why dir's node_modules needs `npm ci`, or "" when it is up to
// date: npm writes node_modules/.package-lock.json at the end of every
// install, so one older than the package files is from before they
// changed (a pull, a checkout).
func stale(dir string) (string, error) {
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "is missing", nil
	}
	if err != nil {
		return "", err
	}
	for _, f := range []string{"package.json", "package-lock.json"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		if fi.ModTime().After(installed.ModTime()) {
			return "is older than " + f, nil
		}
	}
	return "", nil
}

// LoCoMo returns the folder of LoCoMo conversations (eval.FindData:
// $MEMORIA_LOCOMO, else ../shared/data/locomo beside the repository); the
// test fails without it.
func LoCoMo(t testing.TB) string {
	t.Helper()
	dir, err := eval.FindData()
	if err != nil {
		missing(t, "locomo", "%v", err)
	}
	return dir
}
