// Package loadgen drives a real Memoria server over HTTP: it starts
// `memoria serve` as a child process on loopback (Server), runs many
// concurrent clients with a mixed workload against it (Run) and reports
// errors, latency per route, throughput and the server's memory. `memoria
// load` and `memoria torture` are built on it.
package loadgen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ErrExited means the server process ended before it was ready.
var ErrExited = errors.New("loadgen: the server exited")

// ServerOptions say how to start a `memoria serve` child.
type ServerOptions struct {
	// Binary is the memoria executable (e.g. os.Executable()).
	Binary string
	// DataDir is passed as --data.
	DataDir string
	// Listen is passed as --listen (default 127.0.0.1:0, any free port).
	Listen string
	// Args are more arguments of serve (e.g. --config FILE).
	Args []string
	// Env is the child's environment (default os.Environ()). The child
	// always logs JSON at info level so that its address can be read.
	Env []string
	// Stderr, when set, receives the child's log as it is written.
	Stderr io.Writer
}

// ProfileArgs are the arguments of serve that have it write a CPU profile of
// its whole run into name.pprof and its heap, when it stops, into
// name.heap.pprof (ServerOptions.Args).
func ProfileArgs(name string) []string {
	return []string{"--cpuprofile", name + ".pprof", "--memprofile", name + ".heap.pprof"}
}

// Server is a running `memoria serve` child.
type Server struct {
	// URL is the address the server said it serves on (http://host:port).
	URL string
	// Started is when the process was started.
	Started time.Time

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit status, once exited is closed

	mu     sync.Mutex
	last   string               // the last line it logged
	logged map[string]time.Time // when each log message was first seen
}

// StartServer starts the child and returns once it logs the address it
// listens on (its store is open by then; see WaitHealthy).
func StartServer(ctx context.Context, o ServerOptions) (*Server, error) {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	args := append([]string{"serve", "--data", o.DataDir, "--listen", o.Listen, "--log-level", "info"}, o.Args...)
	cmd := exec.Command(o.Binary, args...)
	// The last of duplicate variables wins: the address is read from JSON.
	cmd.Env = append(append([]string(nil), env...), "MEMORIA_LOG_FORMAT=json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	s := &Server{cmd: cmd, exited: make(chan struct{}), Started: time.Now(), logged: map[string]time.Time{}}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("loadgen: start %s: %w", o.Binary, err)
	}
	found := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			msg, listen := logRecord(line)
			s.mu.Lock()
			s.last = line
			if _, ok := s.logged[msg]; !ok && msg != "" {
				s.logged[msg] = time.Now()
			}
			s.mu.Unlock()
			if o.Stderr != nil {
				fmt.Fprintln(o.Stderr, line)
			}
			if msg == "memoria serving" && listen != "" {
				select {
				case found <- listen:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-logDone // Wait closes the pipe: read it to the end first
		s.err = cmd.Wait()
		close(s.exited)
	}()
	select {
	case s.URL = <-found:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("%w before serving (%v): %s", ErrExited, s.err, s.LastLog())
	case <-ctx.Done():
		s.Kill()
		return nil, ctx.Err()
	}
}

// logRecord reads the message of a JSON log line and its "listen"
// attribute (serve's "memoria serving" line has the address); "" for
// other lines.
func logRecord(line string) (msg, listen string) {
	var rec struct {
		Msg    string `json:"msg"`
		Listen string `json:"listen"`
	}
	if json.Unmarshal([]byte(line), &rec) != nil {
		return "", ""
	}
	return rec.Msg, rec.Listen
}

// PID is the child's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Err is the process's exit status, once Exited is closed.
func (s *Server) Err() error { return s.err }

// LastLog returns the last line the server logged (a server that fails
// to start ends with its error; see ServerOptions.Stderr for the rest).
func (s *Server) LastLog() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Logged returns when the server first logged a line with this message
// (its "msg"), e.g. "self loaded".
func (s *Server) Logged(msg string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.logged[msg]
	return t, ok
}

// Kill ends the process with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// Stop asks the process to shut down (SIGTERM) and waits up to timeout
// for it, then kills it. It returns the exit status of a process that
// stopped by itself.
func (s *Server) Stop(timeout time.Duration) error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.exited:
		return s.err
	case <-t.C:
		s.Kill()
		return fmt.Errorf("loadgen: the server did not stop within %s after SIGTERM; killed", timeout)
	}
}

// WaitHealthy polls GET /healthz until it answers 200, the process exits
// or ctx ends.
func (s *Server) WaitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/healthz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w (%v): %s", ErrExited, s.err, s.LastLog())
		case <-ctx.Done():
			return fmt.Errorf("loadgen: the server at %s was not healthy in time: %w", s.URL, ctx.Err())
		case <-tick.C:
		}
	}
}

// Memory reads the process's memory from /proc.
func (s *Server) Memory() (ProcMemory, error) { return ReadProcMemory(s.PID()) }

// Sample reads the process's CPU time and memory from /proc.
func (s *Server) Sample() (ProcSample, error) { return ReadProc(s.PID()) }
