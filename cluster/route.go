package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/memoria-ai/memoria/memory/base"
	memchain "github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/store"
)

// forwardedHeader marks a request one member forwarded to another (its
// value is the forwarding member's id): it is served where it arrives,
// never forwarded again.
const forwardedHeader = "X-Memoria-Forwarded-By"

// servedByHeader names the member that served a request.
const servedByHeader = "X-Memoria-Member"

// Route sends every request about one sona to the member that owns it (or
// that should take it: the first live member holding its chain), and
// serves the others with next, the API. The requests routed are the
// /sona/{uuid}… routes, the backbone's (/backbone…, /conflicts…: to the
// backbone's owner), POST /memories (by its body's sona), MCP tool
// calls (by their sona argument), POST /files, GET /memories/list and
// GET /export with ?sona=. Reads by CID this member lacks go to a member that has
// the block; everything else (lists, other MCP requests) is served by
// the member that received it.
func (c *Cluster) Route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(servedByHeader, c.node.self.ID)
		read := r.Method == http.MethodGet || r.Method == http.MethodHead
		if r.Header.Get(forwardedHeader) != "" {
			if read {
				if sona, err := c.sonaOf(r); err == nil && sona != "" {
					c.settle(r.Context(), sona)
				}
			}
			next.ServeHTTP(w, r)
			return
		}
		if b, ok := blockOf(r); ok && !c.hasBlock(b) {
			c.fromPeers(w, r, b, next)
			return
		}
		sona, err := c.sonaOf(r)
		if err != nil || sona == "" {
			next.ServeHTTP(w, r) // not about one sona, or the API says what is wrong
			return
		}
		to, err := c.placement(r.Context(), sona, read)
		if err != nil {
			apiError(w, err)
			return
		}
		if to.ID == c.node.self.ID {
			if read {
				c.settle(r.Context(), sona)
			}
			next.ServeHTTP(w, r)
			return
		}
		if body, ok := c.retryable(r); ok {
			c.forwardRetrying(w, r, sona, to, body, next)
			return
		}
		c.forward(w, r, sona, to)
	})
}

// settle brings this member's copy of sona, which it serves a read of
// without owning the sona (nobody does, or the read was sent here), to
// the acknowledged head: a replica holds an owner's last appends staged
// until a later write says the head covers them, and an owner that
// passivated the sona (or died) writes no more. Best effort: without
// etcd, or when the staged appends do not continue the chain, the copy
// is served as it is.
func (c *Cluster) settle(ctx context.Context, sona string) {
	if c.chains.holds(sona) {
		return
	}
	length, _, err := localLength(c.self, sona)
	if err != nil || length < 0 {
		return
	}
	if st, err := readStaged(c.self.Store(), sona, length); err != nil || len(st) == 0 {
		return
	}
	_, head, err := c.ownerAndHead(ctx, sona)
	if err != nil || head == nil {
		return
	}
	defer c.replicas.lock(sona)() // as stageHere, then the chain's lock, as Acquire
	ch := c.chains.get(sona)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if length, _, err = localLength(c.self, sona); err != nil || length-1 >= head.Seq {
		return
	}
	st, err := readStaged(c.self.Store(), sona, length)
	if err != nil {
		c.log.Warn("cannot bring this member's copy of a sona to its head for a read", "sona", sona, "err", err)
		return
	}
	run, ok := acknowledged(st, length, head.committed())
	if !ok {
		return // not provably the chain's: the next owner sorts them out
	}
	if err := apply(ctx, c.self, sona, run); err != nil {
		c.log.Warn("cannot bring this member's copy of a sona to its head for a read", "sona", sona, "err", err)
	}
}

