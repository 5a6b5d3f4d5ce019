package vector

import (
	"bytes"
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/llm"
)

// aliasIndex adds vecs under key(i), each followed every third by a copy
// of vecs[0] and every fifth by one of vecs[1], keyed "c0-i" and "c1-i",
// with m 8 (one node in eight above layer 0: copies of higher levels
// too), and waits for the graph.
func aliasIndex(t *testing.T, vecs [][]float32) (*Index, []string, []string) {
	t.Helper()
	x := New(Options{Dims: len(vecs[0]), M: 8, EfConstruction: 32, Seed: 2})
	t.Cleanup(x.Close)
	var c0, c1 []string
	for i, v := range vecs {
		x.Add(key(i), v)
		if i%3 == 2 {
			c0 = append(c0, "c0-"+key(i))
			x.Add(c0[len(c0)-1], vecs[0])
		}
		if i%5 == 4 {
			c1 = append(c1, "c1-"+key(i))
			x.Add(c1[len(c1)-1], vecs[1])
		}
	}
	x.WaitBuilt()
	return x, c0, c1
}

func hitKeys(hits []Hit) string {
	var s []string
	for _, h := range hits {
		s = append(s, h.Key)
	}
	return strings.Join(s, " ")
}

// A vector equal to one in the graph becomes its alias: no links of its
// own, none to it; a search finds the copies with their original, in
// insertion order as exact search ranks them, and the graph stays
// navigable for everything else.
func TestEqualVectorsAreAliases(t *testing.T) {
	const n, dims = 1500, 32
	rng := rand.New(rand.NewSource(11))
	vecs := clustered(rng, n, dims, 10)
	x, c0, c1 := aliasIndex(t, vecs)
	g := x.graph
	for _, copies := range [][]string{c0, c1} {
		for _, k := range copies {
			id, _ := x.ID(k)
			rep, ok := g.aliasOf(uint32(id))
			if !ok || g.upper[id] != nil {
				t.Fatalf("%s: not an alias (or with upper layers)", k)
			}
			if want, _ := x.ID(key(0)); strings.HasPrefix(k, "c1") {
				want, _ = x.ID(key(1))
				if uint64(rep) != want {
					t.Fatalf("%s: an alias of %d, want %d", k, rep, want)
				}
			} else if uint64(rep) != want {
				t.Fatalf("%s: an alias of %d, want %d", k, rep, want)
			}
		}
	}
	if len(g.aliases) != 2 || len(g.aliases[0]) != len(c0) || len(g.aliases[1]) != len(c1) {
		t.Fatalf("aliases %d, of 0: %d (want %d), of 1: %d (want %d)", len(g.aliases), len(g.aliases[0]), len(c0), len(g.aliases[1]), len(c1))
	}
	for id := range uint32(g.n) {
		if _, ok := g.aliasOf(id); ok {
			continue
		}
		for layer := 0; layer <= len(g.upper[id])/(1+g.m); layer++ {
			for _, to := range g.links(id, layer) {
				if _, ok := g.aliasOf(to); ok {
					t.Fatalf("node %d links to the alias %d on layer %d", id, to, layer)
				}
			}
		}
	}
	want := key(0) + " " + strings.Join(c0[:14], " ")
	if got := hitKeys(x.Search(vecs[0], 15)); got != want {
		t.Fatalf("search for the copied vector:\n got %s\nwant %s", got, want)
	}
	if r := recall(x, vecs, vecs[2:200], 10); r < 0.95 {
		t.Fatalf("recall@10 of the other vectors %.3f", r)
	}
}

