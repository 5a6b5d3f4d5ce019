// Package etcdembed runs a one-member etcd inside the process, for `memoria
// etcd`: trying a cluster out on one machine, and the cluster's tests. A
// production cluster runs a real etcd cluster (three or five members) and
// points cluster.etcd at it; serve itself only ever speaks etcd's client
// protocol and never embeds a server.
package etcdembed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/config"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/features"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Options configure a one-member etcd.
type Options struct {
	// Dir holds etcd's data (its WAL and snapshots). Created if missing.
	Dir string
	// Listen is the client address, host:port; the client URL is
	// http://Listen.
	Listen string
	// Peer is the peer (raft) address, host:port. Empty: a free port on
	// Listen's host (a one-member etcd has no peers, but etcd listens
	// anyway).
	Peer string
	// LogLevel is etcd's own log level: debug, info, warn or error
	// (default error: at warn etcd reports every request over 100 ms on a
	// busy machine, and its single-port and simple-token warnings, which
	// for a trial member are expected).
	LogLevel string
	// Log receives etcd's log lines (default os.Stderr).
	Log io.Writer
	// StartTimeout bounds the wait for the member to be ready (default 30 s).
	StartTimeout time.Duration
}

// Server is a running one-member etcd: etcd's own server
// (go.etcd.io/etcd/server/v3/etcdserver) with its gRPC API (v3rpc) on the
// client address, which also answers HTTP/1 for /health, /version and
// /metrics, and its peer handler on the peer address — what etcd's embed
// package serves, without what a one-member trial does not use and embed
// compiles in anyway (the gRPC-JSON gateway, the election and lock
// services, OTLP tracing, pprof: 46 packages).
type Server struct {
	srv       *etcdserver.EtcdServer
	grpc      *grpc.Server
	client    *http.Server // HTTP/1 on the client address
	peer      *http.Server
	lns       []net.Listener
	clientURL string
	closing   *atomic.Bool
	errc      chan error
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// ErrStart classifies a failure to start.
var ErrStart = errors.New("etcd: cannot start")

// Defaults of etcd's embed.NewConfig that a one-member etcd keeps.
const (
	tickMs                 = 100
	electionMs             = 1000
	maxSnapFiles           = 5
	maxWALFiles            = 5
	maxTxnOps              = 128
	maxRequestBytes        = 1.5 * 1024 * 1024
	warningApplyDuration   = 100 * time.Millisecond
	warningUnaryDuration   = 300 * time.Millisecond
	grpcKeepAliveMinTime   = 5 * time.Second
	grpcKeepAliveInterval  = 2 * time.Hour
	grpcKeepAliveTimeout   = 20 * time.Second
	downgradeCheckTime     = 5 * time.Second
	compactHashCheckTime   = time.Minute
	autoCompactionMode     = "periodic"
	autoCompactionRetained = time.Hour // members only keep leases, owners and heads
	authTokenTTL           = 300
	bcryptCost             = 10 // bcrypt.DefaultCost
	maxLearners            = 1
	clusterToken           = "etcd-cluster"
	memberName             = "memoria"
)

// Start starts the member and returns once it serves clients.
func Start(o Options) (*Server, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("%w: --data is required (etcd's data directory)", ErrStart)
	}
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil || host == "" || port == "" || port == "0" {
		return nil, fmt.Errorf("%w: --listen %q: want host:port, e.g. 127.0.0.1:2379", ErrStart, o.Listen)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: data directory: %v", ErrStart, err)
	}
	// A port in use is named before etcd tries (its own error is a
	// wrapped syscall message deep in a log).
	if err := probe(o.Listen); err != nil {
		return nil, fmt.Errorf("%w: client address %s: %v", ErrStart, o.Listen, err)
	}
	peer := o.Peer
	if peer == "" {
		if peer, err = freePort(host); err != nil {
			return nil, fmt.Errorf("%w: no free peer port on %s: %v", ErrStart, host, err)
		}
	} else if err := probe(peer); err != nil {
		return nil, fmt.Errorf("%w: peer address %s: %v", ErrStart, peer, err)
	}
	level := o.LogLevel
	if level == "" {
		level = "error"
	}
	var zl zapcore.Level
	if err := zl.Set(level); err != nil {
		return nil, fmt.Errorf("%w: log level %q", ErrStart, level)
	}
	w := o.Log
	if w == nil {
		w = os.Stderr
	}
	enc := zap.NewDevelopmentEncoderConfig()
	enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	closing := &atomic.Bool{}
	core := &quietCore{Core: zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zl), closing: closing}
	lg := zap.New(core).Named("etcd")

	dir := filepath.Clean(o.Dir)
	client := url.URL{Scheme: "http", Host: o.Listen}
	peerURL := url.URL{Scheme: "http", Host: peer}
	cfg := config.ServerConfig{
		Name:                        memberName,
		ClientURLs:                  types.URLs{client},
		PeerURLs:                    types.URLs{peerURL},
		DataDir:                     dir,
		SnapshotCount:               etcdserver.DefaultSnapshotCount,
		SnapshotCatchUpEntries:      etcdserver.DefaultSnapshotCatchUpEntries,
		MaxSnapFiles:                maxSnapFiles,
		MaxWALFiles:                 maxWALFiles,
		NewCluster:                  true,
		TickMs:                      tickMs,
		ElectionTicks:               electionMs / tickMs,
		InitialElectionTickAdvance:  true,
		AutoCompactionMode:          autoCompactionMode,
		AutoCompactionRetention:     autoCompactionRetained,
		MaxTxnOps:                   maxTxnOps,
		MaxRequestBytes:             maxRequestBytes,
		MaxConcurrentStreams:        1<<32 - 1,
		StrictReconfigCheck:         true,
		AuthToken:                   "simple",
		BcryptCost:                  bcryptCost,
		TokenTTL:                    authTokenTTL,
		CORS:                        map[string]struct{}{"*": {}},
		HostWhitelist:               map[string]struct{}{"*": {}},
		CompactHashCheckTime:        compactHashCheckTime,
		PreVote:                     true,
		Logger:                      lg,
		WarningApplyDuration:        warningApplyDuration,
		WarningUnaryRequestDuration: warningUnaryDuration,
		DowngradeCheckTime:          downgradeCheckTime,
		MaxLearners:                 maxLearners,
		V2Deprecation:               config.V2DeprDefault,
		ServerFeatureGate:           features.NewDefaultServerFeatureGate(memberName, lg),
		Metrics:                     "basic",
	}
	if !wal.Exist(datadir.ToWALDir(dir)) { // a new member: its cluster is itself
		if cfg.InitialPeerURLsMap, err = types.NewURLsMap(memberName + "=" + peerURL.String()); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStart, err)
		}
		cfg.InitialClusterToken = clusterToken
	}
	s := &Server{clientURL: client.String(), closing: closing, errc: make(chan error, 4)}
	clientLn, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("%w: client address %s: %v", ErrStart, o.Listen, err)
	}
	peerLn, err := net.Listen("tcp", peer)
	if err != nil {
		clientLn.Close()
		return nil, fmt.Errorf("%w: peer address %s: %v", ErrStart, peer, err)
	}
	s.lns = []net.Listener{clientLn, peerLn}
	if s.srv, err = etcdserver.NewServer(cfg); err != nil {
		clientLn.Close()
		peerLn.Close()
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	s.srv.Start()
	s.serve(lg, clientLn, peerLn)

	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	select {
	case <-s.srv.ReadyNotify():
	case err := <-s.errc:
		s.Close()
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	case <-time.After(timeout):
		s.Close()
		return nil, fmt.Errorf("%w: not ready after %s", ErrStart, timeout)
	}
	return s, nil
}