// retryable returns the body of a write that is safe to send again: a
// POST /memories, a chat step or an MCP tool call with a request id
// (Idempotency-Key or request_id), which the sona's owner carries out at
// most once.
func (c *Cluster) retryable(r *http.Request) ([]byte, bool) {
	chat := strings.HasPrefix(r.URL.Path, "/sona/") && strings.HasSuffix(r.URL.Path, "/chat")
	if r.Method != http.MethodPost || r.URL.Path != "/memories" && r.URL.Path != "/mcp" && !chat {
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, c.maxBody+1)) // the API refuses what is over
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	if r.Header.Get(idempotencyHeader) != "" {
		return body, true
	}
	var probe struct {
		RequestID string `json:"request_id"`
		Method    string `json:"method"`
		Params    struct {
			Arguments struct {
				RequestID string `json:"request_id"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return body, false
	}
	if r.URL.Path == "/mcp" { // an MCP tool call with a request id (insert, chat)
		return body, probe.Method == "tools/call" && probe.Params.Arguments.RequestID != ""
	}
	return body, probe.RequestID != ""
}

// forwardRetrying forwards a retryable write to the sona's owner, and
// when the owner does not answer or answers 503 (it died, was fenced, is
// leaving) sends it again to whoever owns the sona next, for up to two
// leases and an etcd timeout: a client sees the failover as a slower
// answer, not a failure.
func (c *Cluster) forwardRetrying(w http.ResponseWriter, r *http.Request, sona string, to Member, body []byte, next http.Handler) {
	ctx := r.Context()
	deadline := c.clock.Now().Add(2*c.cfg.LeaseTTL.D() + c.cfg.EtcdTimeout.D())
	var err error
	for {
		if err == nil {
			var resp *http.Response
			if resp, err = c.send(ctx, r, to, body); err == nil {
				if resp.StatusCode != http.StatusServiceUnavailable || !c.clock.Now().Before(deadline) {
					if err := verifyForwarded(resp); err != nil {
						c.log.Warn("a member's answer does not verify", "member", to.ID, "sona", sona, "path", r.URL.Path, "err", err)
						apiError(w, fmt.Errorf("member %s answered content that does not verify: %w", to.ID, err))
						return
					}
					copyResponse(w, resp)
					return
				}
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				err = fmt.Errorf("%w: member %s: %s", ErrNoReplicas, to.ID, bytes.TrimSpace(b))
			}
		}
		if !c.clock.Now().Before(deadline) || ctx.Err() != nil {
			apiError(w, fmt.Errorf("%w: sona %s: no member took the write in time (last: %v); retry", ErrNoReplicas, sona, err))
			return
		}
		t := c.clock.NewTimer(retryPause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
		c.log.Debug("sending a write again", "sona", sona, "to", to.ID, "err", err)
		if to, err = c.placement(ctx, sona, false); err == nil && to.ID == c.node.self.ID {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
	}
}

// retryPause spaces the attempts of forwardRetrying.
const retryPause = 200 * time.Millisecond

// onBehalf is a request to member m for uri on behalf of r: r's headers
// (its client's credentials among them) and the mark that a member sent
// it.
func (c *Cluster) onBehalf(ctx context.Context, r *http.Request, method string, m Member, uri string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, trimURL(m.URL)+uri, body)
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	req.Header.Set(forwardedHeader, c.node.self.ID)
	return req, nil
}

// send makes one attempt of a forwarded request with body, cut short when
// the member leaves the cluster.
func (c *Cluster) send(ctx context.Context, r *http.Request, to Member, body []byte) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	gone, unwatch := c.node.Gone(to.ID)
	go func() {
		select {
		case <-gone:
			cancel(fmt.Errorf("member %s left the cluster", to.ID))
		case <-ctx.Done():
		}
	}()
	req, err := c.onBehalf(ctx, r, r.Method, to, r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		unwatch()
		cancel(nil)
		return nil, err
	}
	resp, err := c.client.Transport.RoundTrip(req)
	if err != nil {
		unwatch()
		cancel(nil)
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, func() { unwatch(); cancel(nil) }}
	return resp, nil
}

// cancelOnClose runs done when the body is closed.
type cancelOnClose struct {
	io.ReadCloser
	done func()
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.done()
	return err
}

// copyResponse writes resp to w, streaming its body.
func copyResponse(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(flushWriter{w}, resp.Body)
}

// blockOf is the CID a read by CID names: GET or HEAD of /ipfs/{cid}…,
// /memory/{cid}…, /file/{cid}.
func blockOf(r *http.Request) (cid.Cid, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return cid.Undef, false
	}
	for _, p := range []string{"/ipfs/", "/memory/", "/file/"} {
		if rest, ok := strings.CutPrefix(r.URL.Path, p); ok {
			ref, _, _ := strings.Cut(rest, "/")
			c, err := cid.Decode(ref)
			if err != nil || c.Prefix().MhType == multihash.IDENTITY {
				return cid.Undef, false // the API says what is wrong, or answers from the CID
			}
			return c, true
		}
	}
	return cid.Undef, false
}

// hasBlock reports whether this member stores block b, or forgot it (it
// then answers 410 itself).
func (c *Cluster) hasBlock(b cid.Cid) bool {
	ok := false
	_ = c.self.Store().View(func(r store.Reader) error {
		if ok, _ = r.Has(store.BlockKey(b)); !ok {
			ok, _ = r.Has(store.TombstoneKey(b))
		}
		return nil
	})
	return ok
}

// fromPeers answers a read by CID this member cannot: from the first
// other member (in the CID's rendezvous order) that has it. Blocks are
// content-addressed: a client verifies what it gets (the gateway's
// answers are the blocks themselves).
func (c *Cluster) fromPeers(w http.ResponseWriter, r *http.Request, b cid.Cid, next http.Handler) {
	var ids []string
	for _, m := range c.node.Members() {
		if m.ID != c.node.self.ID {
			ids = append(ids, m.ID)
		}
	}
	for _, id := range Rank(b.String(), ids) {
		m, ok := c.node.Member(id)
		if !ok {
			continue
		}
		req, err := c.onBehalf(r.Context(), r, r.Method, m, r.URL.RequestURI(), nil)
		if err != nil {
			continue
		}
		resp, err := c.client.Transport.RoundTrip(req)
		if err != nil {
			continue
		}
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			continue
		}
		verify := c.relayedVerifier(r, m, b, resp.Header.Get("Content-Type"))
		if resp.StatusCode == http.StatusOK && r.Method == http.MethodGet && verify != nil {
			// Relayed only once what it names by CID verifies (verify.go).
			body, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerBody))
			resp.Body.Close()
			if err == nil {
				err = verify(body)
			}
			if err != nil {
				c.log.Warn("a member answered content that does not verify", "member", id, "cid", b, "path", r.URL.Path, "err", err)
				continue
			}
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body)
			return
		}
		copyResponse(w, resp)
		return
	}
	next.ServeHTTP(w, r) // no member has it: the API's own answer (404)
}

// rawMediaType is a block's media type (api.RawMediaType), carMediaType
// a CAR's (api.CARMediaType).
const (
	rawMediaType = "application/vnd.ipld.raw"
	carMediaType = "application/vnd.ipld.car"
)

// verifyCAR checks that body is a CAR v1 whose every block hashes to its
// CID and that holds block c.
func verifyCAR(c cid.Cid, body []byte) error {
	n, k := binary.Uvarint(body)
	if k <= 0 || n == 0 || n > uint64(len(body)-k) {
		return fmt.Errorf("%w: not a CAR: its header's length is malformed", base.ErrCorrupt)
	}
	rest, found := body[k+int(n):], false
	for len(rest) > 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n == 0 || n > uint64(len(rest)-k) {
			return fmt.Errorf("%w: a CAR section's length is malformed or past the end", base.ErrCorrupt)
		}
		sec := rest[k : k+int(n)]
		rest = rest[k+int(n):]
		m, bc, err := cid.CidFromBytes(sec)
		if err != nil {
			return fmt.Errorf("%w: a CAR section's CID: %v", base.ErrCorrupt, err)
		}
		if err := verifyBlock(bc, sec[m:]); err != nil {
			return fmt.Errorf("block %s of the CAR: %w", bc, err)
		}
		found = found || bc.Equals(c)
	}
	if !found {
		return fmt.Errorf("%w: the CAR lacks block %s", base.ErrCorrupt, c)
	}
	return nil
}

// verifyBlock checks that body is the block c names.
func verifyBlock(c cid.Cid, body []byte) error {
	got, err := c.Prefix().Sum(body)
	if err != nil {
		return err
	}
	if !got.Equals(c) {
		return fmt.Errorf("%w: the block hashes to %s", base.ErrCorrupt, got)
	}
	return nil
}

// flushWriter flushes after every write (streamed CARs).
type flushWriter struct{ w http.ResponseWriter }

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

// sonaOf finds the sona a request is about: a canonical uuid, or "".
func (c *Cluster) sonaOf(r *http.Request) (string, error) {
	p := r.URL.Path
	if backboneRoute(p) {
		return c.backbone.Uuid, nil // the backbone's and its conflicts' routes go to its owner
	}
	if rest, ok := strings.CutPrefix(p, "/sona/"); ok {
		ref, _, _ := strings.Cut(rest, "/")
		return c.sonaRef(r.Context(), ref)
	}
	switch {
	case r.Method == http.MethodPost && (p == "/memories" || p == "/mcp" || p == "/forget"):
		if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
			return "", nil
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, c.maxBody+1)) // the API refuses what is over
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		// POST /memories and POST /forget name their sona; an MCP tool
		// call (MCP is served statelessly, so any member can take any
		// call) in its arguments. A forget goes to the sona's owner, which
		// resolves the sona and carries the forget out on every member.
		var probe struct {
			Sona   string `json:"sona"`
			Method string `json:"method"`
			Params struct {
				Arguments struct {
					Sona string `json:"sona"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &probe) != nil {
			return "", nil
		}
		if p == "/mcp" {
			if probe.Method != "tools/call" {
				return "", nil
			}
			probe.Sona = probe.Params.Arguments.Sona
		}
		return c.sonaRef(r.Context(), probe.Sona)
	case r.Method == http.MethodPost && p == "/files", r.Method == http.MethodGet && (p == "/memories/list" || p == "/export"):
		return c.sonaRef(r.Context(), r.URL.Query().Get("sona"))
	}
	return "", nil
}