// Half the texts "[offline model] Noted." (the offline model's answer to
// most chat turns): linked as nodes, the copies tied with each other in
// every neighbour selection and closed the graph around them (recall@10
// of the other texts here 0.39; 0.78 at 20,000); as aliases the other
// texts are found as if the copies were not there.
func TestRecallAmongManyEqualTexts(t *testing.T) {
	const n, k = 6000, 10
	rng := rand.New(rand.NewSource(8))
	word := func() string {
		b := make([]byte, 4+rng.Intn(6))
		for i := range b {
			b[i] = byte('a' + rng.Intn(26))
		}
		return string(b)
	}
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = word()
	}
	texts := make([]string, n)
	for i := range texts {
		if i%2 == 0 {
			texts[i] = "[offline model] Noted."
			continue
		}
		words := make([]string, 6+rng.Intn(14))
		for j := range words {
			words[j] = vocab[rng.Intn(len(vocab))]
		}
		texts[i] = strings.Join(words, " ")
	}
	emb := llm.NewHashedEmbedder(384)
	vecs, err := emb.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	x := New(Options{Dims: emb.Dims(), Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	x.WaitBuilt()
	var queries [][]float32
	for i := 1; i < n; i += 30 {
		queries = append(queries, vecs[i])
	}
	if r := recall(x, vecs, queries, k); r < 0.95 {
		t.Fatalf("recall@%d of the other texts = %.3f, want ≥ 0.95", k, r)
	}
	if hits := x.Search(vecs[0], k); len(hits) != k || hits[k-1].Similarity < 0.999 {
		t.Fatalf("the copies: %v", hits)
	}
}

// Removing the original leaves its aliases found through it; its record
// goes with the last of them. A copy added after all are gone is a node.
func TestRemoveOriginalOfAliases(t *testing.T) {
	const dims = 16
	vecs := clustered(rand.New(rand.NewSource(4)), 300, dims, 5)
	x := New(Options{Dims: dims, M: 6, Seed: 1})
	defer x.Close()
	for i, v := range vecs {
		x.Add(key(i), v)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		x.Add(k, vecs[7])
	}
	x.WaitBuilt()
	x.Remove(key(7))
	if got := hitKeys(x.Search(vecs[7], 3)); got != "a b c" {
		t.Fatalf("with the original removed: %q, want \"a b c\"", got)
	}
	x.Remove("b")
	x.Remove("a")
	if got := hitKeys(x.Search(vecs[7], 2)); got != "c d" {
		t.Fatalf("with two aliases removed: %q, want \"c d\"", got)
	}
	if rec := x.qv.at(7); bytes.Equal(asBytes(rec), make([]byte, len(rec))) {
		t.Fatal("the original's record cleared while aliases live")
	}
	x.Remove("c")
	x.Remove("d")
	if rec := x.qv.at(7); !bytes.Equal(asBytes(rec), make([]byte, len(rec))) {
		t.Fatal("the original's record kept after its last alias")
	}
	if hits := x.Search(vecs[7], 1); len(hits) == 1 && hits[0].Similarity > 0.999 {
		t.Fatalf("found after every copy was removed: %v", hits)
	}
	x.Add("e", vecs[7])
	x.WaitBuilt()
	id, _ := x.ID("e")
	if _, ok := x.graph.aliasOf(uint32(id)); ok {
		t.Fatal("a copy of a removed vector became an alias")
	}
	if got := hitKeys(x.Search(vecs[7], 1)); got != "e" {
		t.Fatalf("the new copy: %q", got)
	}
}

// A snapshot keeps the aliases (a removed one as no alias); the restored
// graph, aliases and searches are the same.
func TestSnapshotKeepsAliases(t *testing.T) {
	const n, dims = 600, 16
	rng := rand.New(rand.NewSource(6))
	vecs := clustered(rng, n, dims, 6)
	x, c0, _ := aliasIndex(t, vecs)
	x.Remove(c0[3])
	x.Remove(key(1)) // an original whose aliases stay
	y, info, err := restoreFile(t, Options{Dims: dims, M: 8, EfConstruction: 32, Seed: 2}, snapFile(t, x, SnapshotVersion))
	if err != nil || info.Version != SnapshotVersion {
		t.Fatalf("restore: %v, version %d", err, info.Version)
	}
	if !sameGraph(x.graph, y.graph) || len(y.graph.aliases) != len(x.graph.aliases) {
		t.Fatal("the restored graph differs")
	}
	for rep, a := range x.graph.aliases {
		if got := y.graph.aliases[rep]; !bytes.Equal(asBytes(got), asBytes(a)) {
			t.Fatalf("aliases of %d: %v, want %v", rep, got, a)
		}
	}
	for _, q := range append(clustered(rng, 20, dims, 6), vecs[0], vecs[1]) {
		if a, b := hitKeys(x.Search(q, 12)), hitKeys(y.Search(q, 12)); a != b {
			t.Fatalf("search differs:\n%s\n%s", a, b)
		}
	}
}

// A restored graph whose alias names a later node, an alias, or no node
// is refused; a version 2 snapshot has no aliases at all.
func TestCheckRefusesBadAliases(t *testing.T) {
	const n, dims = 200, 16
	vecs := clustered(rand.New(rand.NewSource(2)), n, dims, 4)
	x, c0, _ := aliasIndex(t, vecs)
	g := x.graph
	a0, _ := x.ID(c0[0])
	a1, _ := x.ID(c0[1])
	if err := g.check(true); err != nil {
		t.Fatal(err)
	}
	if err := g.check(false); err == nil {
		t.Fatal("aliases accepted where the layout has none")
	}
	for _, rep := range []uint32{uint32(a1), uint32(a0), uint32(g.n + 5)} {
		rec := g.links0.at(uint32(a0))
		old := rec[1]
		rec[1] = rep
		if err := g.check(true); err == nil {
			t.Fatalf("an alias of %d accepted", rep)
		}
		rec[1] = old
	}
	rec := g.links0.at(uint32(a1))
	rec[1] = uint32(a0) // an alias of an alias
	if err := g.check(true); err == nil {
		t.Fatal("an alias of an alias accepted")
	}
}
