package model

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	"github.com/ipld/go-ipld-prime/datamodel"
	"github.com/ipld/go-ipld-prime/fluent/qp"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/node/basicnode"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/multiformats/go-multihash"
)

func strp(s string) *string { return &s }
func i64p(v int64) *int64   { return &v }

func mustCIDOf(t testing.TB, codec uint64, b []byte) cid.Cid {
	t.Helper()
	c, err := SumCID(codec, b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fixtures are one memory of every union member, with and without the
// optional fields, and with edges.
func fixtures(t testing.TB) map[string]*Memory {
	a := mustCIDOf(t, CodecRaw, []byte("a"))
	b := mustCIDOf(t, CodecDagCBOR, []byte{0xa0})
	edges := []Edge{{Target: b, Weight: 0.25}, {Target: a, Weight: 1}}
	SortEdges(edges)
	return map[string]*Memory{
		"self":        {Data: Data{Self: &SelfData{Name: "ada", Parts: []Part{{Content: "hello"}}}}},
		"self-full":   {Data: Data{Self: &SelfData{Name: "ada", Parts: []Part{{Content: "one", Model: strp("m-1")}, {Content: "two"}}, StopReason: strp("maxTokens")}}, Timestamp: i64p(1700000000), Edges: edges},
		"other":       {Data: Data{Other: &OtherData{Content: "hi"}}},
		"other-named": {Data: Data{Other: &OtherData{Name: strp("bob"), Content: "hi there"}}, Timestamp: i64p(-5)},
		"text":        {Data: Data{Text: &TextData{Content: "a note"}}, Edges: edges[:1]},
		"text-utf8":   {Data: Data{Text: &TextData{Content: "ünïcödé ✓ 日本語"}}},
		"file":        {Data: Data{File: &FileData{Content: a}}},
		"file-full":   {Data: Data{File: &FileData{Name: strp("notes.pdf"), MimeType: strp("application/pdf"), Content: a}}, Timestamp: i64p(0)},
	}
}

// TestKnownAnswerCID checks one fixed memory against DAG-CBOR bytes written
// out by hand from the spec (map keys sorted length-first, then bytewise)
// and hashed with go-cid's builder, independently of our encoder.
func TestKnownAnswerCID(t *testing.T) {
	m := &Memory{Data: Data{Text: &TextData{Content: "hello"}}, Timestamp: i64p(1700000000)}
	want, _ := hex.DecodeString("" +
		"a3" + // map(3)
		"64" + hex.EncodeToString([]byte("data")) +
		"a2" + // map(2)
		"64" + hex.EncodeToString([]byte("kind")) + "64" + hex.EncodeToString([]byte("text")) +
		"67" + hex.EncodeToString([]byte("content")) + "65" + hex.EncodeToString([]byte("hello")) +
		"65" + hex.EncodeToString([]byte("edges")) + "80" + // empty array
		"69" + hex.EncodeToString([]byte("timestamp")) + "1a6553f100") // uint32 1700000000
	wantCID, err := cid.V1Builder{Codec: cid.DagCBOR, MhType: multihash.SHA2_256}.Sum(want)
	if err != nil {
		t.Fatal(err)
	}
	c, block, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(block, want) {
		t.Fatalf("block\n got %x\nwant %x", block, want)
	}
	if c != wantCID {
		t.Fatalf("CID %s, want %s", c, wantCID)
	}
	// Pinned, so an accidental change of codec or hash shows up here too.
	if got := c.String(); got != "bafyreidj3tczqycurkkr73eyjneoiyd4wrgm3mqcz4etuwiybfi4uqrbkm" {
		t.Fatalf("CID is %s, pinned bafyreidj3tczqycurkkr73eyjneoiyd4wrgm3mqcz4etuwiybfi4uqrbkm", got)
	}
	if c.Prefix().Version != 1 || c.Prefix().Codec != 0x71 || c.Prefix().MhType != multihash.SHA2_256 {
		t.Fatalf("prefix %+v", c.Prefix())
	}
}

func TestRoundTripEveryMember(t *testing.T) {
	for name, m := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			c, block, err := m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeMemory(block)
			if err != nil {
				t.Fatal(err)
			}
			c2, block2, err := back.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if c != c2 || !bytes.Equal(block, block2) {
				t.Fatalf("round trip changed the block: %s → %s", c, c2)
			}
			if back.Data.Kind() != m.Data.Kind() || back.Text() != m.Text() {
				t.Fatalf("decoded %q %q, want %q %q", back.Data.Kind(), back.Text(), m.Data.Kind(), m.Text())
			}
			// Through DAG-JSON, as the REST API renders and reads the data.
			js, err := m.Data.DataJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(js), `"kind":"`+m.Data.Kind()+`"`) {
				t.Fatalf("DAG-JSON %s lacks the kind", js)
			}
			d, err := DataFromJSON(js)
			if err != nil {
				t.Fatal(err)
			}
			m2 := &Memory{Data: d, Timestamp: m.Timestamp, Edges: m.Edges}
			if c3, _, err := m2.Encode(); err != nil || c3 != c {
				t.Fatalf("via DAG-JSON: %s %v, want %s", c3, err, c)
			}
		})
	}
}

