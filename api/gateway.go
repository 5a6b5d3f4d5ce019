package api

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// The IPFS trustless gateway, GET and HEAD /ipfs/{cid}[/path]
// (https://specs.ipfs.tech/http-gateways/trustless-gateway/), served from
// the store alone: a block as application/vnd.ipld.raw, or a CAR v1
// (application/vnd.ipld.car; order=dfs; dups=n or y) of the blocks along a
// path through DAG-CBOR links and then, by dag-scope, the block at its end
// or everything under it. Blocks are read through the store's verifying
// door as the CAR is written — nothing is gathered first, so a CAR of a
// chain of millions of ACTs streams in the memory of its traversal's
// stack and seen set (a CID a block). An error before the first byte is a
// JSON error; after it, the response is aborted (the connection is cut,
// the chunked body never ends), so a client never takes a short CAR for a
// whole one.

// RawMediaType is a single block's media type.
const RawMediaType = "application/vnd.ipld.raw"

// gatewayCacheControl: what a CID names never changes.
const gatewayCacheControl = "public, max-age=29030400, immutable"

// gatewayRequest is what a gateway request asks for.
type gatewayRequest struct {
	root cid.Cid
	path []string // the segments after the CID, unescaped
	car  bool     // a CAR; else the raw block
	// The CAR's shape: dag-scope (block, entity or all), whether blocks
	// reached again are sent again, and entity-bytes as asked (it only
	// changes the ETag: each of our entities is one block).
	scope       string
	dups        bool
	entityBytes string
}

// serveGateway answers GET and HEAD /ipfs/{cid}[/path].
func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	req, err := parseGatewayRequest(r, s.cfg.Server.MaxPathSegments)
	if err != nil {
		s.fail(w, err)
		return
	}
	store := s.self.Store()
	if ok, err := hasBlock(store, req.root); err != nil {
		s.fail(w, err)
		return
	} else if !ok {
		if gone, err := store.Forgotten(req.root); err != nil || gone {
			if err == nil {
				err = fmt.Errorf("%w: block %s was forgotten", base.ErrForgotten, req.root)
			}
			s.fail(w, err)
			return
		}
		if onlyIfCached(r) {
			writeError(w, http.StatusPreconditionFailed, "not_cached", fmt.Sprintf("block %s is not in this store (Cache-Control: only-if-cached)", req.root))
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("block %s is not in this store", req.root))
		return
	}
	if req.car {
		s.serveCAR(w, r, req)
	} else {
		s.serveRaw(w, r, req)
	}
}

// onlyIfCached reports whether the request says Cache-Control:
// only-if-cached (answer only what is at hand: 412 for a missing block).
func onlyIfCached(r *http.Request) bool {
	for _, v := range r.Header.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), "only-if-cached") {
				return true
			}
		}
	}
	return false
}

// parseGatewayRequest reads the path, the format (?format= over Accept)
// and, for a CAR, its parameters.
func parseGatewayRequest(r *http.Request, maxSegments int) (*gatewayRequest, error) {
	root, segs, err := parseGatewayPath(r.URL.EscapedPath(), maxSegments)
	if err != nil {
		return nil, err
	}
	car, accepted, err := negotiate(r.URL.Query().Get("format"), r.Header.Values("Accept"))
	if err != nil {
		return nil, err
	}
	req := &gatewayRequest{root: root, path: segs, car: car}
	if !car {
		if len(segs) > 0 {
			return nil, &apiError{errNotAcceptable, "not_acceptable", fmt.Sprintf(
				"a raw block (application/vnd.ipld.raw) is asked for by CID alone and takes no path: ask for /ipfs/%s, or for a CAR (?format=car) to walk the path, with the blocks that prove each step", root)}
		}
		return req, nil
	}
	if err := req.carParams(r.URL.Query(), accepted); err != nil {
		return nil, err
	}
	return req, nil
}

// parseGatewayPath splits an escaped request path /ipfs/{cid}[/seg…] into
// the CID and the unescaped segments after it. A trailing slash is
// ignored; an empty segment, a malformed CID or escape, or more than
// maxSegments segments are 400s. The segments are counted before anything
// is split, so an over-long path costs nothing.
func parseGatewayPath(p string, maxSegments int) (cid.Cid, []string, error) {
	rest, ok := strings.CutPrefix(p, "/ipfs/")
	if !ok {
		return cid.Undef, nil, badRequest("invalid_path", "a gateway path is /ipfs/{cid}[/path], not %q", clip(p, 100))
	}
	rest = strings.TrimSuffix(rest, "/")
	n := strings.Count(rest, "/")
	if n > maxSegments {
		return cid.Undef, nil, badRequest("path_too_long", "the path has %d segments after the CID; this gateway walks at most %d (server.max_path_segments)", n, maxSegments)
	}
	first, tail, hasTail := strings.Cut(rest, "/")
	raw, err := url.PathUnescape(first)
	if err != nil {
		return cid.Undef, nil, badRequest("invalid_cid", "malformed CID %q: %v", clip(first, 100), err)
	}
	c, err := cid.Decode(raw)
	if err != nil {
		return cid.Undef, nil, badRequest("invalid_cid", "malformed CID %q: %v", clip(raw, 100), err)
	}
	if !hasTail {
		return c, nil, nil
	}
	segs := make([]string, 0, n)
	for seg := range strings.SplitSeq(tail, "/") {
		if seg == "" {
			return cid.Undef, nil, badRequest("invalid_path", "the path has an empty segment")
		}
		u, err := url.PathUnescape(seg)
		if err != nil {
			return cid.Undef, nil, badRequest("invalid_path", "path segment %q: %v", clip(seg, 100), err)
		}
		segs = append(segs, u)
	}
	return c, segs, nil
}