// serve serves the peer handler on peerLn and, on clientLn, etcd's gRPC
// API to HTTP/2 connections and /health, /version and /metrics to HTTP/1
// ones (as embed does for a client address without TLS).
func (s *Server) serve(lg *zap.Logger, clientLn, peerLn net.Listener) {
	quiet := log.New(io.Discard, "", 0) // do not log clients' mistakes
	s.peer = &http.Server{Handler: etcdhttp.NewPeerHandler(lg, s.srv), ReadTimeout: 5 * time.Minute, ErrorLog: quiet}
	mux := http.NewServeMux()
	etcdhttp.HandleVersion(mux, s.srv)
	etcdhttp.HandleMetrics(mux)
	etcdhttp.HandleHealth(lg, mux, s.srv)
	s.client = &http.Server{Handler: mux, ErrorLog: quiet}
	s.grpc = v3rpc.Server(s.srv, nil, nil,
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: grpcKeepAliveMinTime}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: grpcKeepAliveInterval, Timeout: grpcKeepAliveTimeout}))
	h2, h1 := newSplit(clientLn)
	s.run(func() error { return h2.accept() })
	s.run(func() error { return s.grpc.Serve(h2) })
	s.run(func() error { return s.client.Serve(h1) })
	s.run(func() error { return s.peer.Serve(peerLn) })
}

