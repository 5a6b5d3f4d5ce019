package model

import (
	"bytes"
	"math"
	"math/rand"
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

// sameAsIPLDPrime fails unless m's block is go-ipld-prime's encoding of m.
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
