package tiers

import (
	"strings"
	"testing"
)

// A term of a page is counted under a bounded key however long it is, and
// two long terms sharing their start do not share a key (issue 13 #6).
func TestDocFreqKeyIsBounded(t *testing.T) {
	huge := strings.Repeat("w", 70000)
	for _, term := range []string{huge, huge + "x"} {
		if key := dfKey("sona", term); len(key) > 200 {
			t.Fatalf("df key of a %d-byte term is %d bytes", len(term), len(key))
		}
	}
	if string(dfKey("sona", huge)) == string(dfKey("sona", huge+"x")) {
		t.Fatal("two long terms share a key")
	}
	if got := string(dfKey("sona", "garden")); got != "t/sona\x00fgarden" {
		t.Fatalf("df key of a short term = %q", got)
	}
}
