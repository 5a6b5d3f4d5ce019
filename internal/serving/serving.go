// Package serving runs the HTTP listener of `memoria serve`: an
// http.Server with the configured header, body and idle timeouts and
// header cap, per-request read and write deadlines that follow each
// route's own time limit, and a bound on the connections open at once.
//
// Deadlines:
//   - a request (headers and body): server.read_timeout from its first
//     byte, with its headers within server.read_header_timeout; a
//     transfer route (export, import, the gateway) gets
//     server.transfer_timeout from its first read of the body, which its
//     handler does only after authentication. (Once the body is read,
//     net/http lifts the read deadline: a long model call is not cut.)
//   - the response: the route's own limit (request_timeout or
//     transfer_timeout, which its handler's context enforces) plus
//     WriteGrace, so a client that stops reading cannot hold a handler;
//     streams (chat's server-sent events, exports) end within their
//     route's limit anyway. The server's own WriteTimeout stays off: it
//     would cut the transfers.
//   - between requests: server.idle_timeout.
package serving

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/trace"
	"sync"
	"time"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/metrics"
)

// DefaultWriteGrace is the time a response may take to be written beyond
// its request's own limit (to write a late error, or the end of a stream).
const DefaultWriteGrace = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Config supplies the timeouts, max_header_bytes and max_connections.
	Config config.Server
	// Handler serves the requests (the REST API).
	Handler http.Handler
	// Limit returns a request's time limit and whether its route is a
	// transfer (api.Server.RequestLimit).
	Limit func(*http.Request) (time.Duration, bool)
	// WriteGrace: see DefaultWriteGrace (0: the default).
	WriteGrace time.Duration
	// Metrics follows the connections (nil: not recorded).
	Metrics *metrics.Set
	Log     *slog.Logger
}

// Server is the HTTP server of `memoria serve`.
type Server struct {
	o    Options
	http *http.Server
}

// New builds the server; Serve runs it.
func New(o Options) *Server {
	if o.WriteGrace <= 0 {
		o.WriteGrace = DefaultWriteGrace
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o}
	s.http = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: o.Config.ReadHeaderTimeout.D(),
		ReadTimeout:       o.Config.ReadTimeout.D(),
		IdleTimeout:       o.Config.IdleTimeout.D(),
		MaxHeaderBytes:    o.Config.MaxHeaderBytes,
		// net/http's own complaints: accept errors (out of descriptors),
		// handlers that misuse the writer.
		ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn),
	}
	return s
}

// Serve accepts connections on ln (within server.max_connections) until
// Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	if n := s.o.Config.MaxConnections; n > 0 {
		ln = LimitListener(ln, n, s.o.Metrics)
	} else {
		ln = countListener{ln, s.o.Metrics}
	}
	return s.http.Serve(ln)
}

// Shutdown stops accepting, closes idle connections and waits for the
// requests under way until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	limit, transfer := s.o.Limit(r)
	if err := rc.SetWriteDeadline(time.Now().Add(limit + s.o.WriteGrace)); err != nil {
		s.o.Log.Debug("no write deadline", "err", err)
	}
	if r.Body != nil && r.Body != http.NoBody {
		b := &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: s.o.Config.ReadTimeout.D()}
		if transfer {
			b.extend = s.o.Config.TransferTimeout.D()
		}
		r.Body = b
	}
	if trace.IsEnabled() { // memoria serve --trace: a task a request, timed by go tool trace
		ctx, task := trace.NewTask(r.Context(), "http "+r.Method)
		defer task.End()
		trace.Log(ctx, "path", r.URL.Path)
		r = r.WithContext(ctx)
	}
	s.o.Handler.ServeHTTP(w, r)
}

// deadlineBody moves the connection's read deadline to the transfer
// deadline on the first read of a transfer's body. A read cut by the
// deadline fails with api.ErrBodyTimeout.
type deadlineBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration // server.read_timeout, for the message
	extend   time.Duration // >0: a transfer's deadline, set on the first read
	extended bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.extend > 0 && !b.extended {
		b.extended = true
		_ = b.rc.SetReadDeadline(time.Now().Add(b.extend))
	}
	n, err := b.ReadCloser.Read(p)
	if err != nil && isTimeout(err) {
		limit := fmt.Sprintf("server.read_timeout %s", b.timeout)
		if b.extend > 0 {
			limit = fmt.Sprintf("server.transfer_timeout %s", b.extend)
		}
		err = fmt.Errorf("%w (%s)", api.ErrBodyTimeout, limit)
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// LimitListener returns a listener that keeps at most n connections open:
// when n are, Accept waits until one closes (further clients wait in the
// kernel's listen queue). m follows the connections.
func LimitListener(ln net.Listener, n int, m *metrics.Set) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), done: make(chan struct{}), m: m}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	m         *metrics.Set
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.m.ConnWaited()
		select {
		case l.sem <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.m.ConnOpened()
	return &releaseConn{Conn: c, release: func() { l.m.ConnClosed(); <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// countListener follows the connections without bounding them.
type countListener struct {
	net.Listener
	m *metrics.Set
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.m.ConnOpened()
	return &releaseConn{Conn: c, release: l.m.ConnClosed}, nil
}

// releaseConn calls release once, when it is first closed.
type releaseConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *releaseConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