func TestSameMemorySameCID(t *testing.T) {
	for name, m := range fixtures(t) {
		c1, _, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		// A structurally equal copy built separately.
		cp := *m
		cp.Edges = append([]Edge(nil), m.Edges...)
		c2, _, _ := cp.Encode()
		if c1 != c2 {
			t.Fatalf("%s: %s != %s", name, c1, c2)
		}
	}
}

// TestSameCIDAcrossProcesses encodes the fixtures in a child process and
// compares the CIDs with this process's.
func TestSameCIDAcrossProcesses(t *testing.T) {
	if os.Getenv("MEMORY_CID_HELPER") == "1" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPrintFixtureCIDs$", "-test.v")
	cmd.Env = append(os.Environ(), "MEMORY_CID_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for name, m := range fixtures(t) {
		c, _, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if line := fmt.Sprintf("CID %s %s", name, c); !strings.Contains(string(out), line) {
			t.Errorf("child did not print %q:\n%s", line, out)
		}
	}
}

func TestPrintFixtureCIDs(t *testing.T) {
	if os.Getenv("MEMORY_CID_HELPER") != "1" {
		t.Skip("helper for TestSameCIDAcrossProcesses")
	}
	for name, m := range fixtures(t) {
		c, _, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("CID %s %s\n", name, c)
	}
}

func TestActRoundTrip(t *testing.T) {
	mem := mustCIDOf(t, CodecDagCBOR, []byte{1})
	prev := mustCIDOf(t, CodecDagCBOR, []byte{2})
	for _, a := range []Act{
		{Sona: "u-1", Memory: mem, Seq: 0},
		{Sona: "u-1", Memory: mem, Prev: &prev, Seq: 41},
	} {
		c, block, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeAct(block)
		if err != nil {
			t.Fatal(err)
		}
		if back.Sona != a.Sona || back.Memory != a.Memory || back.Seq != a.Seq || (back.Prev == nil) != (a.Prev == nil) {
			t.Fatalf("got %+v, want %+v", back, a)
		}
		if c2, _, _ := back.Encode(); c2 != c {
			t.Fatalf("CID changed %s → %s", c, c2)
		}
	}
	// The first ACT has prev: null (nullable, not optional).
	_, block, _ := (&Act{Sona: "u", Memory: mem}).Encode()
	if !bytes.Contains(block, append([]byte("\x64prev"), 0xf6)) {
		t.Fatalf("first ACT does not encode prev as null: %x", block)
	}
}