// negotiate picks raw or CAR: ?format= when given, else the Accept entry
// of highest q (the first of equals) that is either, a CAR entry only with
// parameters this gateway honours. accepted holds the parameters of the
// best such CAR entry, if any. Nothing else is served: 406.
func negotiate(format string, accept []string) (car bool, accepted map[string]string, err error) {
	var best string // the best format Accept offers
	q, carQ := 0.0, 0.0
	for _, part := range accept {
		for entry := range strings.SplitSeq(part, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(entry))
			if err != nil || (mt != RawMediaType && mt != CARMediaType) {
				continue
			}
			eq := 1.0
			if v, ok := params["q"]; ok {
				if eq, err = strconv.ParseFloat(v, 64); err != nil || eq < 0 || eq > 1 {
					continue
				}
				delete(params, "q")
			}
			if mt == CARMediaType {
				if _, err := carVariant(params); err != nil {
					continue
				}
				if eq > carQ {
					accepted, carQ = params, eq
				}
			}
			if eq > q {
				best, q = mt, eq
			}
		}
	}
	switch format {
	case "raw":
		return false, nil, nil
	case "car":
		return true, accepted, nil
	case "":
		if best != "" {
			return best == CARMediaType, accepted, nil
		}
	}
	what := "no trustless format was asked for"
	if format != "" {
		what = fmt.Sprintf("format=%s is not served", clip(format, 50))
	}
	return false, nil, &apiError{errNotAcceptable, "not_acceptable", what +
		": this trustless gateway answers application/vnd.ipld.raw (a block) or application/vnd.ipld.car (version=1, order=dfs, dups=y|n), asked for by Accept or ?format=raw|car"}
}

// carVariant checks CAR content type parameters and says whether they ask
// for duplicates.
func carVariant(p map[string]string) (dups bool, err error) {
	if v := p["version"]; v != "" && v != "1" {
		return false, fmt.Errorf("CAR version %q is not served: only version=1", v)
	}
	if v := p["order"]; v != "" && v != "dfs" && v != "unk" {
		return false, fmt.Errorf("CAR order %q is not served: only order=dfs (or unk)", v)
	}
	switch p["dups"] {
	case "", "n":
		return false, nil
	case "y":
		return true, nil
	}
	return false, fmt.Errorf("CAR dups %q: want y or n", p["dups"])
}

// carParams reads dag-scope, entity-bytes and the CAR variant (the
// car-version, car-order and car-dups query parameters over Accept's).
func (req *gatewayRequest) carParams(q url.Values, accepted map[string]string) error {
	req.scope = "all"
	if q.Has("dag-scope") {
		switch v := q.Get("dag-scope"); v {
		case "block", "entity", "all":
			req.scope = v
		default:
			return badRequest("invalid", "dag-scope=%q: want block, entity or all", clip(v, 50))
		}
	}
	if q.Has("entity-bytes") {
		v := q.Get("entity-bytes")
		if err := checkEntityBytes(v); err != nil {
			return badRequest("invalid", "entity-bytes=%q: %v", clip(v, 50), err)
		}
		req.scope, req.entityBytes = "entity", v
	}
	params := map[string]string{}
	for k, v := range accepted {
		params[k] = v
	}
	for _, k := range []string{"version", "order", "dups"} {
		if v := q.Get("car-" + k); v != "" {
			params[k] = v
		}
	}
	dups, err := carVariant(params)
	if err != nil {
		return badRequest("invalid", "%v", err)
	}
	req.dups = dups
	return nil
}

// checkEntityBytes checks entity-bytes=from:to (from an integer, to an
// integer or *, negative counting from the end). Each entity this gateway
// serves is one block, which the range cannot split: the range does not
// change the CAR, only its ETag.
func checkEntityBytes(v string) error {
	from, to, ok := strings.Cut(v, ":")
	if !ok {
		return errors.New("want from:to")
	}
	f, err := strconv.ParseInt(from, 10, 64)
	if err != nil {
		return fmt.Errorf("from: %v", err)
	}
	if to == "*" {
		return nil
	}
	t, err := strconv.ParseInt(to, 10, 64)
	if err != nil {
		return fmt.Errorf("to: %v", err)
	}
	if f >= 0 && t >= 0 && t < f {
		return errors.New("to is before from")
	}
	return nil
}

