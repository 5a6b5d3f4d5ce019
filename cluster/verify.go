package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
)

// Relayed answers. A member relays another member's answer to its client
// in two cases: a read by CID it lacks (fromPeers) and a request about a
// sona it does not own (forward, to the owner). What a member relays is
// checked where it names content by CID, so that a member that serves
// altered content (a bug, a damaged disk, an intruder on the peer
// network) is caught instead of believed:
//
//   - a raw block or a CAR: every block hashes to its CID (verifyBlock,
//     verifyCAR);
//   - JSON that renders memories — GET /memory/{cid}, and any JSON answer
//     relayed from an owner (a memory list, a recall, a sona's memories):
//     every object with a "cid" and a "data" is a memory whose block
//     fields (data, timestamp, edges), encoded again, give that CID
//     (verifyMemoriesJSON), and an object with a "cid" and a "memory"
//     (a recalled memory) names that memory; GET /memory/{cid} must
//     render the memory asked for;
//   - GET /file/{cid}: the bytes are the raw block the CID names, or, for
//     a file memory's CID, the content its block (fetched raw from the
//     same member, verified) names (verifyFile).
//
// What is not content-addressed is trusted: a memory's metadata (kind,
// importance, access counts, sonas), evaluations, heads, lists' order and
// paging, streamed answers (chat events, exports, whose importer verifies
// every CID itself). Members trust each other for those: they are the
// holders of the cluster's secret (cluster.secret, required off
// loopback), and a forwarded request carries its client's own
// credentials, which the member that serves it checks.

// verifyMemoriesJSON checks that every memory a JSON answer renders
// encodes to its CID, and, when want is defined, that it renders want.
func verifyMemoriesJSON(body []byte, want cid.Cid) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%w: the answer is not JSON: %v", base.ErrCorrupt, err)
	}
	found := false
	var walk func(v any) error
	walk = func(v any) error {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		case map[string]any:
			s, isCID := v["cid"].(string)
			if _, isData := v["data"].(map[string]any); isCID && isData {
				c, err := verifyRendered(v)
				if err != nil {
					return fmt.Errorf("memory %s: %w", s, err)
				}
				found = found || c.Equals(want)
			}
			if inner, ok := v["memory"].(map[string]any); ok && isCID && inner["cid"] != s {
				return fmt.Errorf("%w: %s names memory %v", base.ErrCorrupt, s, inner["cid"])
			}
			for _, e := range v {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(doc); err != nil {
		return err
	}
	if want.Defined() && !found {
		return fmt.Errorf("%w: the answer does not render memory %s", base.ErrCorrupt, want)
	}
	return nil
}

// verifyRendered checks one rendered memory (an object of the decoded
// JSON answer, numbers as json.Number): its block fields — data,
// timestamp, edges — encode to its CID, which it returns. The fields are
// read from the decoded object; only data is encoded again, for the
// DAG-JSON decoder (its links and bytes are DAG-JSON's).
func verifyRendered(obj map[string]any) (cid.Cid, error) {
	c, err := cid.Decode(obj["cid"].(string))
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: %v", base.ErrCorrupt, err)
	}
	raw, err := json.Marshal(obj["data"])
	if err != nil {
		return cid.Undef, err
	}
	d, err := model.DataFromJSON(raw)
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: its data: %v", base.ErrCorrupt, err)
	}
	m := &model.Memory{Data: d}
	switch ts := obj["timestamp"].(type) {
	case nil:
	case json.Number:
		v, err := ts.Int64()
		if err != nil {
			return cid.Undef, fmt.Errorf("%w: its timestamp %s: %v", base.ErrCorrupt, ts, err)
		}
		m.Timestamp = &v
	default:
		return cid.Undef, fmt.Errorf("%w: its timestamp is a %T", base.ErrCorrupt, ts)
	}
	if m.Edges, err = renderedEdges(obj["edges"]); err != nil {
		return cid.Undef, err
	}
	model.SortEdges(m.Edges)
	got, _, err := m.Encode()
	if err != nil {
		return cid.Undef, fmt.Errorf("%w: %v", base.ErrCorrupt, err)
	}
	if !got.Equals(c) {
		return cid.Undef, fmt.Errorf("%w: its content encodes to %s", base.ErrCorrupt, got)
	}
	return c, nil
}

