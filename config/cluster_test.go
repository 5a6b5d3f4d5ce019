package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/config"
)

// TestClusterFromEnv: the cluster keys come from MEMORIA_CLUSTER_* like
// every setting; without cluster.etcd the server is a single node.
func TestClusterFromEnv(t *testing.T) {
	c, err := config.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster.Enabled() {
		t.Fatal("the default configuration joins a cluster")
	}
	c, err = config.Load("", []string{"MEMORIA_CLUSTER_ETCD=127.0.0.1:2379, http://10.0.0.2:2379", "MEMORIA_CLUSTER_REPLICAS=3",
		"MEMORIA_CLUSTER_PEER=127.0.0.1:7801", "MEMORIA_CLUSTER_LEASE_TTL=3s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.Cluster.Enabled() || c.Cluster.Replicas != 3 || c.Cluster.Peer != "127.0.0.1:7801" || c.Cluster.LeaseTTL.D().Seconds() != 3 {
		t.Fatalf("cluster %+v", c.Cluster)
	}
	if got, want := c.Cluster.Endpoints(), []string{"http://127.0.0.1:2379", "http://10.0.0.2:2379"}; !slices.Equal(got, want) {
		t.Fatalf("endpoints %q, want %q", got, want)
	}
	for _, name := range []string{"MEMORIA_CLUSTER_ETCD", "MEMORIA_CLUSTER_REPLICAS", "MEMORIA_CLUSTER_PEER"} {
		if !slices.Contains(config.EnvNames(), name) {
			t.Errorf("%s is not listed", name)
		}
	}
}

func TestClusterValidate(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"MEMORIA_CLUSTER_REPLICAS=0"}, "cluster.replicas: must be within 1..7, got 0"},
		{[]string{"MEMORIA_CLUSTER_ETCD=ftp://x:1"}, `cluster.etcd: want etcd client URLs`},
		{[]string{"MEMORIA_CLUSTER_ETCD=127.0.0.1"}, `got "http://127.0.0.1"`},
		{[]string{"MEMORIA_CLUSTER_PEER=7801"}, `cluster.peer: want host:port`},
		{[]string{"MEMORIA_CLUSTER_LEASE_TTL=1500ms"}, "cluster.lease_ttl: must be whole seconds"},
		{[]string{"MEMORIA_CLUSTER_PREFIX=memoria/"}, "cluster.prefix"},
		{[]string{"MEMORIA_CLUSTER_ADVERTISE=10.0.0.5:7777"}, "cluster.advertise"},
		{[]string{"MEMORIA_CLUSTER_ETCD=127.0.0.1:2379", "MEMORIA_CLUSTER_PEER=0.0.0.0:7801"}, "cluster.secret: refusing peer traffic on 0.0.0.0:7801"},
	} {
		c, err := config.Load("", tc.env)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, c.Validate(), tc.want)
	}
	c, _ := config.Load("", []string{"MEMORIA_CLUSTER_ETCD=127.0.0.1:2379", "MEMORIA_CLUSTER_PEER=0.0.0.0:7801", "MEMORIA_CLUSTER_SECRET=s3cret"})
	if err := c.Validate(); err != nil {
		t.Fatalf("a public peer address with a secret: %v", err)
	}
	if err := c.Cluster.CheckPeerExposure("10.1.2.3:4000"); err != nil {
		t.Fatal(err)
	}
	c.Cluster.Secret = ""
	wantErr(t, c.Cluster.CheckPeerExposure("10.1.2.3:4000"), "cluster.secret", "10.1.2.3:4000")
}

// TestClusterSecretHidden: `memoria config` never prints the secret.
func TestClusterSecretHidden(t *testing.T) {
	c := config.Default()
	c.Cluster.Secret = "s3cret"
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "secret: (set)") {
		t.Fatalf("config YAML shows the secret:\n%s", out)
	}
}
