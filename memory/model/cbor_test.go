package model

import (
	"bytes"
	"encoding/hex"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	"github.com/ipld/go-ipld-prime/datamodel"
)

// ipldPrimeBlock is go-ipld-prime's DAG-CBOR of n: the reference the
// blocks' own encoder (cbor.go) must match byte for byte.
func ipldPrimeBlock(t testing.TB, n datamodel.Node) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := dagcbor.Encode(n, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAsIPLDPrime fails unless block reads as go-ipld-prime reads it: the
// canonical reader (decodeMemoryCBOR) either declines it or returns the
// memory go-ipld-prime returns; and it must not decline a block the
// encoder wrote (canonical).
func readAsIPLDPrime(t testing.TB, block []byte, canonical bool) {
	t.Helper()
	m, ok := decodeMemoryCBOR(block)
	if !ok {
		if canonical {
			t.Fatalf("the canonical reader declines the encoder's block %x", block)
		}
		return
	}
	want, err := decodeMemoryIPLD(block)
	if err != nil {
		t.Fatalf("the canonical reader reads %x, which go-ipld-prime refuses: %v", block, err)
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("block %x reads as %+v, go-ipld-prime's %+v", block, m, want)
	}
}

// sameAsIPLDPrime fails unless m's block is go-ipld-prime's encoding of m,
// and reads back as go-ipld-prime reads it.
func sameAsIPLDPrime(t testing.TB, m *Memory) {
	t.Helper()
	c, block, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	n, err := m.Node()
	if err != nil {
		t.Fatal(err)
	}
	if want := ipldPrimeBlock(t, n); !bytes.Equal(block, want) {
		t.Fatalf("block of %+v\n got %x\nwant %x (go-ipld-prime)", m, block, want)
	}
	if want, _ := SumCID(CodecDagCBOR, block); c != want {
		t.Fatalf("CID %s of its own block %s", c, want)
	}
	readAsIPLDPrime(t, block, true)
}

// randomMemory is a valid memory of any kind, with the optional fields
// present or not, strings and lists across the lengths where CBOR's
// heads change size (23/24, 255/256, 65535/65536), integers and floats
// of every size and sign.
func randomMemory(rng *rand.Rand, cids []cid.Cid) *Memory {
	lengths := []int{0, 1, 23, 24, 255, 256, 65535, 65536}
	str := func() string {
		n := rng.Intn(40)
		if rng.Intn(8) == 0 {
			n = lengths[rng.Intn(len(lengths))]
		}
		alphabet := []string{"a", "Z", "é", "日", "✓", " ", "\n"}
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		return b.String()
	}
	opt := func() *string {
		if rng.Intn(2) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	ints := []int64{0, 1, -1, 23, 24, -24, -25, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MinInt64}
	m := &Memory{}
	if rng.Intn(3) > 0 {
		ts := ints[rng.Intn(len(ints))]
		if rng.Intn(2) == 0 {
			ts = rng.Int63n(2e9) - 1e9
		}
		m.Timestamp = &ts
	}
	switch rng.Intn(4) {
	case 0:
		s := &SelfData{Name: str()}
		for range 1 + rng.Intn(4) {
			s.Parts = append(s.Parts, Part{Content: str(), Model: opt()})
		}
		if rng.Intn(2) == 0 {
			r := []string{"endTurn", "stopSequence", "maxTokens"}[rng.Intn(3)]
			s.StopReason = &r
		}
		m.Data.Self = s
	case 1:
		m.Data.Other = &OtherData{Name: opt(), Content: str()}
	case 2:
		m.Data.Text = &TextData{Content: str()}
	default:
		m.Data.File = &FileData{Name: opt(), MimeType: opt(), Content: cids[rng.Intn(len(cids))]}
	}
	weights := []float64{0, 1, -1, 0.5, 1e-300, 1e300, -math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, i := range rng.Perm(len(cids))[:rng.Intn(len(cids))] {
		w := rng.NormFloat64()
		if rng.Intn(4) == 0 {
			w = weights[rng.Intn(len(weights))]
		}
		m.Edges = append(m.Edges, Edge{Target: cids[i], Weight: w})
	}
	SortEdges(m.Edges)
	return m
}

// The blocks are go-ipld-prime's bytes, so the CIDs stay what they were:
// every fixture and a thousand random memories of every kind.
func TestEncodeIsIPLDPrimes(t *testing.T) {
	for name, m := range fixtures(t) {
		t.Run(name, func(t *testing.T) { sameAsIPLDPrime(t, m) })
	}
	var cids []cid.Cid
	for i := range 40 {
		codec := uint64(CodecRaw)
		if i%2 == 0 {
			codec = CodecDagCBOR
		}
		cids = append(cids, mustCIDOf(t, codec, []byte{byte(i)}))
	}
	rng := rand.New(rand.NewSource(1))
	for range 1000 {
		sameAsIPLDPrime(t, randomMemory(rng, cids))
	}
}

// A block in another form than the canonical one — keys in the schema's
// order, a longer head than needed, a float where an integer goes, bytes
// after the memory — is left to go-ipld-prime, which reads it or says
// what is wrong, as before.
func TestOtherFormsLeftToIPLDPrime(t *testing.T) {
	hexOf := func(s string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	text := func(s string) string { return hex.EncodeToString(cborText(nil, s)) }
	data := "a2" + text("kind") + text("text") + text("content") + text("hello")
	for name, block := range map[string]string{
		"canonical":          "a3" + text("data") + data + text("edges") + "80" + text("timestamp") + "1a6553f100",
		"schema's order":     "a3" + text("data") + data + text("timestamp") + "1a6553f100" + text("edges") + "80",
		"long head":          "a3" + text("data") + data + text("edges") + "80" + text("timestamp") + "1b000000006553f100",
		"trailing bytes":     "a2" + text("data") + data + text("edges") + "80" + "00",
		"no edges":           "a1" + text("data") + data,
		"float timestamp":    "a3" + text("data") + data + text("edges") + "80" + text("timestamp") + "fb41d954fc4000000000",
		"indefinite map":     "bf" + text("data") + data + text("edges") + "80" + "ff",
		"kind unknown":       "a2" + text("data") + "a2" + text("kind") + text("poem") + text("content") + text("x") + text("edges") + "80",
		"extra data field":   "a2" + text("data") + "a3" + text("kind") + text("text") + text("mood") + text("x") + text("content") + text("x") + text("edges") + "80",
		"huge list head":     "a2" + text("data") + data + text("edges") + "9b7fffffffffffffff",
		"invalid utf-8 text": "a2" + text("data") + "a2" + text("kind") + text("text") + text("content") + "62c328" + text("edges") + "80",
	} {
		t.Run(name, func(t *testing.T) {
			block := hexOf(block)
			if _, ok := decodeMemoryCBOR(block); ok != (name == "canonical") {
				t.Fatalf("the canonical reader read it: %v", ok)
			}
			readAsIPLDPrime(t, block, false)
			got, err := DecodeMemory(block)
			want, wantErr := decodeMemoryIPLD(block)
			if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) {
				t.Fatalf("DecodeMemory: %+v, %v; go-ipld-prime: %+v, %v", got, err, want, wantErr)
			}
		})
	}
}

// An ACT's block is go-ipld-prime's too, with and without its prev, at
// every size of seq.
func TestActEncodeIsIPLDPrimes(t *testing.T) {
	mem := mustCIDOf(t, CodecDagCBOR, []byte("m"))
	prev := mustCIDOf(t, CodecDagCBOR, []byte("p"))
	for _, seq := range []int64{0, 1, 23, 24, 255, 256, 65536, math.MaxUint32 + 1, math.MaxInt64} {
		for _, p := range []*cid.Cid{nil, &prev} {
			a := &Act{Sona: "5b1c0b5e-8a8e-4a39-9d3c-6d1f1f1f1f1f", Memory: mem, Prev: p, Seq: seq}
			_, block, err := a.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if want := ipldPrimeBlock(t, a.Node()); !bytes.Equal(block, want) {
				t.Fatalf("act %+v\n got %x\nwant %x (go-ipld-prime)", a, block, want)
			}
		}
	}
}

// A decoded memory is few objects, which the collector marks while a
// cache holds it: its member with its optional texts' places in one, its
// texts and its links' CIDs substrings of one string, then its parts past
// the first and its edges (a self memory with a model and a stop reason
// was eleven objects with two edges, then five with the CIDs their own).
func TestDecodedMemoryIsFewObjects(t *testing.T) {
	edges := []Edge{{Target: mustCIDOf(t, CodecDagCBOR, []byte("a")), Weight: 0.5}, {Target: mustCIDOf(t, CodecRaw, []byte("b")), Weight: 1}}
	SortEdges(edges)
	model, stop, name := "m-1", "maxTokens", "bob"
	for _, tc := range []struct {
		name string
		m    *Memory
		want float64
	}{
		{"self", &Memory{Data: Data{Self: &SelfData{Name: "ada", Parts: []Part{{Content: "one", Model: &model}}, StopReason: &stop}}, Edges: edges}, 3},
		{"self of two parts", &Memory{Data: Data{Self: &SelfData{Name: "ada", Parts: []Part{{Content: "one", Model: &model}, {Content: "two"}}}}, Edges: edges}, 4},
		{"other", &Memory{Data: Data{Other: &OtherData{Name: &name, Content: "hi"}}, Timestamp: new(int64)}, 2},
	} {
		_, block, err := tc.m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodeMemoryCBOR(block)
		if !ok || !reflect.DeepEqual(got, tc.m) {
			t.Fatalf("%s: decoded %+v (%v), want %+v", tc.name, got, ok, tc.m)
		}
		if n := testing.AllocsPerRun(100, func() { decodeMemoryCBOR(block) }); n > tc.want {
			t.Errorf("%s: %v objects a decode, want at most %v", tc.name, n, tc.want)
		}
	}
}