func encodeNodeBytes(t *testing.T, n datamodel.Node) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := dagcbor.Encode(n, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeRejectsInvalid(t *testing.T) {
	a := mustCIDOf(t, CodecRaw, []byte("a"))
	b := mustCIDOf(t, CodecRaw, []byte("b"))
	lo, hi := a, b
	if bytes.Compare(a.Bytes(), b.Bytes()) > 0 {
		lo, hi = b, a
	}
	text := func(ma datamodel.MapAssembler) {
		qp.MapEntry(ma, "kind", qp.String("text"))
		qp.MapEntry(ma, "content", qp.String("x"))
	}
	edge := func(c cid.Cid, w float64) qp.Assemble {
		return qp.Map(2, func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "target", qp.Link(cidLink(c)))
			qp.MapEntry(ma, "weight", qp.Float(w))
		})
	}
	build := func(f func(datamodel.MapAssembler)) []byte {
		n, err := qp.BuildMap(basicnode.Prototype.Any, -1, f)
		if err != nil {
			t.Fatal(err)
		}
		return encodeNodeBytes(t, n)
	}
	cases := map[string][]byte{
		"not cbor":  {0xff, 0x00},
		"not a map": encodeNodeBytes(t, basicnode.NewString("hi")),
		"missing data": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"missing edges": build(func(ma datamodel.MapAssembler) { qp.MapEntry(ma, "data", qp.Map(2, text)) }),
		"unknown field": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(2, text))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
			qp.MapEntry(ma, "extra", qp.Int(1))
		}),
		"unknown kind": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(2, func(ma datamodel.MapAssembler) {
				qp.MapEntry(ma, "kind", qp.String("dream"))
				qp.MapEntry(ma, "content", qp.String("x"))
			}))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"member field missing": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(1, func(ma datamodel.MapAssembler) { qp.MapEntry(ma, "kind", qp.String("text")) }))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"member extra field": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(3, func(ma datamodel.MapAssembler) {
				text(ma)
				qp.MapEntry(ma, "mood", qp.String("happy"))
			}))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"wrong type": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(2, func(ma datamodel.MapAssembler) {
				qp.MapEntry(ma, "kind", qp.String("text"))
				qp.MapEntry(ma, "content", qp.Int(3))
			}))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"null timestamp": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(2, text))
			qp.MapEntry(ma, "timestamp", qp.Null())
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"unsorted edges": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(2, text))
			qp.MapEntry(ma, "edges", qp.List(2, func(la datamodel.ListAssembler) {
				qp.ListEntry(la, edge(hi, 1))
				qp.ListEntry(la, edge(lo, 1))
			}))
		}),
		"duplicate edges": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(2, text))
			qp.MapEntry(ma, "edges", qp.List(2, func(la datamodel.ListAssembler) {
				qp.ListEntry(la, edge(lo, 1))
				qp.ListEntry(la, edge(lo, 0.5))
			}))
		}),
		"bad stop reason": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(4, func(ma datamodel.MapAssembler) {
				qp.MapEntry(ma, "kind", qp.String("self"))
				qp.MapEntry(ma, "name", qp.String("a"))
				qp.MapEntry(ma, "parts", qp.List(1, func(la datamodel.ListAssembler) {
					qp.ListEntry(la, qp.Map(1, func(ma datamodel.MapAssembler) { qp.MapEntry(ma, "content", qp.String("x")) }))
				}))
				qp.MapEntry(ma, "stop_reason", qp.String("tired"))
			}))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
		"self without parts": build(func(ma datamodel.MapAssembler) {
			qp.MapEntry(ma, "data", qp.Map(3, func(ma datamodel.MapAssembler) {
				qp.MapEntry(ma, "kind", qp.String("self"))
				qp.MapEntry(ma, "name", qp.String("a"))
				qp.MapEntry(ma, "parts", qp.List(0, func(datamodel.ListAssembler) {}))
			}))
			qp.MapEntry(ma, "edges", qp.List(0, func(datamodel.ListAssembler) {}))
		}),
	}
	for name, block := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeMemory(block); !errors.Is(err, base.ErrInvalid) {
				t.Fatalf("err = %v, want base.ErrInvalid", err)
			}
		})
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	a := mustCIDOf(t, CodecRaw, []byte("a"))
	cases := map[string]*Memory{
		"no member":    {},
		"two members":  {Data: Data{Text: &TextData{Content: "x"}, Other: &OtherData{Content: "y"}}},
		"bad utf8":     {Data: Data{Text: &TextData{Content: "\xff\xfe"}}},
		"nan weight":   {Data: Data{Text: &TextData{Content: "x"}}, Edges: []Edge{{Target: a, Weight: nanWeight()}}},
		"undef target": {Data: Data{Text: &TextData{Content: "x"}}, Edges: []Edge{{Weight: 1}}},
		"file no cid":  {Data: Data{File: &FileData{}}},
		"dup edges":    {Data: Data{Text: &TextData{Content: "x"}}, Edges: []Edge{{Target: a, Weight: 1}, {Target: a, Weight: 2}}},
	}
	for name, m := range cases {
		if _, _, err := m.Encode(); !errors.Is(err, base.ErrInvalid) {
			t.Errorf("%s: err = %v, want base.ErrInvalid", name, err)
		}
	}
}