// sonaRef turns a sona reference (a uuid in any spelling, or a name) into
// a uuid: a name through etcd's names, when exactly one sona has it; else
// "".
func (c *Cluster) sonaRef(ctx context.Context, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	if u, ok := memchain.CanonicalUUID(ref); ok {
		return u, nil
	}
	if strings.Contains(ref, "/") || !c.node.Healthy() {
		return "", nil
	}
	rctx, cancel := c.node.request(ctx)
	defer cancel()
	prefix := c.node.keys.names(ref)
	resp, err := c.node.client.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(2))
	if err != nil {
		c.node.failed()
		return "", nil // the API resolves it locally
	}
	if len(resp.Kvs) != 1 {
		return "", nil // none or ambiguous: the API says so
	}
	return strings.TrimPrefix(string(resp.Kvs[0].Key), prefix), nil
}

// placement is the member to serve a request about sona: its owner; with
// none, the first live member (this one first) that holds its chain; this
// member for a sona etcd does not know. With etcd unavailable, reads are
// served here when this member holds the sona; writes fail.
func (c *Cluster) placement(ctx context.Context, sona string, read bool) (Member, error) {
	self := c.node.self
	if c.chains.holds(sona) {
		c.lastOwner.Store(sona, self.ID)
		return self, nil
	}
	if !c.node.Healthy() {
		return c.placeWithoutEtcd(sona, read, nil)
	}
	owner, head, err := c.ownerAndHead(ctx, sona)
	if errors.Is(err, ErrEtcdUnavailable) {
		return c.placeWithoutEtcd(sona, read, err)
	}
	if err != nil {
		return Member{}, err
	}
	if owner != "" {
		c.lastOwner.Store(sona, owner)
		if owner == self.ID {
			return self, nil
		}
		if m, ok := c.node.Member(owner); ok {
			return m, nil
		}
		return Member{}, fmt.Errorf("%w: the owner of sona %s (member %s) is leaving; retry", ErrNoReplicas, sona, owner)
	}
	if head == nil {
		return self, nil // unknown to the cluster: registered here if this member holds it
	}
	if slices.Contains(head.Replicas, self.ID) {
		return self, nil
	}
	var live []string
	for _, id := range head.Replicas {
		if _, ok := c.node.Member(id); ok {
			live = append(live, id)
		}
	}
	if len(live) == 0 {
		return Member{}, fmt.Errorf("%w: no live member holds sona %s (held by %v)", ErrNoReplicas, sona, head.Replicas)
	}
	m, _ := c.node.Member(Rank(sona, live)[0])
	return m, nil
}

