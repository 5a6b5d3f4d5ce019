package client

import (
	"context"
	"net/http"
)

// Cluster returns a cluster member's GET /cluster answer as JSON (see
// package cluster's Status); a single node answers 404.
func (c *Client) Cluster(ctx context.Context) ([]byte, error) {
	return c.send(ctx, http.MethodGet, "/cluster", nil)
}
