// Package clusterproc starts a cluster on loopback as separate OS
// processes of the memoria binary: one `memoria etcd`, then `memoria
// serve` members. `memoria cluster dev` and the cluster's multi-process
// tests use it. Members run in their own processes because two cluster
// members in one process share global gRPC state (and race under -race),
// and because the tests kill, pause and restart them.
package clusterproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Proc is one process of the cluster.
type Proc struct {
	Name string
	// URL is its client URL (etcd) or API URL (a member).
	URL string
	// Args and Env start it again (Restart).
	Args []string
	Env  []string
	Dir  string // its data directory
	bin  string
	log  io.Writer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// FreeAddr returns 127.0.0.1:port with a port free now, taken below the
// kernel's ephemeral range when it can be. A process restarted on its
// address (etcd, a member) must find its port free again, and while it
// is down a port in the range can become the source port of any outgoing
// connection on the machine (TestEtcdDown's etcd once found its port so
// taken). The kernel picks source ports only from the range.
func FreeAddr() (string, error) {
	if low := ephemeralLow(); low > stablePorts {
		for range 64 {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(stablePorts+rand.IntN(low-stablePorts)))
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				return addr, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// stablePorts is where FreeAddr's ports start: above the ports services
// commonly listen on.
const stablePorts = 10000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux
// reads it from /proc; 32768, its default, where it cannot).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low int // the range's first number; its last follows
	if _, err := fmt.Sscan(string(b), &low); err != nil {
		return 32768
	}
	return low
}

// start runs the process; its output goes to log.
func (p *Proc) start() error {
	cmd := exec.Command(p.bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// Its own process group: a Ctrl-C in the terminal reaches only the
	// parent, which stops the children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clusterproc: start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid is the process id of the running process.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// Exited is closed when the process has ended.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process has not ended.
func (p *Proc) Running() bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

func (p *Proc) signal(s syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(s)
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Proc) Kill() {
	_ = p.signal(syscall.SIGKILL)
	<-p.Exited()
}

// Pause stops the process (SIGSTOP) and returns once every thread of it
// has stopped. A stop is not at once: the kernel wakes one thread to take
// the signal, and the others run on — serving requests — until that
// thread gets a CPU and stops the whole group, which on a starved machine
// took long enough for a request sent after kill(2) returned to be
// answered.
func (p *Proc) Pause() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(pauseTimeout)
	for {
		stopped, err := threadsStopped(p.cmd.Process.Pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clusterproc: %s has threads running %v after SIGSTOP", p.Name, pauseTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

// pauseTimeout bounds Pause's wait for the stop.
const pauseTimeout = 30 * time.Second

// threadsStopped reports whether every thread of process pid is stopped
// (state T in /proc/pid/task/*/stat).
func threadsStopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return false, err
		}
		// pid (comm) state …: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("clusterproc: %s/%s/stat: %q", dir, t.Name(), b)
		}
		if state := b[i+2]; state != 'T' && state != 't' {
			return false, nil
		}
	}
	return true, nil
}

// Stop asks the process to end (SIGTERM) and waits up to grace, then
// kills it. It returns the process's exit error (nil for a clean exit).
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil // ended already (killed by a test, or failed: see its log)
	}
	_ = p.signal(syscall.SIGCONT) // a paused process cannot handle SIGTERM
	_ = p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Exited():
		return p.exitErr()
	case <-t.C:
		p.Kill()
		return fmt.Errorf("clusterproc: %s did not stop within %s: killed", p.Name, grace)
	}
}

