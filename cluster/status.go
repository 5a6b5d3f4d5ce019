package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is GET /cluster's answer: the live members as etcd knows them,
// this member, and the cluster's settings.
type Status struct {
	// Self is the id of the member that answered.
	Self string `json:"self"`
	// Members are the live members, by id.
	Members []MemberStatus `json:"members"`
	// Replicas is R (cluster.replicas).
	Replicas int `json:"replicas"`
	// Etcd is the etcd the member uses, and whether it answers.
	Etcd EtcdStatus `json:"etcd"`
	// Sonas are the sonas etcd knows; UnderReplicated those whose head
	// names fewer than Replicas live members (restored by their next
	// write). Null when etcd does not answer.
	Sonas           *int `json:"sonas"`
	UnderReplicated *int `json:"under_replicated"`
	// Lacking names the first under-replicated sonas (at most
	// maxLacking) and the live members that hold each.
	Lacking []LackingSona `json:"lacking"`
}

// LackingSona is an under-replicated sona in Status.
type LackingSona struct {
	Sona string `json:"sona"`
	// Seq is its head's seq; Live the live members holding it up to there.
	Seq  int64    `json:"seq"`
	Live []string `json:"live"`
}

// maxLacking bounds Status.Lacking.
const maxLacking = 20

// MemberStatus is one member in Status.
type MemberStatus struct {
	Member
	// Self marks the member that answered.
	Self bool `json:"self"`
	// Owned are the sonas it owns now (an owner key bound to its lease);
	// Held those whose chain it holds up to the head (owner or replica).
	Owned int `json:"owned"`
	Held  int `json:"held"`
}

// EtcdStatus is the etcd part of Status.
type EtcdStatus struct {
	Endpoints []string `json:"endpoints"`
	// Healthy: etcd answered within the last lease TTL.
	Healthy bool `json:"healthy"`
}

// Status reports the cluster as this member sees it.
func (c *Cluster) Status(ctx context.Context) Status {
	self := c.node.Self()
	st := Status{Self: self.ID, Replicas: c.cfg.Replicas, Members: []MemberStatus{},
		Etcd: EtcdStatus{Endpoints: c.cfg.Endpoints(), Healthy: c.node.Healthy()}}
	owned, held, sonas, under, lacking, err := c.census(ctx)
	st.Lacking = lacking
	for _, m := range c.node.Members() {
		st.Members = append(st.Members, MemberStatus{Member: m, Self: m.ID == self.ID, Owned: owned[m.ID], Held: held[m.ID]})
	}
	if err == nil {
		st.Sonas, st.UnderReplicated = &sonas, &under
	}
	return st
}

// census reads every sona's owner and head from etcd.
func (c *Cluster) census(ctx context.Context) (owned, held map[string]int, sonas, under int, lacking []LackingSona, err error) {
	owned, held, lacking = map[string]int{}, map[string]int{}, []LackingSona{}
	rctx, cancel := c.node.request(ctx)
	defer cancel()
	resp, err := c.node.client.Get(rctx, c.node.keys.sonas(), clientv3.WithPrefix())
	if err != nil {
		return owned, held, 0, 0, lacking, err
	}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		switch {
		case strings.HasSuffix(k, "/owner"):
			owned[string(kv.Value)]++
		case strings.HasSuffix(k, "/head"):
			var h Head
			if json.Unmarshal(kv.Value, &h) != nil {
				continue
			}
			sonas++
			live := []string{}
			for _, id := range h.Replicas {
				held[id]++
				if _, ok := c.node.Member(id); ok {
					live = append(live, id)
				}
			}
			if len(live) < c.cfg.Replicas {
				under++
				if len(lacking) < maxLacking {
					sona := strings.TrimSuffix(strings.TrimPrefix(k, c.node.keys.sonas()), "/head")
					lacking = append(lacking, LackingSona{Sona: sona, Seq: h.Seq, Live: live})
				}
			}
		}
	}
	return owned, held, sonas, under, lacking, nil
}

// StatusHandler serves GET /cluster (mounted on the API's mux, behind its
// authentication).
func (c *Cluster) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, c.Status(r.Context()))
	})
}

// trimURL drops a trailing slash.
func trimURL(u string) string { return strings.TrimRight(u, "/") }
