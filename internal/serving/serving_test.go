package serving_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/metrics"
	"github.com/memoria-ai/memoria/internal/serving"
)

// A generous bound for what must happen soon: the machine is shared.
const soon = 20 * time.Second

// testConfig has short timeouts so that the tests see them pass.
func testConfig() config.Server {
	c := config.Default().Server
	c.ReadHeaderTimeout = config.Duration(2 * time.Second)
	c.ReadTimeout = config.Duration(300 * time.Millisecond)
	c.IdleTimeout = config.Duration(300 * time.Millisecond)
	c.RequestTimeout = config.Duration(5 * time.Second)
	c.TransferTimeout = config.Duration(30 * time.Second)
	return c
}

// start serves h with cfg on loopback; /transfer/ is a transfer route.
func start(t *testing.T, cfg config.Server, h http.Handler, o ...func(*serving.Options)) (addr string, m *metrics.Set) {
	t.Helper()
	m = metrics.New()
	opts := serving.Options{Config: cfg, Handler: h, Metrics: m,
		Limit: func(r *http.Request) (time.Duration, bool) {
			if strings.HasPrefix(r.URL.Path, "/transfer/") {
				return cfg.TransferTimeout.D(), true
			}
			return cfg.RequestTimeout.D(), false
		}}
	for _, f := range o {
		f(&opts)
	}
	srv := serving.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), soon)
		defer cancel()
		srv.Shutdown(ctx)
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), m
}

// bodyEcho answers with the length of the body it read, or the read error.
func bodyEcho(errs chan<- error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if errs != nil {
			errs <- err
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		fmt.Fprintf(w, "%d", n)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readUntilClosed reads c until the server closes it (or soon passes) and
// returns what came and how long it took.
func readUntilClosed(t *testing.T, c net.Conn) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(soon))
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the server did not close the connection: %v (read %q)", err, b)
	}
	return string(b), time.Since(start)
}

func TestSlowBodyIsCutAfterReadTimeout(t *testing.T) {
	cfg := testConfig()
	errs := make(chan error, 1)
	addr, _ := start(t, cfg, bodyEcho(errs))
	// The server's deadline runs from when it begins reading the
	// connection, which may be before dial returns: time from before it.
	start := time.Now()
	c := dial(t, addr)
	fmt.Fprintf(c, "POST /memories HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nthe first bytes, then nothing")
	out, _ := readUntilClosed(t, c)
	took := time.Since(start)
	if took < cfg.ReadTimeout.D() {
		t.Fatalf("cut after %s, before server.read_timeout %s", took, cfg.ReadTimeout)
	}
	if !strings.HasPrefix(out, "HTTP/1.1 408") {
		t.Fatalf("answer %q", out)
	}
	if err := <-errs; !errors.Is(err, api.ErrBodyTimeout) || !strings.Contains(err.Error(), "server.read_timeout 300ms") {
		t.Fatalf("the handler read %v, want api.ErrBodyTimeout naming the setting", err)
	}
}

// TestTransferBodyGetsTransferTimeout sends a body slower than
// read_timeout allows: a transfer route takes it, another does not.
func TestTransferBodyGetsTransferTimeout(t *testing.T) {
	cfg := testConfig()
	addr, _ := start(t, cfg, bodyEcho(nil))
	send := func(path string) string {
		c := dial(t, addr)
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nConnection: close\r\n\r\n", path)
		for i := 0; i < 4; i++ {
			// A client on a slow link: 10 bytes every read_timeout/2,
			// 600 ms in all for a body read_timeout gives 300 ms.
			time.Sleep(cfg.ReadTimeout.D() / 2)
			if _, err := c.Write([]byte("0123456789")); err != nil {
				break // cut
			}
		}
		out, _ := readUntilClosed(t, c)
		return out
	}
	if out := send("/transfer/import"); !strings.HasPrefix(out, "HTTP/1.1 200") || !strings.HasSuffix(out, "\r\n\r\n40") {
		t.Fatalf("transfer route: %q", out)
	}
	if out := send("/memories"); !strings.HasPrefix(out, "HTTP/1.1 408") {
		t.Fatalf("ordinary route: %q", out)
	}
}

// TestLongRequestIsNotCut: once the body is read, a handler may take
// longer than read_timeout and idle_timeout (a model call) and stream
// its answer (server-sent events) without being cancelled or cut.
func TestLongRequestIsNotCut(t *testing.T) {
	cfg := testConfig()
	addr, _ := start(t, cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		tick := time.NewTicker(cfg.ReadTimeout.D() / 2)
		defer tick.Stop()
		for i := 0; i < 6; i++ { // 3 × read_timeout
			select {
			case <-r.Context().Done():
				fmt.Fprintf(w, "data: cancelled %v\n\n", r.Context().Err())
				return
			case <-tick.C:
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
		}
		fmt.Fprint(w, "data: done\n\n")
	}))
	for _, body := range []string{"", `{"content":"hello"}`} {
		resp, err := http.Post("http://"+addr+"/sona/x/chat", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.HasSuffix(string(b), "data: 5\n\ndata: done\n\n") {
			t.Fatalf("body %q: stream %q, %v", body, b, err)
		}
	}
}

