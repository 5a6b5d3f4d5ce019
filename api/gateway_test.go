package api_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/node/basicnode"
	"github.com/ipld/go-ipld-prime/traversal"
)

// The IPFS trustless gateway, GET and HEAD /ipfs/{cid}[/path], checked
// as a client that trusts nothing would: every block of every answer is
// re-hashed against its CID.

// gatewayDAG is a sona whose chain makes a small DAG: a text, a memory
// with an edge to it (so the text is reached twice from the head), a file
// memory and its raw block.
type gatewayDAG struct {
	sona               string
	text, linked, file string // memory CIDs
	raw                string // the file's raw block
	fileBytes          []byte
	head               string   // the head ACT
	acts, mems         []string // the chain's ACTs and memories
}

func newGatewayDAG(t *testing.T, h *harness) *gatewayDAG {
	t.Helper()
	d := &gatewayDAG{sona: h.newSona("alice"), fileBytes: []byte("the file's bytes")}
	d.text = h.insertText(d.sona, "The shed key hangs by the door.")
	d.linked = str(t, h.insert(map[string]any{
		"sona":  d.sona,
		"data":  map[string]any{"kind": "text", "content": "Bob moved the key."},
		"edges": []any{map[string]any{"target": map[string]any{"/": d.text}, "weight": 0.5}},
	})["cid"])
	d.raw = h.putFile(d.fileBytes)
	d.file = str(t, h.insert(map[string]any{
		"sona": d.sona,
		"data": map[string]any{"kind": "file", "name": "key.txt", "mimeType": "text/plain", "content": map[string]any{"/": d.raw}},
	})["cid"])
	page, err := h.app.Self.Sonas.Chain(d.sona, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Items {
		d.acts = append(d.acts, e.Act.String())
		d.mems = append(d.mems, e.Memory.String())
	}
	d.head = str(t, h.sona(d.sona)["head"])
	if d.head != d.acts[len(d.acts)-1] {
		t.Fatalf("head %s is not the last ACT %s", d.head, d.acts[len(d.acts)-1])
	}
	return d
}

// block returns the stored bytes of block c.
func (h *harness) block(c string) []byte {
	h.t.Helper()
	b, err := h.app.Self.Block(cid.MustParse(c))
	if err != nil {
		h.t.Fatalf("block %s: %v", c, err)
	}
	return b
}

// readCAR parses a CAR v1 answer and re-hashes every block; it returns
// the roots and the blocks' CIDs in order.
func readCAR(t *testing.T, r response) (roots []string, order []string) {
	t.Helper()
	roots, order, _ = readCARData(t, r.body)
	return roots, order
}

// readCARData parses a CAR v1 and re-hashes every block; it returns the
// roots, the blocks' CIDs in order and their bytes. It reads the format
// itself (the spec, ipld.io/specs/transport/car/carv1, in a few lines), so
// the server's writer is not checked by the server's own reader.
func readCARData(t *testing.T, body []byte) (roots []string, order []string, data map[string][]byte) {
	t.Helper()
	roots, sections, err := parseCARv1(body)
	if err != nil {
		t.Fatalf("not a CAR v1: %v", err)
	}
	data = map[string][]byte{}
	for _, s := range sections {
		c, err := cid.Cast(s.cid)
		if err != nil {
			t.Fatalf("CAR block %d: %v", len(order), err)
		}
		sum, err := c.Prefix().Sum(s.data)
		if err != nil || !sum.Equals(c) {
			t.Fatalf("CAR block %s does not verify: its bytes hash to %s (%v)", c, sum, err)
		}
		order = append(order, c.String())
		data[c.String()] = s.data
	}
	return roots, order, data
}

type carSection struct{ cid, data []byte }

// parseCARv1 splits a CAR v1 into its roots and sections.
func parseCARv1(body []byte) (roots []string, sections []carSection, err error) {
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return nil, fmt.Errorf("a length at byte %d is malformed or runs past the end", len(body))
		}
		out := body[k : k+int(n)]
		body = body[k+int(n):]
		return out, nil
	}
	header, err := next()
	if err != nil {
		return nil, nil, err
	}
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dagcbor.Decode(nb, bytes.NewReader(header)); err != nil {
		return nil, nil, fmt.Errorf("header: %v", err)
	}
	h := nb.Build()
	if v, err := h.LookupByString("version"); err != nil {
		return nil, nil, fmt.Errorf("header without version")
	} else if n, _ := v.AsInt(); n != 1 {
		return nil, nil, fmt.Errorf("version %d", n)
	}
	rs, err := h.LookupByString("roots")
	if err != nil {
		return nil, nil, fmt.Errorf("header without roots")
	}
	for it := rs.ListIterator(); it != nil && !it.Done(); {
		_, r, err := it.Next()
		if err != nil {
			return nil, nil, err
		}
		l, err := r.AsLink()
		if err != nil {
			return nil, nil, err
		}
		roots = append(roots, l.String())
	}
	for len(body) > 0 {
		sec, err := next()
		if err != nil {
			return nil, nil, err
		}
		k, _, err := cid.CidFromBytes(sec)
		if err != nil {
			return nil, nil, fmt.Errorf("section %d: %v", len(sections), err)
		}
		sections = append(sections, carSection{cid: sec[:k], data: sec[k:]})
	}
	return roots, sections, nil
}

