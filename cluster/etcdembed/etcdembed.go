// Package etcdembed runs a one-member etcd inside the process, for `memoria
// etcd`: trying a cluster out on one machine, and the cluster's tests. A
// production cluster runs a real etcd cluster (three or five members) and
// points cluster.etcd at it; serve itself only ever speaks etcd's client
// protocol and never embeds a server.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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

// Server is a running one-member etcd.
type Server struct {
	e         *embed.Etcd
	clientURL string
	closing   *atomic.Bool
}

// ErrStart classifies a failure to start.
var ErrStart = errors.New("etcd: cannot start")

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

	cfg := embed.NewConfig()
	cfg.Name = "memoria"
	cfg.Dir = filepath.Clean(o.Dir)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.LogLevel = level
	client := url.URL{Scheme: "http", Host: o.Listen}
	peerURL := url.URL{Scheme: "http", Host: peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// Keep the history small: members only keep leases, owners and heads.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	}
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("%w: %v", ErrStart, err)
	case <-time.After(timeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("%w: not ready after %s", ErrStart, timeout)
	}
	return &Server{e: e, clientURL: client.String(), closing: closing}, nil
}

// ClientURL is the URL clients reach the member at (http://Listen).
func (s *Server) ClientURL() string { return s.clientURL }

// Run serves until ctx ends (then closes cleanly) or the member fails.
func (s *Server) Run(ctx context.Context) error {
	select {
	case <-ctx.Done():
		s.Close()
		return nil
	case err := <-s.e.Err():
		s.Close()
		return fmt.Errorf("etcd: %w", err)
	}
}

// Close stops the member: clients are cut, the data is synced.
func (s *Server) Close() {
	s.closing.Store(true)
	s.e.Close()
}

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