func TestIdleConnectionIsClosed(t *testing.T) {
	cfg := testConfig()
	addr, m := start(t, cfg, bodyEcho(nil))
	c := dial(t, addr)
	// The server's idle time starts once it has answered, after the request
	// was sent: measured from the send, the close comes no sooner than the
	// timeout (measured from the client's read of the answer, it may come a
	// fraction of a millisecond sooner).
	start := time.Now()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d, close %v", resp.StatusCode, resp.Close)
	}
	c.SetReadDeadline(start.Add(soon))
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("idle connection: read %d, %v; want EOF", n, err)
	}
	if took := time.Since(start); took < cfg.IdleTimeout.D() {
		t.Fatalf("closed after %s, before server.idle_timeout %s", took, cfg.IdleTimeout)
	}
	waitGauge(t, m, "memoria_http_connections", 0)
}

// TestConnectionLimit: with max_connections 2 open, a third client waits
// until one of them closes, then is served.
func TestConnectionLimit(t *testing.T) {
	cfg := testConfig()
	cfg.MaxConnections = 2
	cfg.IdleTimeout = config.Duration(time.Minute) // the two stay open
	addr, m := start(t, cfg, bodyEcho(nil))
	var open []net.Conn
	for i := 0; i < 2; i++ {
		c := dial(t, addr)
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		open = append(open, c)
	}
	waitGauge(t, m, "memoria_http_connections", 2)
	third := dial(t, addr)
	fmt.Fprintf(third, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	waitGauge(t, m, "memoria_http_connection_waits_total", 1)
	// Not served while both are open (an absence, so a bounded look).
	third.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := third.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Fatalf("the third connection was served over the limit: %d, %v", n, err)
	}
	open[0].Close()
	out, _ := readUntilClosed(t, third)
	if !strings.HasPrefix(out, "HTTP/1.1 200") {
		t.Fatalf("third connection after one closed: %q", out)
	}
}

// TestWriteDeadline: a client that stops reading a large response is cut
// once the request's limit and the write grace have passed.
func TestWriteDeadline(t *testing.T) {
	cfg := testConfig()
	cfg.RequestTimeout = config.Duration(200 * time.Millisecond)
	wrote := make(chan error, 1)
	addr, _ := start(t, cfg, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
	}), func(o *serving.Options) { o.WriteGrace = 100 * time.Millisecond })
	c := dial(t, addr)
	start := time.Now()
	fmt.Fprintf(c, "GET /export HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case err := <-wrote:
		if took := time.Since(start); took < 300*time.Millisecond {
			t.Fatalf("cut after %s, before the limit and the grace", took)
		}
		if !isTimeout(err) {
			t.Logf("write failed with %v", err)
		}
	case <-time.After(soon):
		t.Fatal("the handler still writes to a client that does not read")
	}
}

func TestMaxHeaderBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxHeaderBytes = 4 << 10
	addr, _ := start(t, cfg, bodyEcho(nil))
	c := dial(t, addr)
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	out, _ := readUntilClosed(t, c)
	if !strings.HasPrefix(out, "HTTP/1.1 431") {
		t.Fatalf("answer %q", out)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// waitGauge polls a metric until it has value v.
func waitGauge(t *testing.T, m *metrics.Set, name string, v float64) {
	t.Helper()
	testutil.EventuallyShow(t, fmt.Sprintf("%s = %v", name, v), func() (bool, string) {
		got := -1.0
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				if g := mf.GetMetric()[0].GetGauge(); g != nil {
					got = g.GetValue()
				} else {
					got = mf.GetMetric()[0].GetCounter().GetValue()
				}
			}
		}
		return got == v, fmt.Sprint(got)
	})
}

// TestRequestsAreTraceTasks: while an execution trace is taken (memoria
// serve --trace), each request is a task named after its method, its path
// logged in it, so that go tool trace times the requests.
func TestRequestsAreTraceTasks(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatalf("no trace (is this test run with -trace?): %v", err)
	}
	addr, _ := start(t, testConfig(), bodyEcho(nil))
	resp, err := http.Post("http://"+addr+"/traced-path-4711", "text/plain", strings.NewReader("body"))
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	trace.Stop()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"http POST", "/traced-path-4711"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("the trace does not name %q", want)
		}
	}
}
