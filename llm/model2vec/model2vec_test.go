package model2vec_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/llm/model2vec"
)

// writeModel writes a tiny model2vec folder: a WordPiece vocabulary and a
// vocabulary × 4 F32 (or F16) matrix whose row i is rows[i].
func writeModel(t *testing.T, dir string, vocab []string, rows [][]float32, f16 bool) {
	t.Helper()
	v := map[string]int{}
	for i, tok := range vocab {
		v[tok] = i
	}
	tok, _ := json.Marshal(map[string]any{
		"normalizer": map[string]any{"type": "BertNormalizer", "lowercase": true},
		"model":      map[string]any{"type": "WordPiece", "vocab": v, "unk_token": "[UNK]", "continuing_subword_prefix": "##"},
	})
	dims := len(rows[0])
	var data []byte
	dtype := "F32"
	for _, r := range rows {
		for _, f := range r {
			if f16 {
				dtype = "F16"
				data = binary.LittleEndian.AppendUint16(data, half(f))
			} else {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(f))
			}
		}
	}
	header, _ := json.Marshal(map[string]any{
		"__metadata__": map[string]string{"format": "pt"},
		"embeddings":   map[string]any{"dtype": dtype, "shape": []int{len(rows), dims}, "data_offsets": []int{0, len(data)}},
	})
	st := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	st = append(append(st, header...), data...)
	for name, b := range map[string][]byte{"tokenizer.json": tok, "model.safetensors": st,
		"config.json": []byte(`{"model_type":"model2vec","normalize":true,"hidden_dim":4}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// half encodes small exact values (multiples of 1/4 up to 8) as F16.
func half(f float32) uint16 {
	if f == 0 {
		return 0
	}
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	exp := int((bits>>23)&0xff) - 127 + 15
	return sign | uint16(exp)<<10 | uint16((bits>>13)&0x3ff)
}

var (
	vocab = []string{"[UNK]", "hello", "world", "##s", "cat", "café"}
	rows  = [][]float32{{9, 9, 9, 9}, {1, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 4, 0}, {0, 0, 0, 1}, {1, 1, 1, 1}}
)

func TestLoadAndEmbed(t *testing.T) {
	for _, f16 := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "tiny-m2v")
		os.Mkdir(dir, 0o755)
		writeModel(t, dir, vocab, rows, f16)
		e, err := model2vec.Load(dir, "", 4)
		if err != nil {
			t.Fatal(err)
		}
		if e.ID() != "model2vec/tiny-m2v/4" || e.Dims() != 4 {
			t.Fatalf("id %s dims %d", e.ID(), e.Dims())
		}
		// "Hello, WORLDS zebra!": hello + world + ##s; "," "!" and "zebra" are unknown and left out.
		vecs, err := e.Embed(context.Background(), []string{"Hello, WORLDS zebra!", "cat", "zebra", "Cafe\u0301"})
		if err != nil {
			t.Fatal(err)
		}
		norm := float32(math.Sqrt(1 + 4 + 16))
		// "zebra" alone has no known token: the unknown token's vector.
		// "Cafe\u0301" loses its accent as under BERT's normaliser; "cafe"
		// is not in the vocabulary: the unknown token's vector too.
		want := [][]float32{{1 / norm, 2 / norm, 4 / norm, 0}, {0, 0, 0, 1}, {0.5, 0.5, 0.5, 0.5}, {0.5, 0.5, 0.5, 0.5}}
		for i := range want {
			for j := range want[i] {
				if math.Abs(float64(vecs[i][j]-want[i][j])) > 1e-3 {
					t.Fatalf("f16=%v text %d: %v, want %v", f16, i, vecs[i], want[i])
				}
			}
		}
	}
}

func TestLoadRefusesMismatches(t *testing.T) {
	dir := t.TempDir()
	writeModel(t, dir, vocab, rows, false)
	if _, err := model2vec.Load(dir, "tiny", 8); err == nil || !strings.Contains(err.Error(), "has 4 dimensions, embedder.dims is 8") {
		t.Fatalf("dims mismatch: %v", err)
	}
	writeModel(t, dir, append(vocab, "extra"), rows, false)
	if _, err := model2vec.Load(dir, "tiny", 4); err == nil || !strings.Contains(err.Error(), "vocabulary has 7 tokens") {
		t.Fatalf("short matrix: %v", err)
	}
	if _, err := model2vec.Load(t.TempDir(), "tiny", 4); err == nil {
		t.Fatal("an empty folder loaded")
	}
}
