package cluster

import (
	"context"
	"net/http"
	"strings"
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
}

// MemberStatus is one member in Status.
type MemberStatus struct {
	Member
	// Self marks the member that answered.
	Self bool `json:"self"`
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
	for _, m := range c.node.Members() {
		st.Members = append(st.Members, MemberStatus{Member: m, Self: m.ID == self.ID})
	}
	return st
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