func set(cs ...[]string) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

const carType = "application/vnd.ipld.car; version=1; order=dfs; dups=n"

func TestGatewayRawBlocks(t *testing.T) {
	h := newHarness(t)
	d := newGatewayDAG(t, h)
	for _, c := range []string{d.text, d.file, d.raw, d.head} {
		for _, how := range []struct{ name, query, accept string }{
			{"accept", "", "application/vnd.ipld.raw"},
			{"accept list", "", "text/html;q=0.5, application/vnd.ipld.raw"},
			{"format", "?format=raw", ""},
		} {
			t.Run(how.name+"/"+c, func(t *testing.T) {
				r := h.do("GET", "/ipfs/"+c+how.query, nil, "Accept", how.accept)
				if r.status != 200 {
					t.Fatalf("%s", r)
				}
				if !bytes.Equal(r.body, h.block(c)) {
					t.Fatalf("the body is not the stored block")
				}
				want := cid.MustParse(c)
				if sum, err := want.Prefix().Sum(r.body); err != nil || !sum.Equals(want) {
					t.Fatalf("the body hashes to %s, want %s (%v)", sum, want, err)
				}
				wantHeaders(t, r, "application/vnd.ipld.raw", `"`+c+`.raw"`)
				if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
					t.Fatalf("Content-Length %q for %d bytes", cl, len(r.body))
				}
			})
		}
	}
}

func wantHeaders(t *testing.T, r response, contentType, etag string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != contentType {
		t.Fatalf("Content-Type %q, want %q", ct, contentType)
	}
	if cc := r.header.Get("Cache-Control"); cc != "public, max-age=29030400, immutable" {
		t.Fatalf("Cache-Control %q", cc)
	}
	if etag != "" && r.header.Get("Etag") != etag {
		t.Fatalf("ETag %q, want %q", r.header.Get("Etag"), etag)
	}
	if r.header.Get("Etag") == "" {
		t.Fatal("no ETag")
	}
}

// links returns the CIDs a block links to (none for a raw block).
func links(t *testing.T, c string, data []byte) []string {
	t.Helper()
	if cid.MustParse(c).Prefix().Codec != cid.DagCBOR {
		return nil
	}
	nb := basicnode.Prototype.Any.NewBuilder()
	if err := dagcbor.Decode(nb, bytes.NewReader(data)); err != nil {
		t.Fatalf("decode %s: %v", c, err)
	}
	ls, err := traversal.SelectLinks(nb.Build())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.(cidlink.Link).Cid.String())
	}
	return out
}

// verifiable checks that a CAR streams in an order a client can verify
// as it reads: the first block is the root and every later block is
// linked from a block before it.
func verifiable(t *testing.T, h *harness, root string, blocks []string) {
	t.Helper()
	if len(blocks) == 0 || blocks[0] != root {
		t.Fatalf("the CAR does not start with its root %s: %v", root, blocks)
	}
	linked := map[string]bool{}
	for i, b := range blocks {
		if i > 0 && !linked[b] {
			t.Fatalf("block %d (%s) is not linked from any block before it", i, b)
		}
		for _, l := range links(t, b, h.block(b)) {
			linked[l] = true
		}
	}
}

