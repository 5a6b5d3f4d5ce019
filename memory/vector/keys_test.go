package vector

import (
	"fmt"
	"strings"
	"testing"
)

// TestKeyList: keys read back by id across chunks (one longer than a
// chunk), ids without a key, cleared keys, and a view taken before more
// adds that still reads what it held.
func TestKeyList(t *testing.T) {
	var l keyList
	var want []string
	for i := range 70_000 {
		k := fmt.Sprintf("key-%d-%s", i, strings.Repeat("x", i%40))
		switch {
		case i == 30_000:
			k = strings.Repeat("long", keyChunk/2) // twice a chunk
		case i%1000 == 7:
			k = "" // an id without a key (a restored removed one)
		}
		if k == "" {
			l.reserve(0)
		} else {
			l.add(k)
		}
		want = append(want, k)
	}
	v := l.view(50_000)
	l.clear(12)
	want[12] = ""
	for i := range 1000 {
		l.add(fmt.Sprint("more-", i))
	}
	if len(l.chunks) < 3 || l.len() != 71_000 || v.len() != 50_000 {
		t.Fatalf("%d chunks, %d keys, a view of %d", len(l.chunks), l.len(), v.len())
	}
	for id, k := range want {
		if got := l.at(uint32(id)); got != k {
			t.Fatalf("key %d: %.20q, want %.20q", id, got, k)
		}
		if id < 50_000 && v.at(uint32(id)) != k {
			t.Fatalf("the view's key %d: %.20q, want %.20q", id, v.at(uint32(id)), k)
		}
	}
	if got := l.at(70_999); got != "more-999" {
		t.Fatalf("the last key: %q", got)
	}
}
