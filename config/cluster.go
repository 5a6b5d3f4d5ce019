package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Cluster makes serve a member of a cluster (issue 16; README, Cluster):
// membership, sona ownership and chain heads in etcd, appends durable on
// Replicas members before they are acknowledged. Without Etcd the server
// is a single node and none of the other keys matter.
type Cluster struct {
	// Etcd are the client URLs of the etcd cluster, comma-separated
	// (http://127.0.0.1:2379, or host:port alone). Empty: no cluster.
	Etcd string `yaml:"etcd"`
	// Replicas is how many members hold each append durably before it is
	// acknowledged, the owner included (R). 1 replicates nothing.
	Replicas int `yaml:"replicas"`
	// Peer is the listen address (host:port) of the peer traffic between
	// members (replication, forwarded requests). Empty: a free port on
	// server.listen's host.
	Peer string `yaml:"peer"`
	// Advertise is the URL other members and clients reach this member's
	// REST API at. Empty: http:// and the address serve listens on.
	Advertise string `yaml:"advertise"`
	// Prefix starts every etcd key of this cluster, so that clusters can
	// share an etcd.
	Prefix string `yaml:"prefix"`
	// LeaseTTL is the life of a member's etcd lease without a keep-alive
	// (whole seconds, at least 1 s): a member that stops answering
	// leaves the cluster, and loses its sonas, this long after.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// EtcdTimeout bounds one etcd request: with etcd unavailable, writes
	// fail after this long (503) while reads go on.
	EtcdTimeout Duration `yaml:"etcd_timeout"`
	// PeerTimeout bounds one call to another member (a replication push,
	// a forwarded request that does not call a model).
	PeerTimeout Duration `yaml:"peer_timeout"`
	// Secret, when set, is the shared secret every peer call carries.
	// Required when the peer address is not a loopback one. File only in
	// spirit: prefer MEMORIA_CLUSTER_SECRET over a file in a repository.
	Secret string `yaml:"secret"`
}

// DefaultCluster is the cluster's defaults: no etcd (a single node), R = 2
// once one is given, a 2 s lease (the measured failover budget is
// 5 s: lease expiry plus a claim).
func DefaultCluster() Cluster {
	return Cluster{
		Replicas:    2,
		Prefix:      "/memoria",
		LeaseTTL:    Duration(2 * time.Second),
		EtcdTimeout: Duration(2 * time.Second),
		PeerTimeout: Duration(10 * time.Second),
	}
}

// Enabled reports whether serve joins a cluster.
func (c Cluster) Enabled() bool { return strings.TrimSpace(c.Etcd) != "" }

// Endpoints are the etcd client URLs, each with a scheme.
func (c Cluster) Endpoints() []string {
	var out []string
	for _, e := range strings.Split(c.Etcd, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		out = append(out, e)
	}
	return out
}

// validate checks the cluster keys (bad reports a problem).
func (c Cluster) validate(bad func(key, format string, args ...any)) {
	if c.Replicas < 1 || c.Replicas > 7 {
		bad("cluster.replicas", "must be within 1..7, got %d", c.Replicas)
	}
	if !strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, " \t\n") {
		bad("cluster.prefix", "want a key prefix such as /memoria (starts with /, no trailing /), got %q", c.Prefix)
	}
	if c.LeaseTTL < Duration(time.Second) || c.LeaseTTL%Duration(time.Second) != 0 {
		bad("cluster.lease_ttl", "must be whole seconds, at least 1s (etcd leases count seconds), got %s", c.LeaseTTL)
	}
	if c.EtcdTimeout <= 0 {
		bad("cluster.etcd_timeout", "must be a positive duration, got %s", c.EtcdTimeout)
	}
	if c.PeerTimeout <= 0 {
		bad("cluster.peer_timeout", "must be a positive duration, got %s", c.PeerTimeout)
	}
	if c.Peer != "" {
		if _, port, err := net.SplitHostPort(c.Peer); err != nil || port == "" {
			bad("cluster.peer", "want host:port (or empty: a free port), got %q", c.Peer)
		}
	}
	if c.Advertise != "" {
		if u, err := url.Parse(c.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" && u.Path != "/" {
			bad("cluster.advertise", "want this member's base URL such as http://10.0.0.5:7777, got %q", c.Advertise)
		}
	}
	if !c.Enabled() {
		return
	}
	for _, e := range c.Endpoints() {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" || u.Path != "" && u.Path != "/" {
			bad("cluster.etcd", "want etcd client URLs such as http://127.0.0.1:2379 (or host:port), comma-separated, got %q", e)
		}
	}
	if c.Peer != "" && c.Secret == "" && !IsLoopback(c.Peer) {
		bad("cluster.secret", "refusing peer traffic on %s (not a loopback address) without a shared secret: set cluster.secret (MEMORIA_CLUSTER_SECRET)", c.Peer)
	}
}

// CheckPeerExposure refuses peer traffic beyond this machine without a
// secret (the peer address picked for an empty cluster.peer is known only
// at start).
func (c Cluster) CheckPeerExposure(listen string) error {
	if c.Secret == "" && !IsLoopback(listen) {
		return fmt.Errorf("config: cluster.secret: refusing peer traffic on %s (not a loopback address) without a shared secret: set cluster.secret (MEMORIA_CLUSTER_SECRET), or listen on 127.0.0.1", listen)
	}
	return nil
}

// MarshalYAML renders the cluster keys with the secret hidden (`memoria
// config` prints the configuration).
func (c Cluster) MarshalYAML() (any, error) {
	type plain Cluster
	p := plain(c)
	if p.Secret != "" {
		p.Secret = "(set)"
	}
	return p, nil
}