func TestGatewayCAR(t *testing.T) {
	h := newHarness(t)
	d := newGatewayDAG(t, h)
	all := set(d.acts, d.mems, []string{d.raw})

	for _, tc := range []struct {
		name, path, accept string
		root               string
		want               []string
	}{
		{"all by format", "/ipfs/" + d.head + "?format=car", "", d.head, all},
		{"all by Accept", "/ipfs/" + d.head, "application/vnd.ipld.car", d.head, all},
		{"all explicit", "/ipfs/" + d.head + "?dag-scope=all", carType, d.head, all},
		{"block", "/ipfs/" + d.head + "?format=car&dag-scope=block", "", d.head, []string{d.head}},
		{"entity of a dag-cbor block", "/ipfs/" + d.linked + "?format=car&dag-scope=entity", "", d.linked, []string{d.linked}},
		{"entity of a raw block", "/ipfs/" + d.raw + "?format=car&dag-scope=entity", "", d.raw, []string{d.raw}},
		{"all from a memory", "/ipfs/" + d.linked + "?format=car", "", d.linked, []string{d.linked, d.text}},
		// Path traversal through dag-cbor links: the blocks on the path,
		// then the scope at its end.
		{"path to the ACT's memory", "/ipfs/" + d.head + "/memory?format=car&dag-scope=block", "", d.head, []string{d.head, d.file}},
		{"path through an edge", "/ipfs/" + d.linked + "/edges/0/target?format=car&dag-scope=block", "", d.linked, set([]string{d.linked, d.text})},
		{"path to a file's bytes", "/ipfs/" + d.file + "/data/content?format=car", "", d.file, set([]string{d.file, d.raw})},
		{"path back the chain", "/ipfs/" + d.head + "/prev/prev?format=car", "", d.head, set(d.acts[:1], d.acts[1:], d.mems[:1])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("GET", tc.path, nil, "Accept", tc.accept)
			if r.status != 200 {
				t.Fatalf("%s", r)
			}
			wantHeaders(t, r, carType, "")
			_, blocks := readCAR(t, r)
			if got := set(blocks); !slices.Equal(got, set(tc.want)) {
				t.Fatalf("blocks %v, want %v", got, set(tc.want))
			}
			if len(blocks) != len(set(blocks)) {
				t.Fatalf("dups=n, but a block came twice: %v", blocks)
			}
			verifiable(t, h, tc.root, blocks)
		})
	}

	t.Run("dups=y", func(t *testing.T) {
		r := h.do("GET", "/ipfs/"+d.head, nil, "Accept", "application/vnd.ipld.car; version=1; order=dfs; dups=y")
		if r.status != 200 {
			t.Fatalf("%s", r)
		}
		wantHeaders(t, r, "application/vnd.ipld.car; version=1; order=dfs; dups=y", "")
		_, blocks := readCAR(t, r)
		// The text is reached from its ACT and from the edge of the memory
		// after it: it comes twice.
		if !slices.Equal(set(blocks), all) || len(blocks) <= len(all) {
			t.Fatalf("dups=y: %d blocks %v, want the %d of the DAG with the text twice", len(blocks), blocks, len(all))
		}
		verifiable(t, h, d.head, blocks)
	})

	t.Run("ETag and 304", func(t *testing.T) {
		r := h.do("GET", "/ipfs/"+d.head+"?format=car", nil)
		etag := r.header.Get("Etag")
		again := h.do("GET", "/ipfs/"+d.head+"?format=car", nil, "If-None-Match", etag)
		if again.status != 304 || len(again.body) != 0 {
			t.Fatalf("If-None-Match %s: %s", etag, again)
		}
		other := h.do("GET", "/ipfs/"+d.head+"?format=car&dag-scope=block", nil)
		if other.header.Get("Etag") == etag {
			t.Fatalf("dag-scope=block and all share the ETag %s", etag)
		}
	})
}