func (p *Proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Restart starts the process again with the same arguments (after it
// ended) and waits until it answers.
func (p *Proc) Restart(ctx context.Context) error {
	if p.Running() {
		return fmt.Errorf("clusterproc: %s is still running", p.Name)
	}
	if err := p.start(); err != nil {
		return err
	}
	return p.waitUp(ctx)
}

// waitUp polls the process's URL until it answers, it exits, or ctx ends.
func (p *Proc) waitUp(ctx context.Context) error {
	probe := p.URL + "/healthz"
	if p.Name == "etcd" {
		probe = p.URL + "/health"
	}
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get(probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("clusterproc: %s did not answer at %s: %w", p.Name, probe, ctx.Err())
		case <-p.Exited():
			t.Stop()
			return fmt.Errorf("clusterproc: %s exited before it answered: %v", p.Name, p.exitErr())
		case <-t.C:
		}
	}
}

// Options describe a cluster to start.
type Options struct {
	// Bin is the memoria binary.
	Bin string
	// Dir holds every process's data directory (etcd, n1, n2, …).
	Dir string
	// Nodes is how many members to start.
	Nodes int
	// Replicas is cluster.replicas.
	Replicas int
	// Env is added to every member's environment (MEMORIA_*).
	Env []string
	// Log receives a process's output (nil: discarded); name is the
	// process's name (etcd, n1, …).
	Log func(name string) io.Writer
}

// Cluster is a running cluster on loopback.
type Cluster struct {
	Etcd  *Proc
	Nodes []*Proc
	opts  Options
}

// Start starts etcd and the members, and waits until every member
// answers and sees all the others.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Nodes < 1 {
		return nil, errors.New("clusterproc: at least one node")
	}
	if o.Log == nil {
		o.Log = func(string) io.Writer { return io.Discard }
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o}
	c.Etcd = &Proc{Name: "etcd", URL: "http://" + addr, bin: o.Bin, log: o.Log("etcd"), Dir: filepath.Join(o.Dir, "etcd"),
		Args: []string{"etcd", "--data", filepath.Join(o.Dir, "etcd"), "--listen", addr}}
	if err := c.Etcd.start(); err != nil {
		return nil, err
	}
	if err := c.Etcd.waitUp(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	for i := 1; i <= o.Nodes; i++ {
		if _, err := c.AddNode(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitMembers(ctx, o.Nodes); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// StartSingle starts one `memoria serve` without a cluster (the single
// node the cluster is compared with), as a Cluster of one node and no etcd.
func StartSingle(ctx context.Context, o Options) (*Cluster, error) {
	if o.Log == nil {
		o.Log = func(string) io.Writer { return io.Discard }
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Dir, "single")
	p := &Proc{Name: "single", URL: "http://" + addr, bin: o.Bin, log: o.Log("single"), Dir: dir,
		Args: []string{"serve", "--data", dir, "--listen", addr}, Env: o.Env}
	if err := p.start(); err != nil {
		return nil, err
	}
	c := &Cluster{Nodes: []*Proc{p}, opts: o}
	if err := p.waitUp(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// AddNode starts one more member and waits until it answers.
func (c *Cluster) AddNode(ctx context.Context) (*Proc, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	name := "n" + strconv.Itoa(len(c.Nodes)+1)
	dir := filepath.Join(c.opts.Dir, name)
	p := &Proc{Name: name, URL: "http://" + addr, bin: c.opts.Bin, log: c.opts.Log(name), Dir: dir,
		Args: []string{"serve", "--data", dir, "--listen", addr, "--cluster.etcd", c.Etcd.URL,
			"--cluster.replicas", strconv.Itoa(max(c.opts.Replicas, 1))},
		Env: c.opts.Env}
	if err := p.start(); err != nil {
		return nil, err
	}
	c.Nodes = append(c.Nodes, p)
	if err := p.waitUp(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// Members asks url's GET /cluster for the member ids it sees.
func Members(ctx context.Context, url string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/cluster", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("clusterproc: GET %s/cluster: %s", url, resp.Status)
	}
	var st struct {
		Members []struct {
			ID string `json:"id"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	ids := make([]string, len(st.Members))
	for i, m := range st.Members {
		ids[i] = m.ID
	}
	return ids, nil
}

// WaitMembers polls every running member until each sees n members.
func (c *Cluster) WaitMembers(ctx context.Context, n int) error {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		for {
			ids, err := Members(ctx, p.URL)
			if err == nil && len(ids) == n {
				break
			}
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("clusterproc: %s does not see %d members (last: %v, %v): %w", p.Name, n, ids, err, ctx.Err())
			case <-t.C:
			}
		}
	}
	return nil
}

// Stop stops the members, then etcd (SIGTERM, then SIGKILL after a grace
// period), and returns the first unclean exit.
func (c *Cluster) Stop() error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(30 * time.Second); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if c.Etcd != nil {
		if err := c.Etcd.Stop(30 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("etcd: %w", err))
		}
	}
	return errors.Join(errs...)
}
