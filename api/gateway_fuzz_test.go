package api

import (
	"bytes"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// Parsers that take what a client sends: the gateway's path and Accept,
// and the CAR an import reads. Run the fuzzers with, e.g.,
// go test -run '^$' -fuzz FuzzGatewayPath -fuzztime 60s ./api

const headCID = "bafyreigvxnzwovmye35br6tmueax2n7q4y4lmyy4o7bjyxi4ntbwixde3i"

func TestParseGatewayPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		segs []string
		code string
	}{
		{"/ipfs/" + headCID, nil, ""},
		{"/ipfs/" + headCID + "/", nil, ""},
		{"/ipfs/" + headCID + "/prev/memory", []string{"prev", "memory"}, ""},
		{"/ipfs/" + headCID + "/edges/0/target/", []string{"edges", "0", "target"}, ""},
		{"/ipfs/" + headCID + "/a%2Fb/%C3%A9", []string{"a/b", "é"}, ""},
		{"/ipfs/bafkqaaa", nil, ""},
		{"/ipfs/QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n/x", []string{"x"}, ""},
		{"/ipfs/" + headCID + "/1/2/3", []string{"1", "2", "3"}, ""},
		{"/ipfs/" + headCID + "/1/2/3/4", nil, "path_too_long"},
		{"/ipfs/" + headCID + "/prev//memory", nil, "invalid_path"},
		{"/ipfs/" + headCID + "//", nil, "invalid_path"},
		{"/ipfs/" + headCID + "/pr%zzev", nil, "invalid_path"},
		{"/ipfs/", nil, "invalid_cid"},
		{"/ipfs/not-a-cid/x", nil, "invalid_cid"},
		{"/ipfs/%zz", nil, "invalid_cid"},
		{"/ipns/" + headCID, nil, "invalid_path"},
	} {
		c, segs, err := parseGatewayPath(tc.path, 3)
		var ae *apiError
		switch {
		case tc.code != "" && (!errors.As(err, &ae) || ae.code != tc.code || !errors.Is(ae, base.ErrInvalid)):
			t.Errorf("%s: %v, want a 400 %s", tc.path, err, tc.code)
		case tc.code == "" && (err != nil || !c.Defined() || !slices.Equal(segs, tc.segs)):
			t.Errorf("%s: %v %q %v, want %q", tc.path, c, segs, err, tc.segs)
		}
	}
}

func FuzzGatewayPath(f *testing.F) {
	for _, p := range []string{
		"/ipfs/" + headCID, "/ipfs/" + headCID + "/prev/prev/memory", "/ipfs/" + headCID + "/edges/0/target/",
		"/ipfs/bafkqaaa", "/ipfs/QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n/a%2Fb", "/ipfs/", "/ipfs//", "/ipns/x",
		"/ipfs/" + headCID + "/%", "/ipfs/z" + strings.Repeat("1", 60), "/ipfs/" + headCID + strings.Repeat("/prev", 40),
	} {
		f.Add(p, uint16(1024))
		f.Add(p, uint16(2))
	}
	f.Fuzz(func(t *testing.T, p string, limit uint16) {
		max := int(limit%2048) + 1
		c, segs, err := parseGatewayPath(p, max)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || !errors.Is(ae, base.ErrInvalid) {
				t.Fatalf("%q: %v is not a 400", p, err)
			}
			return
		}
		if !c.Defined() || len(segs) > max || slices.Contains(segs, "") {
			t.Fatalf("%q: %v %q", p, c, segs)
		}
		// What was read reads back the same once written again.
		again := "/ipfs/" + c.String()
		for _, s := range segs {
			again += "/" + url.PathEscape(s)
		}
		c2, segs2, err := parseGatewayPath(again, max)
		if err != nil || !c2.Equals(c) || !slices.Equal(segs2, segs) {
			t.Fatalf("%q read as %v %q, written again as %q, read as %v %q (%v)", p, c, segs, again, c2, segs2, err)
		}
	})
}

func FuzzGatewayAccept(f *testing.F) {
	for _, a := range []string{
		"", "application/vnd.ipld.raw", "application/vnd.ipld.car", "*/*", "text/html;q=0.5, application/vnd.ipld.raw",
		"application/vnd.ipld.car; version=1; order=dfs; dups=y", "application/vnd.ipld.car;order=foo, application/vnd.ipld.car;order=dfs;dups=y;q=0.5",
		"application/vnd.ipld.car; q=0, application/vnd.ipld.raw; q=0.1", "application/vnd.ipld.car; version=2", `application/vnd.ipld.car; dups="y"`,
	} {
		f.Add("", a)
		f.Add("car", a)
	}
	f.Add("raw", "")
	f.Add("json", "application/json")
	f.Fuzz(func(t *testing.T, format, accept string) {
		car, params, err := negotiate(format, []string{accept})
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || !errors.Is(ae, errNotAcceptable) {
				t.Fatalf("%q %q: %v is not a 406", format, accept, err)
			}
			return
		}
		if format == "raw" && car || format == "car" && !car {
			t.Fatalf("format=%s answered car=%v", format, car)
		}
		if car {
			if _, err := carVariant(params); err != nil {
				t.Fatalf("%q: the CAR variant chosen is not served: %v", accept, err)
			}
		}
	})
}

// seedCAR is a small Memoria CAR: one sona of one ACT and its memory, and
// the manifest.
func seedCAR(t testing.TB) []byte {
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: "The shed key hangs by the door."}}}
	mc, mb, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	act := &model.Act{Sona: "1b4e28ba-2fa1-11d2-883f-0016d3cca427", Memory: mc}
	ac, ab, err := act.Encode()
	if err != nil {
		t.Fatal(err)
	}
	head, last := ac.String(), mc.String()
	doc := &messages.Export{
		Format: transfer.ExportFormat,
		Sonas: []*messages.ExportSona{{Uuid: act.Sona, Name: "alice", Head: &head, Length: 1, LastMemory: &last,
			Chain: []*messages.ExportAct{{Seq: 0, Act: head, Memory: last}}}},
		Memories: []*messages.ExportMemory{{Cid: last, Meta: &messages.MemoryMeta{Kind: "note"}}},
	}
	extra := map[cid.Cid][]byte{}
	manifest, err := buildManifest(doc, extra)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cw := newCARWriter(&buf)
	if err := cw.header([]cid.Cid{ac, manifest}); err != nil {
		t.Fatal(err)
	}
	extra[ac], extra[mc] = ab, mb
	for _, c := range slices.SortedFunc(maps.Keys(extra), func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) }) {
		if err := cw.section(c, extra[c]); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSeedCARImports(t *testing.T) {
	doc, err := ExportFromCAR(seedCAR(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Memories) != 1 || doc.Memories[0].Data == nil {
		t.Fatalf("the seed CAR reads as %v", doc)
	}
}

func FuzzExportFromCAR(f *testing.F) {
	car := seedCAR(f)
	f.Add(car)
	f.Add(car[:len(car)/2])
	f.Add(car[:1])
	f.Add([]byte{})
	// A CAR v2's pragma, and a header claiming more than there is.
	f.Add([]byte{0x0a, 0xa1, 0x67, 0x76, 0x65, 0x72, 0x73, 0x69, 0x6f, 0x6e, 0x02})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0xa2})
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := ExportFromCAR(body)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.code != "invalid_car" {
				t.Fatalf("%v is not a 400 invalid_car", err)
			}
			return
		}
		if doc == nil || doc.Format != transfer.ExportFormat {
			t.Fatalf("read as %v", doc)
		}
	})
}