// Tends reports whether this member does sona's upkeep writes — the
// heartbeat's merges and folds, a dream's insights (actors.Options.Tends):
// it owns the sona, or nobody does and it is the first live member, by
// rendezvous, of those the sona's head names (a sona etcd does not know is
// tended by the member that holds it). So each sona has one tending member
// while the members agree on who is live, and a member's heartbeat never
// takes a sona over from its owner or from the member it would be routed
// to. The writes are fenced like any other: a member that believes
// wrongly that it tends a sona writes nothing. With etcd unavailable,
// nobody tends.
func (c *Cluster) Tends(ctx context.Context, sona string) bool {
	self := c.node.self
	owner, head, err := c.ownerAndHead(ctx, sona)
	switch {
	case err != nil:
		return false
	case owner != "":
		return owner == self.ID
	case head == nil:
		return true
	}
	var live []string
	for _, id := range head.Replicas {
		if _, ok := c.node.Member(id); ok || id == self.ID {
			live = append(live, id)
		}
	}
	return len(live) > 0 && Rank(sona, live)[0] == self.ID
}

// ownerAndHead reads sona's owner ("" when it has none) and head (nil
// when etcd does not know the sona) in one etcd request; the error is
// ErrEtcdUnavailable when etcd does not answer.
func (c *Cluster) ownerAndHead(ctx context.Context, sona string) (string, *Head, error) {
	rctx, cancel := c.node.request(ctx)
	defer cancel()
	k := c.node.keys
	resp, err := c.node.client.Txn(rctx).Then(clientv3.OpGet(k.owner(sona)), clientv3.OpGet(k.head(sona))).Commit()
	if err != nil {
		c.node.failed()
		return "", nil, fmt.Errorf("%w: %v", ErrEtcdUnavailable, err)
	}
	c.node.answered()
	owner := ""
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
		owner = string(kvs[0].Value)
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return owner, nil, nil
	}
	var head Head
	if err := json.Unmarshal(kvs[0].Value, &head); err != nil {
		return owner, nil, fmt.Errorf("%w: head of %s in etcd: %v", base.ErrCorrupt, sona, err)
	}
	return owner, &head, nil
}

