package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/internal/durable"
)

// An export body shorter than its announced size is refused, and no file
// is left under the name asked for.
func TestShortExportIsNotWritten(t *testing.T) {
	out := filepath.Join(t.TempDir(), "self.car")
	_, err := durable.WriteFile(out, &sized{r: strings.NewReader("12345"), want: 10})
	if err == nil || !strings.Contains(err.Error(), "5 of 10 bytes") {
		t.Fatalf("err = %v, want 5 of 10 bytes", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("%s exists after a short body (%v)", out, err)
	}
	for _, want := range []int64{5, -1} {
		if n, err := durable.WriteFile(out, &sized{r: strings.NewReader("12345"), want: want}); err != nil || n != 5 {
			t.Fatalf("want %d: %d %v", want, n, err)
		}
	}
}