// etag is the CAR's ETag: the root, then a hash of what shapes the CAR.
func (req *gatewayRequest) etag() string {
	h := fnv.New64a()
	for _, s := range req.path {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	fmt.Fprintf(h, "\x01scope=%s\x01dups=%t\x01bytes=%s", req.scope, req.dups, req.entityBytes)
	return `W/"` + req.root.String() + ".car." + strconv.FormatUint(h.Sum64(), 32) + `"`
}

// etagMatch reports whether If-None-Match names etag (weak comparison).
func etagMatch(ifNoneMatch, etag string) bool {
	for t := range strings.SplitSeq(ifNoneMatch, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(etag, "W/") {
			return true
		}
	}
	return false
}

// gatewayHeaders are every successful answer's headers.
func gatewayHeaders(h http.Header, etag string) {
	h.Set("Etag", etag)
	h.Set("Cache-Control", gatewayCacheControl)
	h.Set("Vary", "Accept")
}

// serveRaw answers the block's bytes.
func (s *Server) serveRaw(w http.ResponseWriter, r *http.Request, req *gatewayRequest) {
	etag := `"` + req.root.String() + `.raw"`
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		gatewayHeaders(w.Header(), etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	data, err := loadBlock(s.self.Store(), req.root)
	if err != nil {
		s.fail(w, err)
		return
	}
	h := w.Header()
	gatewayHeaders(h, etag)
	h.Set("Content-Type", RawMediaType)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Content-Disposition", `attachment; filename="`+req.root.String()+`.bin"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Accept-Ranges", "none") // a part of a block cannot be verified
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(data)
	}
}

// serveCAR resolves the path, then streams the CAR. Whatever fails before
// the first byte is a JSON error; after it, the response is aborted.
func (s *Server) serveCAR(w http.ResponseWriter, r *http.Request, req *gatewayRequest) {
	etag := req.etag()
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		gatewayHeaders(w.Header(), etag)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	store := s.self.Store()
	res, err := resolvePath(store, req.root, req.path)
	if err == nil && res.end.Defined() && req.scope == "all" && !walkable(res.end) {
		err = fmt.Errorf("%w: block %s has codec 0x%x: ask for dag-scope=block", ErrCodec, res.end, res.end.Prefix().Codec)
	}
	if err != nil {
		s.failGateway(w, err)
		return
	}
	h := w.Header()
	gatewayHeaders(h, etag)
	h.Set("Content-Type", carContentType(req.dups))
	h.Set("Content-Disposition", `attachment; filename="`+req.root.String()+`.car"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Accept-Ranges", "none")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	cw := newCARWriter(w)
	err = streamCAR(r.Context(), store, cw, req, res)
	if err == nil {
		err = cw.flush()
	}
	if err != nil {
		if r.Context().Err() != nil {
			s.log.Info("gateway CAR stopped after its first byte: response aborted", "root", req.root, "err", err)
		} else {
			s.log.Error("gateway CAR failed after its first byte: response aborted", "root", req.root, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// failGateway is fail, with a codec the gateway cannot walk a 501.
func (s *Server) failGateway(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrCodec) {
		writeError(w, http.StatusNotImplemented, "not_implemented", err.Error())
		return
	}
	s.fail(w, err)
}

// streamCAR writes the CAR of a resolved path: the header (its root the
// request's CID), the blocks the path was looked up in, then the scope at
// its end — the end block alone (block, entity), or everything under it
// depth-first (all). Blocks come once unless dups; identity CIDs' blocks
// are inside the CIDs that name them and are never sent.
func streamCAR(ctx context.Context, store *store.Store, cw *carWriter, req *gatewayRequest, res *resolved) error {
	if err := cw.header([]cid.Cid{req.root}); err != nil {
		return err
	}
	var seen map[cid.Cid]struct{}
	if !req.dups {
		seen = map[cid.Cid]struct{}{}
	}
	descend := false
	send := func(c cid.Cid) ([]cid.Cid, error) {
		data, err := loadBlock(store, c)
		if errors.Is(err, base.ErrForgotten) {
			return nil, nil // excised: its CID stays in the blocks that name it, its bytes are gone
		}
		if err != nil {
			return nil, err
		}
		if !isIdentity(c) {
			if err := cw.section(c, data); err != nil {
				return nil, err
			}
		}
		if !descend {
			return nil, nil
		}
		return blockLinks(c, data)
	}
	if err := walkDAG(ctx, res.blocks, seen, send); err != nil {
		return err
	}
	descend = req.scope == "all"
	var roots []cid.Cid
	switch {
	case res.end.Defined():
		roots = []cid.Cid{res.end}
	case res.inner != nil && descend:
		var err error
		if roots, err = nodeLinks(res.inner); err != nil {
			return err
		}
	}
	return walkDAG(ctx, roots, seen, send)
}