// run runs a server's loop, reporting how it ended unless the member is
// closing.
func (s *Server) run(f func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := f(); err != nil && !s.closing.Load() {
			select {
			case s.errc <- err:
			default:
			}
		}
	}()
}

// ClientURL is the URL clients reach the member at (http://Listen).
func (s *Server) ClientURL() string { return s.clientURL }

// Run serves until ctx ends (then closes cleanly) or the member fails.
func (s *Server) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.Close()
		return nil
	case <-s.srv.StopNotify():
		s.Close()
		return errors.New("etcd: the server stopped")
	case err := <-s.errc:
		s.Close()
		return fmt.Errorf("etcd: %w", err)
	}
}

// Close stops the member: clients are cut, the data is synced.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), s.srv.Cfg.ReqTimeout())
		defer cancel()
		s.client.Shutdown(ctx)
		stopped := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			s.grpc.Stop()
		}
		for _, ln := range s.lns {
			ln.Close()
		}
		s.srv.Stop()
		pctx, pcancel := context.WithTimeout(context.Background(), time.Second)
		s.peer.Shutdown(pctx)
		pcancel()
		s.wg.Wait()
	})
}

// split divides a listener's connections by protocol, as embed's cmux
// does: those that open with HTTP/2's client preface (gRPC) go to the
// split itself, the others to the HTTP/1 listener it returns.
type split struct {
	ln        net.Listener
	h2, h1    chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

// side is one of a split's two listeners. Closing it ends its Accept
// (http.Server's Shutdown waits for that); the split's listener is closed
// by its owner.
type side struct {
	s         *split
	ch        chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newSplit(ln net.Listener) (*side, *side) {
	s := &split{ln: ln, h2: make(chan net.Conn), h1: make(chan net.Conn), done: make(chan struct{})}
	return &side{s: s, ch: s.h2, closed: make(chan struct{})}, &side{s: s, ch: s.h1, closed: make(chan struct{})}
}

// http2Preface is what an HTTP/2 client sends first.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// accept hands out the connections until the listener closes.
func (sd *side) accept() error {
	s := sd.s
	defer s.closeOnce.Do(func() { close(s.done) })
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return err
		}
		go s.route(c)
	}
}

// route reads the start of a connection (for at most ten seconds) and
// hands it to the side its protocol belongs to.
func (s *split) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, len(http2Preface))
	head, err := br.Peek(len(http2Preface))
	c.SetReadDeadline(time.Time{})
	ch := s.h1
	if string(head) == http2Preface {
		ch = s.h2
	} else if err != nil && len(head) == 0 {
		c.Close()
		return
	}
	select {
	case ch <- &peeked{Conn: c, r: br}:
	case <-s.done:
		c.Close()
	}
}

// peeked is a connection whose first bytes were read into r.
type peeked struct {
	net.Conn
	r *bufio.Reader
}

func (p *peeked) Read(b []byte) (int, error) { return p.r.Read(b) }

func (sd *side) Accept() (net.Conn, error) {
	select {
	case c := <-sd.ch:
		return c, nil
	case <-sd.s.done:
		return nil, net.ErrClosed
	case <-sd.closed:
		return nil, net.ErrClosed
	}
}

func (sd *side) Close() error {
	sd.closeOnce.Do(func() { close(sd.closed) })
	return nil
}

func (sd *side) Addr() net.Addr { return sd.s.ln.Addr() }

// quietCore drops etcd's log lines once Close began: etcd logs its own
// listeners closing as errors ("setting up serving … failed: mux: server
// closed"), which on a clean stop are not.
type quietCore struct {
	zapcore.Core
	closing *atomic.Bool
}

func (c *quietCore) With(f []zapcore.Field) zapcore.Core {
	return &quietCore{Core: c.Core.With(f), closing: c.closing}
}

func (c *quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.closing.Load() {
		return ce
	}
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// probe fails when addr cannot be listened on (in use, not this host's).
func probe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// freePort returns host:port with a port free now.
func freePort(host string) (string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