func nanWeight() float64 {
	zero := 0.0
	return zero / zero
}

// FuzzDecodeMemory: arbitrary bytes never panic the decoder, and what
// decodes re-encodes to a memory that decodes to the same CID.
func FuzzDecodeMemory(f *testing.F) {
	for _, m := range fixtures(f) {
		_, b, err := m.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		readAsIPLDPrime(t, b, false) // the canonical reader reads no block otherwise than go-ipld-prime
		m, err := DecodeMemory(b)
		if err != nil {
			return
		}
		c, block, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded memory does not re-encode: %v", err)
		}
		sameAsIPLDPrime(t, m) // the blocks' own encoder is go-ipld-prime's, byte for byte
		back, err := DecodeMemory(block)
		if err != nil {
			t.Fatal(err)
		}
		if c2, _, _ := back.Encode(); c2 != c {
			t.Fatalf("unstable: %s vs %s", c, c2)
		}
	})
}

func cidLink(c cid.Cid) datamodel.Link { return cidlink.Link{Cid: c} }

// textCases are memories of every kind, with texts that test counting
// their characters: none, empty parts, several parts, multi-byte and
// invalid UTF-8 (a part ending in half a character), a name.
func textCases(t *testing.T) []*Memory {
	t.Helper()
	name, empty, mime := "Ana", "", "text/plain"
	file, err := cid.Prefix{Version: 1, Codec: CodecRaw, MhType: multihash.SHA2_256, MhLength: -1}.Sum([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "word", "two words", "naïve café — 東京", "half \xe6\x97", "\x9d tail", "line\nbreak"}
	var out []*Memory
	for _, a := range texts {
		out = append(out,
			&Memory{Data: Data{Other: &OtherData{Content: a}}},
			&Memory{Data: Data{Other: &OtherData{Name: &name, Content: a}}},
			&Memory{Data: Data{Other: &OtherData{Name: &empty, Content: a}}},
			&Memory{Data: Data{Text: &TextData{Content: a}}},
			&Memory{Data: Data{Self: &SelfData{Parts: []Part{{Content: a}}}}})
		for _, b := range texts {
			out = append(out, &Memory{Data: Data{Self: &SelfData{Parts: []Part{{Content: a}, {Content: b}, {Content: a + b}}}}})
		}
	}
	return append(out,
		&Memory{Data: Data{Self: &SelfData{}}},
		&Memory{Data: Data{File: &FileData{Name: &name, MimeType: &mime, Content: file}}},
		&Memory{})
}

// TextChars counts what Text makes.
func TestTextCharsCountsTheText(t *testing.T) {
	for i, m := range textCases(t) {
		if got, want := m.TextChars(), utf8.RuneCountInString(m.Text()); got != want {
			t.Errorf("case %d (%q): TextChars %d, want %d", i, m.Text(), got, want)
		}
	}
}
