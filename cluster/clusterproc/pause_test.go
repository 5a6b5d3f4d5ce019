package clusterproc

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"

	"github.com/memoria-ai/memoria/internal/testutil"
)

// TestThreadsStopped follows a process through SIGSTOP and SIGCONT as
// /proc shows it.
func TestThreadsStopped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if stopped, err := threadsStopped(pid); err != nil || stopped {
		t.Fatalf("a running process: stopped %v, %v", stopped, err)
	}
	waitFor := func(want bool) {
		t.Helper()
		testutil.Eventually(t, fmt.Sprintf("threadsStopped = %v", want), func() bool {
			stopped, err := threadsStopped(pid)
			if err != nil {
				t.Fatal(err)
			}
			return stopped == want
		})
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(true)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(false)
	if _, err := threadsStopped(1 << 30); err == nil {
		t.Fatal("a process that does not exist: no error")
	}
}