// renderedEdges reads a rendered memory's edges (absent or null: none):
// [{"target":{"/":cid},"weight":number}, …].
func renderedEdges(v any) ([]model.Edge, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: its edges are a %T", base.ErrCorrupt, v)
	}
	edges := make([]model.Edge, len(list))
	for i, e := range list {
		obj, _ := e.(map[string]any)
		target, _ := obj["target"].(map[string]any)
		link, _ := target["/"].(string)
		t, err := cid.Decode(link)
		if err != nil {
			return nil, fmt.Errorf("%w: an edge's target: %v", base.ErrCorrupt, err)
		}
		var w float64
		if n, ok := obj["weight"].(json.Number); ok {
			if w, err = n.Float64(); err != nil {
				return nil, fmt.Errorf("%w: an edge's weight %s: %v", base.ErrCorrupt, n, err)
			}
		} else if obj["weight"] != nil {
			return nil, fmt.Errorf("%w: an edge's weight is a %T", base.ErrCorrupt, obj["weight"])
		}
		edges[i] = model.Edge{Target: t, Weight: w}
	}
	return edges, nil
}

// verifyFile checks the answer of member m to GET /file/{b}: the raw
// block b, or the content of file memory b, whose block it fetches from m
// and verifies first.
func (c *Cluster) verifyFile(ctx context.Context, r *http.Request, m Member, b cid.Cid, body []byte) error {
	if b.Prefix().Codec != model.CodecDagCBOR {
		return verifyBlock(b, body)
	}
	req, err := c.onBehalf(ctx, r, http.MethodGet, m, "/ipfs/"+b.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", rawMediaType)
	resp, err := c.client.Transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	block, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerBody))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: member %s serves file memory %s but not its block (%d)", base.ErrCorrupt, m.ID, b, resp.StatusCode)
	}
	if err := verifyBlock(b, block); err != nil {
		return err
	}
	mem, err := model.DecodeMemory(block)
	if err != nil {
		return fmt.Errorf("%w: %v", base.ErrCorrupt, err)
	}
	if mem.Data.File == nil {
		return fmt.Errorf("%w: memory %s is not a file", base.ErrCorrupt, b)
	}
	return verifyBlock(mem.Data.File.Content, body)
}

// relayedVerifier is how fromPeers checks member m's answer to r, a read
// by CID b: nil when the answer names nothing by CID (it is relayed as it
// is).
func (c *Cluster) relayedVerifier(r *http.Request, m Member, b cid.Cid, ct string) func([]byte) error {
	switch {
	case strings.HasPrefix(ct, rawMediaType):
		return func(body []byte) error { return verifyBlock(b, body) }
	case strings.HasPrefix(ct, carMediaType):
		return func(body []byte) error { return verifyCAR(b, body) }
	case strings.HasPrefix(r.URL.Path, "/file/"):
		return func(body []byte) error { return c.verifyFile(r.Context(), r, m, b, body) }
	case strings.HasPrefix(ct, "application/json") && strings.TrimSuffix(r.URL.Path, "/") == "/memory/"+b.String():
		return func(body []byte) error { return verifyMemoriesJSON(body, b) }
	}
	return nil
}

// verifyForwarded checks an owner's JSON answer to a forwarded request
// (ReverseProxy.ModifyResponse): the memories it renders. Streamed
// answers and other media types pass as they are.
func verifyForwarded(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerBody+1))
	resp.Body.Close()
	if err != nil {
		return err
	}
	if len(body) > maxPeerBody {
		return fmt.Errorf("%w: the answer is over %d bytes", base.ErrCorrupt, maxPeerBody)
	}
	if err := verifyMemoriesJSON(body, cid.Undef); err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}
