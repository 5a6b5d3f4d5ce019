package cluster

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// Options configure Start.
type Options struct {
	Config config.Config
	Self   *memory.Self
	Log    *slog.Logger
	Clock  clock.Clock
	// URL is where this member's REST API answers (cluster.advertise, or
	// http:// and the address serve listens on).
	URL string
	// Version is this build's version, published with the member.
	Version string
}

// Cluster is this process as a member of a cluster: its membership, its
// peer listener, and (later stages) the ownership of sonas.
type Cluster struct {
	cfg    config.Cluster
	self   *memory.Self
	log    *slog.Logger
	clock  clock.Clock
	node   *Node
	peer   *http.Server
	peerLn net.Listener
	mux    *http.ServeMux // the peer routes
	client *http.Client   // calls to other members
	done   chan error

	chains   *chains
	mover    *mover
	replicas replicaLocks
	maxBody  int64 // server.max_body_bytes: what Route reads of a body
	// lastOwner is each sona's owner as last read from etcd (member id):
	// reads are routed by it while etcd does not answer.
	lastOwner sync.Map
	// local is this member's own forgetting (UseForget).
	local atomic.Pointer[LocalForget]
	// localSonas lists this member's own sonas (ListSonas).
	localSonas atomic.Pointer[LocalSonas]
	recall     config.Recall
	// backbone is the cluster's backbone sona (claimBackbone); conf the
	// whole configuration (its consensus ledger's thresholds).
	backbone *messages.Sona
	conf     config.Config
}

// memberFile keeps a member's id in its data directory.
const memberFile = "memoria.member"

// MemberID returns the member id kept in dataDir, making one the first
// time.
func MemberID(dataDir string) (string, error) {
	p := filepath.Join(dataDir, memberFile)
	b, err := os.ReadFile(p)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if _, perr := uuid.Parse(id); perr != nil {
			return "", fmt.Errorf("cluster: %s holds %q, not a member id (a uuid): remove it to make a new one", p, id)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cluster: %w", err)
	}
	id := uuid.NewString()
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return id, nil
}

// Start opens the peer listener and joins the cluster.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	cc := o.Config.Cluster
	if !cc.Enabled() {
		return nil, fmt.Errorf("cluster: cluster.etcd is not set")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Clock = clock.Or(o.Clock)
	id, err := MemberID(o.Config.DataDir)
	if err != nil {
		return nil, err
	}
	peerAddr := cc.Peer
	if peerAddr == "" {
		host, _, err := net.SplitHostPort(o.Config.Server.Listen)
		if err != nil {
			return nil, fmt.Errorf("cluster: server.listen: %w", err)
		}
		peerAddr = net.JoinHostPort(host, "0")
	}
	ln, err := net.Listen("tcp", peerAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: peer listener (cluster.peer %q): %w", cc.Peer, err)
	}
	if err := cc.CheckPeerExposure(ln.Addr().String()); err != nil {
		ln.Close()
		return nil, err
	}
	url := o.URL
	if cc.Advertise != "" {
		url = strings.TrimRight(cc.Advertise, "/")
	}
	c := &Cluster{cfg: cc, self: o.Self, log: o.Log.With("component", "cluster"), clock: o.Clock, peerLn: ln,
		mux: http.NewServeMux(), done: make(chan error, 1), maxBody: o.Config.Server.MaxBodyBytes, recall: o.Config.Recall, conf: o.Config,
		client: &http.Client{Timeout: cc.PeerTimeout.D(), Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}}}
	c.chains = newChains(c)
	o.Self.Forget.AddPart(forgetStaged)
	c.peerRoutes()
	c.peer = &http.Server{Handler: c.authPeer(c.mux), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelWarn)}
	go func() { c.done <- c.peer.Serve(ln) }()

	node, err := Join(ctx, NodeOptions{Config: cc, Log: o.Log, Clock: o.Clock, Self: Member{
		ID: id, URL: url, Peer: "http://" + ln.Addr().String(), Version: o.Version,
	}})
	if err != nil {
		c.peer.Close()
		return nil, err
	}
	c.node = node
	c.mover = newMover(node)
	node.OnFence(c.chains.fenceAll)
	if err := c.claimBackbone(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Chains is the member's writer of sona chains (actors.Options.Chains).
func (c *Cluster) Chains() actors.ChainWriter { return c.chains }

// Node is the membership.
func (c *Cluster) Node() *Node { return c.node }

// PeerAddr is the address the peer listener listens on.
func (c *Cluster) PeerAddr() string { return c.peerLn.Addr().String() }

// Close leaves the cluster and stops the peer listener.
func (c *Cluster) Close() error {
	c.mover.close()
	err := c.node.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := c.peer.Shutdown(ctx); err == nil && serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = serr
	}
	c.client.CloseIdleConnections()
	return err
}

// secretHeader carries cluster.secret on peer calls.
const secretHeader = "X-Memoria-Cluster-Secret"

// authPeer refuses peer calls without the cluster's secret (when one is
// set).
func (c *Cluster) authPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Secret != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(secretHeader)), []byte(c.cfg.Secret)) != 1 {
			peerError(w, http.StatusUnauthorized, "unauthorized", "peer calls need the cluster's secret")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (c *Cluster) peerRoutes() {
	c.mux.HandleFunc("GET /peer/v1/member", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.node.Self())
	})
	c.mux.HandleFunc("POST /peer/v1/stage", c.handleStage)
	c.mux.HandleFunc("GET /peer/v1/entries", c.handleEntries)
	c.mux.HandleFunc("POST /peer/v1/forget/plan", c.handleForgetPlan)
	c.mux.HandleFunc("POST /peer/v1/forget/apply", c.handleForgetApply)
	c.mux.HandleFunc("GET /peer/v1/tombstones", c.handleTombstones)
	c.mux.HandleFunc("POST /peer/v1/recall", c.handleRecall)
	c.mux.HandleFunc("GET /peer/v1/sonas", c.handleSonas)
}

// peerError writes an error in the API's shape.
func peerError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"cannot encode the answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