func TestGatewayHEAD(t *testing.T) {
	h := newHarness(t)
	d := newGatewayDAG(t, h)
	r := h.do("HEAD", "/ipfs/"+d.text, nil, "Accept", "application/vnd.ipld.raw")
	if r.status != 200 || len(r.body) != 0 {
		t.Fatalf("HEAD raw: %s", r)
	}
	wantHeaders(t, r, "application/vnd.ipld.raw", `"`+d.text+`.raw"`)
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(h.block(d.text))) {
		t.Fatalf("HEAD Content-Length %q, the block has %d bytes", cl, len(h.block(d.text)))
	}
	r = h.do("HEAD", "/ipfs/"+d.head+"?format=car", nil)
	if r.status != 200 || len(r.body) != 0 {
		t.Fatalf("HEAD car: %s", r)
	}
	wantHeaders(t, r, carType, "")
	unknown, _ := cid.Prefix{Version: 1, Codec: cid.DagCBOR, MhType: 0x12, MhLength: -1}.Sum([]byte("nothing"))
	if r := h.do("HEAD", "/ipfs/"+unknown.String()+"?format=raw", nil); r.status != 404 {
		t.Fatalf("HEAD of an unknown CID: %s", r)
	}
}

func TestGatewayErrors(t *testing.T) {
	h := newHarness(t)
	d := newGatewayDAG(t, h)
	unknown, _ := cid.Prefix{Version: 1, Codec: cid.DagCBOR, MhType: 0x12, MhLength: -1}.Sum([]byte("nothing"))
	for _, tc := range []struct {
		name, path, accept string
		status             int
		code               string
	}{
		{"no Accept", "/ipfs/" + d.text, "", 406, "not_acceptable"},
		{"Accept JSON", "/ipfs/" + d.text, "application/json", 406, "not_acceptable"},
		{"Accept any", "/ipfs/" + d.text, "*/*", 406, "not_acceptable"},
		{"format json", "/ipfs/" + d.text + "?format=json", "", 406, "not_acceptable"},
		{"raw has no path", "/ipfs/" + d.head + "/memory?format=raw", "", 406, "not_acceptable"},
		{"malformed CID", "/ipfs/not-a-cid", "application/vnd.ipld.raw", 400, "invalid_cid"},
		{"malformed CID, CAR", "/ipfs/bafyNOPE/x?format=car", "", 400, "invalid_cid"},
		{"unknown CID, raw", "/ipfs/" + unknown.String(), "application/vnd.ipld.raw", 404, "not_found"},
		{"unknown CID, CAR", "/ipfs/" + unknown.String() + "?format=car", "", 404, "not_found"},
		{"bad dag-scope", "/ipfs/" + d.head + "?format=car&dag-scope=most", "", 400, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.do("GET", tc.path, nil, "Accept", tc.accept), tc.status, tc.code)
		})
	}
	wantError(t, h.do("POST", "/ipfs/"+d.text, []byte("x")), 405, "method_not_allowed")

	// A path that names no field: the CAR proves it, with the blocks up to
	// where the path ends.
	r := h.do("GET", "/ipfs/"+d.head+"/nope?format=car", nil)
	if r.status != 200 {
		t.Fatalf("%s", r)
	}
	if _, blocks := readCAR(t, r); !slices.Equal(blocks, []string{d.head}) {
		t.Fatalf("the CAR for a missing field holds %v, want the head that lacks it", blocks)
	}
}

// The store keys blocks by multihash: a block is served under any CID of
// its hash, and the body still hashes to the CID asked for.
func TestGatewayAnyCIDOfAHash(t *testing.T) {
	h := newHarness(t)
	d := newGatewayDAG(t, h)
	asRaw := cid.NewCidV1(cid.Raw, cid.MustParse(d.head).Hash()).String()
	r := h.do("GET", "/ipfs/"+asRaw+"?format=raw", nil)
	if r.status != 200 || !bytes.Equal(r.body, h.block(d.head)) {
		t.Fatalf("the head's block under a raw CID: %s", r)
	}
	wantHeaders(t, r, "application/vnd.ipld.raw", `"`+asRaw+`.raw"`)
	// As a CAR root it is a raw block: it links to nothing.
	if _, blocks := readCAR(t, h.do("GET", "/ipfs/"+asRaw+"?format=car", nil)); !slices.Equal(blocks, []string{asRaw}) {
		t.Fatalf("the CAR of a raw CID holds %v", blocks)
	}
}
