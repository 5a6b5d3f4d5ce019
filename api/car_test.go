package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/memory"
)

// The CAR export and import (GET /export?format=car, POST /import with
// application/vnd.ipld.car) against real stores.

const carImportType = "application/vnd.ipld.car"

// exportCAR returns the CAR export of every sona.
func (h *harness) exportCAR(t *testing.T) []byte {
	t.Helper()
	if err := h.app.Self.Evals.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := h.get("/export?all=1&format=car")
	if r.status != http.StatusOK {
		t.Fatalf("CAR export: %s", r)
	}
	if ct := r.header.Get("Content-Type"); ct != carType {
		t.Fatalf("Content-Type %q", ct)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Fatalf("Content-Length %q for %d bytes", cl, len(r.body))
	}
	return r.body
}

// storedBlocks counts the blocks of a store.
func (h *harness) storedBlocks(t *testing.T) int {
	t.Helper()
	n := 0
	err := h.app.Self.Store().BlockHashes(context.Background(), func(multihash.Multihash) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recallAll recalls each query in every sona and returns, for each, the
// CIDs recalled in order with their scores. The recalls peek (they record
// no access, co-access or query), so that one cannot move the next.
func (h *harness) recallAll(t *testing.T, queries ...string) [][]string {
	t.Helper()
	// BM25's statistics span every sona: the whole corpus must be indexed;
	// and evaluated, as an evaluation moves decay and importance.
	if err := h.app.Self.Text.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.app.Self.Evals.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, s := range array(t, h.get("/sonas/list?limit=100").obj(t, http.StatusOK)["items"]) {
		id := str(t, object(t, s)["uuid"])
		for _, q := range queries {
			rs, err := h.app.Self.Recall(context.Background(), memory.Query{Sona: id, Text: q, K: 5, Peek: true})
			if err != nil {
				t.Fatal(err)
			}
			got := []string{id, q}
			for _, r := range rs {
				got = append(got, fmt.Sprintf("%s %v", r.CID, r.Score))
			}
			out = append(out, got)
		}
	}
	return out
}

func TestCARExportImportRoundTrip(t *testing.T) {
	a := newHarness(t, quiet)
	populate(t, a)
	docA, _ := a.exportAll(t)
	body := a.exportCAR(t)
	roots, order, data := readCARData(t, body)

	// The roots: the sonas' heads, the anchored memories, the manifest.
	var want, acts, mems []string
	for _, s := range array(t, docA["sonas"]) {
		s := object(t, s)
		want = append(want, str(t, s["head"]))
		for _, e := range array(t, s["chain"]) {
			acts = append(acts, str(t, object(t, e)["act"]))
			mems = append(mems, str(t, object(t, e)["memory"]))
		}
	}
	for _, an := range array(t, docA["anchors"]) {
		want = append(want, str(t, object(t, an)["cid"]))
	}
	if len(roots) != len(want)+1 || !slices.Equal(roots[:len(want)], want) {
		t.Fatalf("roots %v, want the heads and anchors %v and a manifest", roots, want)
	}
	// Every block the roots reach, once, each after a block that links to
	// it (or as a root).
	file := str(t, object(t, array(t, docA["blocks"])[0])["cid"])
	for _, c := range set(acts, mems, []string{file}) {
		if data[c] == nil {
			t.Fatalf("block %s is not in the CAR", c)
		}
		if !bytes.Equal(data[c], a.block(c)) {
			t.Fatalf("block %s differs from the stored one", c)
		}
	}
	if len(order) != len(set(order)) {
		t.Fatal("a block is in the CAR twice")
	}
	reached := map[string]bool{}
	for _, c := range order {
		if !reached[c] && !slices.Contains(roots, c) {
			t.Fatalf("block %s comes before anything links to it", c)
		}
		for _, l := range links(t, c, data[c]) {
			if data[l] == nil {
				t.Fatalf("block %s links to %s, which is not in the CAR", c, l)
			}
			reached[l] = true
		}
	}

	// Into an empty data directory: the same self.
	b := newHarness(t, quiet)
	res := b.do("POST", "/import", body, "Content-Type", carImportType).obj(t, http.StatusCreated)
	if res["format"] != "memoria-car/1" || num(t, res["appended"]) != int64(len(acts)) {
		t.Fatalf("import result %v, want %d ACTs appended", res, len(acts))
	}
	docB, _ := b.exportAll(t)
	if !reflect.DeepEqual(docA, docB) {
		t.Fatalf("the export of the imported CAR differs:\n%s", firstDifference(t, docA, docB))
	}
	for _, path := range []string{"/sonas/list", "/anchors", "/backbone/pending", "/conflicts"} {
		if ga, gb := a.get(path).obj(t, http.StatusOK), b.get(path).obj(t, http.StatusOK); !reflect.DeepEqual(ga, gb) {
			t.Fatalf("GET %s differs after the import:\n%v\n%v", path, ga, gb)
		}
	}
	// Its CAR has the same roots and blocks in the same order, but for the
	// manifest (its exported_at may differ), which comes last.
	roots2, order2, _ := readCARData(t, b.exportCAR(t))
	manifest := func(roots, order []string) int { return slices.Index(order, roots[len(roots)-1]) }
	if !slices.Equal(roots2[:len(roots2)-1], roots[:len(roots)-1]) ||
		!slices.Equal(order2[:manifest(roots2, order2)], order[:manifest(roots, order)]) {
		t.Fatal("the CAR of the imported self differs from the CAR imported")
	}
	// Again: nothing appended.
	res = b.do("POST", "/import", body, "Content-Type", carImportType).obj(t, http.StatusOK)
	if num(t, res["appended"]) != 0 {
		t.Fatalf("a second import appended %v", res["appended"])
	}
}

// After a round trip into an empty data directory, recall gives the same
// memories with the same scores. (A self without compressions: the
// full-text index's BM25 statistics count archived memories until its
// segments merge, on their own time, so scores there may differ in the
// last digits between any two stores.)
func TestCARRoundTripRecall(t *testing.T) {
	clock := newClock() // stopped: recency is the same before and after
	a := newLivingHarness(t, clock)
	alice, bob := a.newSona("alice"), a.newSona("bob")
	for _, s := range []string{"My sister Maya lives in Lisbon.", "I keep my bicycle in the blue shed.", "We decided to paint the shed green."} {
		a.post("/sona/"+alice+"/chat", map[string]any{"content": s, "agent_id": "agent-1"}).obj(t, http.StatusOK)
	}
	first := a.insertText(bob, "The payment API had an outage for two hours.")
	a.insert(map[string]any{"sona": bob, "kind": "fact", "data": map[string]any{"kind": "text", "content": "Carol prefers tea to coffee."},
		"edges": []any{map[string]any{"target": map[string]any{"/": first}, "weight": 0.5}}})
	a.post("/sona/"+alice+"/recall", map[string]any{"query": "where is the bicycle?", "agent_id": "agent-2"}).obj(t, http.StatusOK)
	body := a.exportCAR(t)

	b := newLivingHarness(t, clock)
	b.do("POST", "/import", body, "Content-Type", carImportType).obj(t, http.StatusCreated)
	if ha, hb := a.get("/sonas/list").obj(t, http.StatusOK), b.get("/sonas/list").obj(t, http.StatusOK); !reflect.DeepEqual(ha, hb) {
		t.Fatalf("the sonas and their heads differ:\n%v\n%v", ha, hb)
	}
	queries := []string{"where is the bicycle?", "payment API outage", "tea or coffee", "shed colour"}
	ra, rb := a.recallAll(t, queries...), b.recallAll(t, queries...)
	if len(ra) != len(rb) || len(ra) < 2*len(queries) {
		t.Fatalf("%d recalls before the round trip, %d after", len(ra), len(rb))
	}
	for i := range ra {
		if len(ra[i]) < 3 || !slices.Equal(ra[i], rb[i]) {
			t.Fatalf("recall differs after the round trip:\n%v\n%v", ra[i], rb[i])
		}
	}
}

// A CAR that does not verify, or is cut short, or is not a Memoria export,
// is refused with nothing written.
func TestCARImportRefusesBadFiles(t *testing.T) {
	a := newHarness(t, quiet)
	id := a.newSona("alice")
	a.post("/sona/"+id+"/chat", map[string]any{"content": "We decided to paint the shed green."}).obj(t, http.StatusOK)
	text := a.insertText(id, "The shed key hangs by the door.")
	body := a.exportCAR(t)

	// Flip one byte inside a memory's block.
	at := bytes.Index(body, a.block(text))
	if at < 0 {
		t.Fatal("the memory's block is not in the CAR")
	}
	corrupt := bytes.Clone(body)
	corrupt[at+len(a.block(text))/2] ^= 0x01
	// The same CAR without its last 100 bytes.
	truncated := body[:len(body)-100]
	// A CAR of the gateway: blocks, but no manifest.
	gw := a.do("GET", "/ipfs/"+str(t, a.sona(id)["head"])+"?format=car", nil)

	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"corrupt block", corrupt},
		{"truncated", truncated},
		{"truncated in the header", body[:10]},
		{"empty", nil},
		{"no manifest", gw.body},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newHarness(t, quiet)
			wantError(t, b.do("POST", "/import", tc.body, "Content-Type", carImportType), http.StatusBadRequest, "invalid_car")
			if s, m, _ := b.health(); s != 0 || m != 0 {
				t.Fatalf("a refused import left %d sonas, %d memories", s, m)
			}
			if n := b.storedBlocks(t); n != 0 {
				t.Fatalf("a refused import left %d blocks", n)
			}
		})
	}
	// The intact file imports.
	b := newHarness(t, quiet)
	b.do("POST", "/import", body, "Content-Type", carImportType).obj(t, http.StatusCreated)
	if !bytes.Equal(b.block(text), a.block(text)) {
		t.Fatal("the imported block differs")
	}
}
