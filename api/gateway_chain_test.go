package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/api"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
)

// A sona's chain is as deep as it is long: each ACT links to the one
// before it. These tests walk chains deeper than boxo's 1,024-level limit,
// through the gateway and the CAR export, and break them.

// chainDAG is a long chain: its ACTs and memories in chain order, and the
// raw block of the one file memory halfway along it.
type chainDAG struct {
	sona       string
	acts, mems []cid.Cid
	file       cid.Cid
}

func (d *chainDAG) head() cid.Cid { return d.acts[len(d.acts)-1] }

// all is every block under the head.
func (d *chainDAG) all() []string {
	var out []string
	for _, c := range slices.Concat(d.acts, d.mems, []cid.Cid{d.file}) {
		out = append(out, c.String())
	}
	return set(out)
}

// buildChain appends n memories to a new sona straight through the store,
// 500 appends a transaction (the actors' one durable write an append would
// take minutes). Memory i, for i%10 == 5, has an edge to memory i-5, which
// is so reached twice from the head; memory n/2 is a file.
func buildChain(tb testing.TB, self *memory.Self, n int) *chainDAG {
	tb.Helper()
	ctx := context.Background()
	rec, err := self.Sonas.Create(ctx, "long")
	if err != nil {
		tb.Fatal(err)
	}
	d := &chainDAG{sona: rec.Uuid}
	if d.file, err = self.Chains.PutFile(ctx, []byte("the long chain's file"), ""); err != nil {
		tb.Fatal(err)
	}
	var head *cid.Cid
	var length int64
	for start := 0; start < n; start += 500 {
		var plans []*model.Append
		for i := start; i < min(n, start+500); i++ {
			m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("Step %d of the long chain.", i)}}}
			if i == n/2 {
				m.Data = model.Data{File: &model.FileData{Content: d.file}}
			}
			if i%10 == 5 {
				m.Edges = []model.Edge{{Target: d.mems[i-5], Weight: 0.5}}
			}
			vecs, err := self.Embed(ctx, m.Text())
			if err != nil {
				tb.Fatal(err)
			}
			p, err := self.Chains.Prepare(m, vecs[0], nil)
			if err != nil {
				tb.Fatal(err)
			}
			plan, err := model.PlanAppend(d.sona, head, length, p, self.Clock().Now().Unix())
			if err != nil {
				tb.Fatal(err)
			}
			head, length = plan.Next()
			plans = append(plans, plan)
			d.acts, d.mems = append(d.acts, plan.Act), append(d.mems, p.CID)
		}
		err := self.Store().Update(ctx, func(tx store.Tx) error {
			for _, p := range plans {
				if err := self.Chains.Op(p)(tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// noEvaluation keeps the evaluator from working through thousands of
// memories behind the test.
func noEvaluation(c *config.Config) { c.Evaluation.Mode = "off" }

// tamper replaces the stored bytes of block c (nil deletes it), under the
// store's key for it (memory/doc.go: b/ and the multihash).
func tamper(t *testing.T, h *harness, c cid.Cid, data []byte) {
	t.Helper()
	key := append([]byte("b/"), c.Hash()...)
	err := h.app.Self.Store().WriteBehind(func(txn *badger.Txn) error {
		if data == nil {
			return txn.Delete(key)
		}
		return txn.Set(key, data)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// prevPath is /prev repeated n times.
func prevPath(n int) string { return strings.Repeat("/prev", n) }

func TestGatewayLongChain(t *testing.T) {
	const n = 3000
	h := newHarness(t, quiet, noEvaluation)
	d := buildChain(t, h.app.Self, n)

	t.Run("CAR of the whole chain", func(t *testing.T) {
		r := h.do("GET", "/ipfs/"+d.head().String()+"?format=car", nil)
		if r.status != 200 {
			t.Fatalf("%s", r)
		}
		wantHeaders(t, r, carType, "")
		roots, blocks := readCAR(t, r)
		if !slices.Equal(roots, []string{d.head().String()}) {
			t.Fatalf("roots %v, want the head", roots)
		}
		if len(blocks) != len(d.all()) || !slices.Equal(set(blocks), d.all()) {
			t.Fatalf("%d blocks, want the chain's %d (%d ACTs, %d memories, a file), each once", len(blocks), len(d.all()), n, n)
		}
		verifiable(t, h, d.head().String(), blocks)
	})

	t.Run("dups=y", func(t *testing.T) {
		r := h.do("GET", "/ipfs/"+d.head().String()+"?format=car&car-dups=y", nil)
		if r.status != 200 {
			t.Fatalf("%s", r)
		}
		wantHeaders(t, r, "application/vnd.ipld.car; version=1; order=dfs; dups=y", "")
		_, blocks := readCAR(t, r)
		// Memory i, i%10 == 0, is reached from its ACT and from memory
		// i+5's edge, with what is under it: the file of memory n/2.
		if !slices.Equal(set(blocks), d.all()) || len(blocks) != len(d.all())+n/10+1 {
			t.Fatalf("dups=y: %d blocks, want the %d of the chain and %d again", len(blocks), len(d.all()), n/10+1)
		}
	})

	t.Run("a path of 1,000 segments", func(t *testing.T) {
		r := h.do("GET", "/ipfs/"+d.head().String()+prevPath(1000)+"?format=car&dag-scope=block", nil)
		if r.status != 200 {
			t.Fatalf("%s", r)
		}
		// The 1,000 ACTs the path was looked up in, head first, then the
		// block it ends at.
		_, blocks := readCAR(t, r)
		var want []string
		for i := n - 1; i >= n-1-1000; i-- {
			want = append(want, d.acts[i].String())
		}
		if !slices.Equal(blocks, want) {
			t.Fatalf("%d blocks, want the %d ACTs from the head to seq %d in order", len(blocks), len(want), n-1-1000)
		}
		// And on to that ACT's memory, whose chain of edges goes on to the
		// genesis: dag-scope=all walks it.
		r = h.do("GET", "/ipfs/"+d.head().String()+prevPath(1000)+"/memory?format=car", nil)
		_, blocks = readCAR(t, r)
		at := n - 1 - 1000 // 1999: %10 == 9, no edge
		if !slices.Equal(blocks[len(want):], []string{d.mems[at].String()}) {
			t.Fatalf("the path to a memory does not end with the memory")
		}
		r = h.do("GET", "/ipfs/"+d.head().String()+prevPath(1000-6)+"/memory?format=car", nil)
		if _, blocks = readCAR(t, r); !slices.Equal(blocks[len(want)-6:], []string{d.mems[at+6].String(), d.mems[at+1].String()}) {
			t.Fatalf("the path to a memory with an edge does not end with the memory and its target")
		}
		// The limit: 1,024 segments walk, 1,025 are refused before any read.
		if r := h.do("HEAD", "/ipfs/"+d.head().String()+prevPath(1024)+"?format=car", nil); r.status != 200 {
			t.Fatalf("1,024 segments: %s", r)
		}
		wantError(t, h.do("GET", "/ipfs/"+d.head().String()+prevPath(1025)+"?format=car", nil), 400, "path_too_long")
	})

	t.Run("CAR export", func(t *testing.T) {
		body := h.exportCAR(t)
		roots, order, data := readCARData(t, body)
		if len(roots) != 2 || roots[0] != d.head().String() {
			t.Fatalf("roots %v, want the head and the manifest", roots)
		}
		manifest := roots[1]
		want := slices.Concat(d.all(), []string{manifest}, links(t, manifest, data[manifest]))
		if len(order) != len(set(want)) || !slices.Equal(set(order), set(want)) {
			t.Fatalf("%d blocks, want %d: the chain's and the manifest's, each once", len(order), len(set(want)))
		}
		doc, err := api.ExportFromCAR(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range doc.Sonas {
			if s.Uuid == d.sona && len(s.Chain) != n {
				t.Fatalf("the manifest has %d ACTs of the chain, want %d", len(s.Chain), n)
			}
		}
	})
}

// streamed sends a request and reads the whole body, returning the error
// reading it met, if any.
func (h *harness) streamed(t *testing.T, path string) (int, []byte, error) {
	t.Helper()
	resp, err := h.hc.Get(h.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// wantAborted checks a response started as 200 and was cut short: the
// client's read fails, and what arrived is not a CAR of every block.
func wantAborted(t *testing.T, h *harness, path string, want int) {
	t.Helper()
	status, body, err := h.streamed(t, path)
	if status != 200 {
		t.Fatalf("%s: status %d, want 200 and then an aborted body: %s", path, status, body)
	}
	if err == nil {
		t.Fatalf("%s: %d bytes read to their end: a short CAR looks whole", path, len(body))
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("the aborted read failed with %v", err)
	}
	if _, sections, err := parseCARv1(body); err == nil && len(sections) >= want {
		t.Fatalf("%s: the cut body still parses with %d blocks", path, len(sections))
	}
}

// A block that goes missing or is corrupt halfway down a chain: an error
// before the first byte where it is found before, an aborted transfer
// where it is found after — never a 200 with a well-formed short CAR.
func TestGatewayBrokenChain(t *testing.T) {
	const n = 1500
	h := newHarness(t, quiet, noEvaluation)
	d := buildChain(t, h.app.Self, n)
	head := d.head().String()
	all := len(d.all())

	// An ACT halfway down: the gateway finds it after it has begun.
	mid := d.acts[n/2]
	good := h.block(mid.String())
	tamper(t, h, mid, []byte("not the ACT that hashes to this CID"))
	wantAborted(t, h, "/ipfs/"+head+"?format=car", all)
	wantAborted(t, h, "/ipfs/"+head+"?format=car&car-dups=y", all)
	// A path through it finds it before.
	wantError(t, h.do("GET", "/ipfs/"+head+prevPath(n-1-n/2)+"/memory?format=car", nil), 500, "corrupt")
	// The export reads every DAG-CBOR block before its first byte.
	if err := h.app.Self.Evals.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantError(t, h.get("/export?all=1&format=car"), 500, "corrupt")
	tamper(t, h, mid, good)

	// A memory that is gone.
	gone := d.mems[n/3]
	kept := h.block(gone.String())
	tamper(t, h, gone, nil)
	wantAborted(t, h, "/ipfs/"+head+"?format=car", all)
	wantError(t, h.do("GET", "/ipfs/"+head+prevPath(n-1-n/3)+"/memory?format=car", nil), 404, "not_found")
	if r := h.do("HEAD", "/ipfs/"+head+prevPath(n-1-n/3)+"/memory?format=car", nil); r.status != 404 {
		t.Fatalf("HEAD of a path to a missing block: %s", r)
	}
	wantError(t, h.do("GET", "/ipfs/"+gone.String()+"?format=raw", nil), 404, "not_found")

	tamper(t, h, gone, kept)

	// The file's raw block: the export's snapshot reads it, before the
	// first byte; the gateway when it gets there.
	tamper(t, h, d.file, []byte("a different file of another length"))
	wantError(t, h.get("/export?all=1&format=car"), 500, "corrupt")
	wantAborted(t, h, "/ipfs/"+head+"?format=car", all)
}

func TestGatewayIdentityCIDs(t *testing.T) {
	h := newHarness(t)
	d := newGatewayDAG(t, h)

	// bafkqaaa, the spec's probe: the empty block, inline.
	r := h.do("GET", "/ipfs/bafkqaaa?format=raw", nil)
	if r.status != 200 || len(r.body) != 0 {
		t.Fatalf("%s", r)
	}
	wantHeaders(t, r, "application/vnd.ipld.raw", `"bafkqaaa.raw"`)
	if r := h.do("HEAD", "/ipfs/bafkqaaa", nil, "Accept", "application/vnd.ipld.raw"); r.status != 200 {
		t.Fatalf("HEAD: %s", r)
	}
	r = h.do("GET", "/ipfs/bafkqaaa?format=car", nil)
	if r.status != 200 {
		t.Fatalf("%s", r)
	}
	if roots, blocks := readCAR(t, r); !slices.Equal(roots, []string{"bafkqaaa"}) || len(blocks) != 0 {
		t.Fatalf("CAR of bafkqaaa: roots %v, blocks %v; want the root and no block", roots, blocks)
	}

	// Any identity CID: its bytes are in it.
	inline := []byte("bytes that travel inside their CID")
	c := identityCID(t, cid.Raw, inline)
	if r := h.do("GET", "/ipfs/"+c.String()+"?format=raw", nil); r.status != 200 || string(r.body) != string(inline) {
		t.Fatalf("identity raw: %s", r)
	}
	// A DAG-CBOR block inline that links to a stored memory: the CAR
	// leaves the inline block out and walks its link.
	node := identityCID(t, cid.DagCBOR, dagCBORLink(t, cid.MustParse(d.linked)))
	r = h.do("GET", "/ipfs/"+node.String()+"?format=car", nil)
	if r.status != 200 {
		t.Fatalf("%s", r)
	}
	if _, blocks := readCAR(t, r); !slices.Equal(set(blocks), set([]string{d.linked, d.text})) {
		t.Fatalf("CAR under an inline block: %v, want the memory it links to and its edge's target", blocks)
	}
	// Its path goes through it.
	r = h.do("GET", "/ipfs/"+node.String()+"/m/edges/0/target?format=car&dag-scope=block", nil)
	if _, blocks := readCAR(t, r); !slices.Equal(blocks, []string{d.linked, d.text}) {
		t.Fatalf("path through an inline block: %v", blocks)
	}
}

func TestGatewayRequestErrors(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Server.MaxPathSegments = 3 })
	d := newGatewayDAG(t, h)
	unknown, _ := cid.Prefix{Version: 1, Codec: cid.DagCBOR, MhType: 0x12, MhLength: -1}.Sum([]byte("nothing"))

	// A raw block takes no path, and says why.
	r := h.do("GET", "/ipfs/"+d.head+"/memory?format=raw", nil)
	wantError(t, r, 406, "not_acceptable")
	for _, want := range []string{"takes no path", "?format=car", "/ipfs/" + d.head} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("the raw-with-a-path error does not say %q: %s", want, r.body)
		}
	}
	// The configured path limit.
	if r := h.do("GET", "/ipfs/"+d.head+"/prev/prev/memory?format=car", nil); r.status != 200 {
		t.Fatalf("3 segments: %s", r)
	}
	r = h.do("GET", "/ipfs/"+d.head+"/prev/prev/memory/data?format=car", nil)
	wantError(t, r, 400, "path_too_long")
	if !strings.Contains(string(r.body), "server.max_path_segments") {
		t.Fatalf("the path limit error does not name its setting: %s", r.body)
	}
	for _, tc := range []struct {
		name, path string
		headers    []string
		status     int
		code       string
	}{
		{"no CID", "/ipfs/?format=raw", nil, 400, "invalid_cid"},
		{"car-version=2", "/ipfs/" + d.head + "?format=car&car-version=2", nil, 400, "invalid"},
		{"car-order", "/ipfs/" + d.head + "?format=car&car-order=bfs", nil, 400, "invalid"},
		{"car-dups", "/ipfs/" + d.head + "?format=car&car-dups=maybe", nil, 400, "invalid"},
		{"entity-bytes", "/ipfs/" + d.head + "?format=car&entity-bytes=9:3", nil, 400, "invalid"},
		{"entity-bytes form", "/ipfs/" + d.head + "?format=car&entity-bytes=all", nil, 400, "invalid"},
		{"only a CAR variant not served", "/ipfs/" + d.head, []string{"Accept", "application/vnd.ipld.car; order=bfs"}, 406, "not_acceptable"},
		{"format=ipns-record", "/ipfs/" + d.head + "?format=ipns-record", nil, 406, "not_acceptable"},
		{"only-if-cached", "/ipfs/" + unknown.String() + "?format=raw", []string{"Cache-Control", "only-if-cached"}, 412, "not_cached"},
		{"a link to a missing block", "/ipfs/" + identityCID(t, cid.DagCBOR, dagCBORLink(t, unknown)).String() + "/m?format=car", nil, 404, "not_found"},
		// A stored block under a dag-pb CID: its links cannot be found.
		{"dag-pb", "/ipfs/" + cid.NewCidV1(cid.DagProtobuf, cid.MustParse(d.raw).Hash()).String() + "?format=car", nil, 501, "not_implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.do("GET", tc.path, nil, tc.headers...), tc.status, tc.code)
		})
	}

	// Accept lists: the best variant this gateway serves wins.
	r = h.do("GET", "/ipfs/"+d.head, nil, "Accept", "application/vnd.ipld.car; order=bfs, application/vnd.ipld.car; order=dfs; dups=y; q=0.5, application/vnd.ipld.raw; q=0.4")
	if r.status != 200 || r.header.Get("Content-Type") != "application/vnd.ipld.car; version=1; order=dfs; dups=y" {
		t.Fatalf("Accept list: %s %q", r, r.header.Get("Content-Type"))
	}
	// ?format= wins over Accept.
	r = h.do("GET", "/ipfs/"+d.head+"?format=raw", nil, "Accept", "application/vnd.ipld.car")
	if r.status != 200 || r.header.Get("Content-Type") != "application/vnd.ipld.raw" {
		t.Fatalf("format over Accept: %s", r)
	}
	// entity-bytes: each of our entities is one block.
	r = h.do("GET", "/ipfs/"+d.file+"/data/content?format=car&entity-bytes=0:*", nil)
	if _, blocks := readCAR(t, r); !slices.Equal(blocks, []string{d.file, d.raw}) {
		t.Fatalf("entity-bytes: %v", blocks)
	}
	if r.header.Get("Etag") == h.do("GET", "/ipfs/"+d.file+"/data/content?format=car&dag-scope=entity", nil).header.Get("Etag") {
		t.Fatal("entity-bytes does not change the ETag")
	}
	// A stored block under a dag-pb CID as a block alone is fine.
	pb := cid.NewCidV1(cid.DagProtobuf, cid.MustParse(d.raw).Hash()).String()
	if _, blocks := readCAR(t, h.do("GET", "/ipfs/"+pb+"?format=car&dag-scope=block", nil)); !slices.Equal(blocks, []string{pb}) {
		t.Fatalf("dag-scope=block of a dag-pb CID: %v", blocks)
	}
	// Success headers.
	r = h.do("GET", "/ipfs/"+d.head+"?format=car", nil)
	for k, v := range map[string]string{
		"Content-Disposition":    `attachment; filename="` + d.head + `.car"`,
		"X-Content-Type-Options": "nosniff",
		"Vary":                   "Accept",
	} {
		if got := r.header.Get(k); got != v {
			t.Fatalf("%s: %q, want %q", k, got, v)
		}
	}
	if !strings.HasPrefix(r.header.Get("Etag"), `W/"`+d.head+`.car.`) {
		t.Fatalf("CAR ETag %q", r.header.Get("Etag"))
	}
	if r := h.do("GET", "/ipfs/"+d.head+"?format=raw", nil, "If-None-Match", `"other", "`+d.head+`.raw"`); r.status != 304 {
		t.Fatalf("If-None-Match list: %s", r)
	}
}

// identityCID is the CID of data with the identity multihash.
func identityCID(t *testing.T, codec uint64, data []byte) cid.Cid {
	t.Helper()
	c, err := cid.Prefix{Version: 1, Codec: codec, MhType: 0x00, MhLength: -1}.Sum(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// dagCBORLink encodes {"m": link} as DAG-CBOR.
func dagCBORLink(t *testing.T, link cid.Cid) []byte {
	t.Helper()
	// map(1) "m" tag(42) bytes(0x00 || cid)
	cb := append([]byte{0}, link.Bytes()...)
	out := []byte{0xa1, 0x61, 'm', 0xd8, 0x2a, 0x58, byte(len(cb))}
	return append(out, cb...)
}
