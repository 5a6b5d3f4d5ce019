package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestF16(t *testing.T) {
	cases := map[float32]uint16{
		0: 0, 1: 0x3c00, -2: 0xc000, 0.5: 0x3800, 65504: 0x7bff, 1e6: 0x7c00,
		float32(math.Pow(2, -24)): 0x0001, // the smallest subnormal
		1 + 1.0/2048:              0x3c00, // a tie rounds to even
		1 + 3.0/2048:              0x3c02,
	}
	for f, want := range cases {
		if got := f16(f); got != want {
			t.Errorf("f16(%g) = %#04x, want %#04x", f, got, want)
		}
	}
}

// tarball packs a wink-style JSON with the given words, each vector
// filled with its index + 1.
func tarball(t *testing.T, words []string) []byte {
	t.Helper()
	var vecs []string
	for i, w := range words {
		v := make([]string, dims+2)
		for j := range dims {
			v[j] = fmt.Sprint(i + 1)
		}
		v[dims], v[dims+1] = "1", fmt.Sprint(i)
		vecs = append(vecs, fmt.Sprintf("%q:[%s]", w, strings.Join(v, ",")))
	}
	body := fmt.Sprintf(`{"precision":8,"words":["%s"],"vectors":{%s},"unkVector":[0]}`, strings.Join(words, `","`), strings.Join(vecs, ","))
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: member, Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(body))
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func TestRead(t *testing.T) {
	words := []string{"the", ",", "dog", "café", "cat", "fish"}
	vocab, rows, err := read(tarball(t, words), 3, 1e-4)
	if err != nil {
		t.Fatal(err)
	}
	// Punctuation and accented words are skipped: the tokenizer never
	// produces them.
	if strings.Join(vocab, " ") != "the dog cat" {
		t.Fatalf("vocab %v", vocab)
	}
	// SIF: row = vector × a / (a + 1/(rank·H)), rank in the whole list.
	h := 1 + 1/2.0 + 1/3.0 + 1/4.0 + 1/5.0 + 1/6.0
	for i, rank := range []int{1, 3, 5} {
		want := float64(rank) * 1e-4 / (1e-4 + 1/(float64(rank)*h))
		if got := float64(rows[i][0]); math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: %g, want %g", vocab[i], got, want)
		}
	}
	if _, _, err := read(tarball(t, words), 5, 1e-4); err == nil {
		t.Fatal("too few words accepted")
	}
}