// placeWithoutEtcd places a request while etcd does not answer: a read
// goes to the sona's owner as last seen, or is served here if this member
// holds the sona; a write fails.
func (c *Cluster) placeWithoutEtcd(sona string, read bool, cause error) (Member, error) {
	self := c.node.self
	if read {
		if id, ok := c.lastOwner.Load(sona); ok {
			if id == self.ID {
				return self, nil
			}
			if m, ok := c.node.Member(id.(string)); ok {
				return m, nil
			}
		}
		if l, _, err := localLength(c.self, sona); err == nil && l >= 0 {
			return self, nil
		}
	}
	msg := fmt.Sprintf("%s sona %s", map[bool]string{true: "cannot read", false: "writes are refused to"}[read], sona)
	if cause != nil {
		msg += fmt.Sprintf(" (%v)", cause)
	}
	return Member{}, fmt.Errorf("%w: %s", ErrEtcdUnavailable, msg)
}

// forward proxies r to member to, streaming the answer.
func (c *Cluster) forward(w http.ResponseWriter, r *http.Request, sona string, to Member) {
	target, err := url.Parse(to.URL)
	if err != nil {
		apiError(w, fmt.Errorf("%w: member %s has a bad URL %q", base.ErrCorrupt, to.ID, to.URL))
		return
	}
	// A member that stops answering (paused, partitioned) holds its
	// sonas until its lease expires: then the request fails (503, retry)
	// instead of waiting for the client's timeout, and the retry goes to
	// the next owner.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	gone, unwatch := c.node.Gone(to.ID)
	defer unwatch()
	go func() {
		select {
		case <-gone:
			cancel(fmt.Errorf("member %s left the cluster", to.ID))
		case <-ctx.Done():
		}
	}()
	r = r.WithContext(ctx)
	w.Header().Del(servedByHeader) // the owner's answer names it
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(forwardedHeader, c.node.self.ID)
		},
		Transport:     c.client.Transport,
		FlushInterval: -1, // streamed answers (chat events, exports) pass as they come
		ModifyResponse: func(resp *http.Response) error {
			if r.URL.Path == "/export" {
				return nil // streamed; its importer verifies every CID
			}
			return verifyForwarded(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.Header().Set(servedByHeader, c.node.self.ID)
			if errors.Is(err, base.ErrCorrupt) {
				c.log.Warn("a member's answer does not verify", "member", to.ID, "sona", sona, "path", r.URL.Path, "err", err)
				apiError(w, fmt.Errorf("member %s answered content that does not verify: %w", to.ID, err))
				return
			}
			if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
				err = cause
			}
			c.log.Debug("a forwarded request failed", "sona", sona, "member", to.ID, "path", r.URL.Path, "err", err)
			apiError(w, fmt.Errorf("%w: sona %s is served by member %s at %s, which does not answer (%v); retry", ErrNoReplicas, sona, to.ID, to.URL, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

// apiError writes err in the API's error shape with its status.
func apiError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal"
	switch {
	case errors.Is(err, ErrEtcdUnavailable), errors.Is(err, ErrNoReplicas), errors.Is(err, ErrFenced), errors.Is(err, ErrNotOwner):
		status, code = http.StatusServiceUnavailable, "unavailable"
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, base.ErrCorrupt):
		code = "corrupt"
	}
	peerError(w, status, code, err.Error())
}

// idempotencyHeader is api.IdempotencyHeader (this package does not
// import the API).
const idempotencyHeader = "Idempotency-Key"
