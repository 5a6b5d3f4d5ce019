package testdeps

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// BuildMemoria builds cmd/memoria into out, with extra go build flags,
// for the tests that run it as a process (the TestMain of cmd/memoria and
// of cluster/e2e; it takes no testing.TB for that reason). The test
// binaries that go test runs side by side take turns (a lock file per
// checkout in the temporary directory): the second then finds every
// package in the build cache the first filled instead of compiling them
// all again at the same time — under `go test -race ./...` the tests'
// race-built packages are no use to a plain build, so on an empty cache
// each build compiles the whole program.
func BuildMemoria(out string, flags ...string) ([]byte, error) {
	dir, err := root()
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "memoria-build-"+strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_")+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command("go", append(args, "./cmd/memoria")...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}
