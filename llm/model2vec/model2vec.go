// Package model2vec is a local, pure-Go embedder for model2vec-style
// static models: a folder with tokenizer.json (a Hugging Face tokenizer
// with a WordPiece or Unigram vocabulary), model.safetensors (one
// vocabulary × dims matrix, F32 or F16, named "embeddings") and
// config.json. A text's vector is the mean of its tokens' rows, L2
// normalised. No network and no cgo.
package model2vec

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/memoria-ai/memoria/llm"
)

// Provider is the provider's name in embedder IDs.
const Provider = "model2vec"

// maxTokenChars bounds a word WordPiece splits (longer words are unknown).
const maxTokenChars = 100

// Embedder is a loaded static model. It is immutable and safe for
// concurrent use.
type Embedder struct {
	id        string
	dims      int
	vectors   []float32 // vocabulary × dims, row-major
	vocab     map[string]int
	unk       int // -1 without an unknown token
	lowercase bool
	wordpiece bool
	prefix    string // continuing-subword prefix ("##")
}

var _ llm.Embedder = (*Embedder)(nil)

// Load reads the model in dir. name names the model in the embedder's ID
// (default: the folder's name); dims, when positive, must match the
// model's.
func Load(dir, name string, dims int) (*Embedder, error) {
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	return load(os.DirFS(dir), dir, name, dims)
}

// LoadFS reads the model at the root of fsys (e.g. one built in with
// go:embed) as Load does; name names it in the embedder's ID.
func LoadFS(fsys fs.FS, name string, dims int) (*Embedder, error) {
	return load(fsys, name, name, dims)
}

// load reads the model in fsys; dir names it in errors.
func load(fsys fs.FS, dir, name string, dims int) (*Embedder, error) {
	e := &Embedder{unk: -1}
	if err := e.loadTokenizer(fsys, dir, "tokenizer.json"); err != nil {
		return nil, err
	}
	rows, d, err := loadSafetensors(fsys, dir, "model.safetensors")
	if err != nil {
		return nil, err
	}
	if dims > 0 && d != dims {
		return nil, fmt.Errorf("model2vec: %s has %d dimensions, embedder.dims is %d", dir, d, dims)
	}
	if len(rows)/d < len(e.vocab) {
		return nil, fmt.Errorf("model2vec: %s: the vocabulary has %d tokens, the embeddings %d rows", dir, len(e.vocab), len(rows)/d)
	}
	if raw, err := fs.ReadFile(fsys, "config.json"); err == nil {
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return nil, fmt.Errorf("model2vec: config.json: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model2vec: %w", err)
	}
	e.vectors, e.dims = rows, d
	e.id = fmt.Sprintf("%s/%s/%d", Provider, name, d)
	return e, nil
}

// tokenizerJSON is the part of a Hugging Face tokenizer.json read here.
type tokenizerJSON struct {
	Normalizer *struct {
		Type      string `json:"type"`
		Lowercase *bool  `json:"lowercase"`
	} `json:"normalizer"`
	Model struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		UnkToken                string          `json:"unk_token"`
		UnkID                   *int            `json:"unk_id"`
		ContinuingSubwordPrefix string          `json:"continuing_subword_prefix"`
	} `json:"model"`
}

func (e *Embedder) loadTokenizer(fsys fs.FS, dir, file string) error {
	path := filepath.Join(dir, file)
	raw, err := fs.ReadFile(fsys, file)
	if err != nil {
		return fmt.Errorf("model2vec: %s: %w", dir, err)
	}
	var t tokenizerJSON
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("model2vec: %s: %w", path, err)
	}
	e.vocab = map[string]int{}
	switch t.Model.Type {
	case "WordPiece", "":
		if err := json.Unmarshal(t.Model.Vocab, &e.vocab); err != nil {
			return fmt.Errorf("model2vec: %s: WordPiece vocab: %w", path, err)
		}
		e.wordpiece = true
		e.prefix = t.Model.ContinuingSubwordPrefix
		if e.prefix == "" {
			e.prefix = "##"
		}
		if id, ok := e.vocab[t.Model.UnkToken]; ok {
			e.unk = id
		}
	case "Unigram":
		var list [][2]any
		if err := json.Unmarshal(t.Model.Vocab, &list); err != nil {
			return fmt.Errorf("model2vec: %s: Unigram vocab: %w", path, err)
		}
		for i, entry := range list {
			if s, ok := entry[0].(string); ok {
				e.vocab[s] = i
			}
		}
		if t.Model.UnkID != nil {
			e.unk = *t.Model.UnkID
		}
	default:
		return fmt.Errorf("model2vec: %s: tokenizer model %q is not supported (WordPiece or Unigram)", path, t.Model.Type)
	}
	if len(e.vocab) == 0 {
		return fmt.Errorf("model2vec: %s: empty vocabulary", path)
	}
	e.lowercase = t.Normalizer != nil && (t.Normalizer.Lowercase == nil || *t.Normalizer.Lowercase) &&
		(t.Normalizer.Type == "BertNormalizer" || t.Normalizer.Type == "Lowercase")
	return nil
}

// loadSafetensors reads the one 2-D tensor of a safetensors file ("embeddings"
// when there are several) as float32 rows.
func loadSafetensors(fsys fs.FS, dir, file string) ([]float32, int, error) {
	path := filepath.Join(dir, file)
	raw, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, 0, fmt.Errorf("model2vec: %s: %w", dir, err)
	}
	if len(raw) < 8 {
		return nil, 0, fmt.Errorf("model2vec: %s: too short for safetensors", path)
	}
	n := binary.LittleEndian.Uint64(raw)
	if n > uint64(len(raw)-8) {
		return nil, 0, fmt.Errorf("model2vec: %s: header length %d past the end", path, n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+n], &header); err != nil {
		return nil, 0, fmt.Errorf("model2vec: %s: header: %w", path, err)
	}
	data := raw[8+n:]
	type tensor struct {
		Dtype   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	var t *tensor
	for name, v := range header {
		if name == "__metadata__" {
			continue
		}
		var x tensor
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, 0, fmt.Errorf("model2vec: %s: tensor %s: %w", path, name, err)
		}
		if name == "embeddings" || t == nil {
			t = &x
		}
		if name == "embeddings" {
			break
		}
	}
	if t == nil || len(t.Shape) != 2 || t.Shape[0] <= 0 || t.Shape[1] <= 0 {
		return nil, 0, fmt.Errorf("model2vec: %s: no 2-D embeddings tensor", path)
	}
	rows, dims := t.Shape[0], t.Shape[1]
	size := map[string]int{"F32": 4, "F16": 2}[t.Dtype]
	if size == 0 {
		return nil, 0, fmt.Errorf("model2vec: %s: dtype %s is not supported (F32 or F16)", path, t.Dtype)
	}
	start, end := t.Offsets[0], t.Offsets[1]
	if start < 0 || end > int64(len(data)) || end-start != int64(rows*dims*size) {
		return nil, 0, fmt.Errorf("model2vec: %s: tensor data %d..%d does not hold %d×%d %s", path, start, end, rows, dims, t.Dtype)
	}
	buf := data[start:end]
	out := make([]float32, rows*dims)
	for i := range out {
		if size == 4 {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[i*4:]))
		} else {
			out[i] = f16(binary.LittleEndian.Uint16(buf[i*2:]))
		}
	}
	return out, dims, nil
}

// f16 converts an IEEE 754 half to a float32.
func f16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0:
		v := float32(frac) / 1024 * float32(math.Pow(2, -14))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	}
	return math.Float32frombits(sign | (exp+112)<<23 | frac<<13)
}

// Dims is the vector length.
func (e *Embedder) Dims() int { return e.dims }

// ID is "model2vec/<name>/<dims>".
func (e *Embedder) ID() string { return e.id }

// Embed returns the normalised mean token vector of each text. A text
// with no known token gets the unknown token's vector, or else a fixed
// unit vector (so every text embeds).
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, e.dims)
		n := 0
		for _, id := range e.Tokenize(t) {
			if id == e.unk {
				continue
			}
			row := e.vectors[id*e.dims : (id+1)*e.dims]
			for j, f := range row {
				v[j] += f
			}
			n++
		}
		if n == 0 && e.unk >= 0 {
			copy(v, e.vectors[e.unk*e.dims:(e.unk+1)*e.dims])
		}
		if !llm.Normalize(v) {
			clear(v)
			v[0] = 1
		}
		out[i] = v
	}
	return out, nil
}

// Tokenize returns the token ids of text: words split on white space and
// punctuation (BERT's pre-tokenizer), then WordPiece's greedy longest
// match, or for a Unigram vocabulary the longest known pieces ("▁"
// marks a word start).
func (e *Embedder) Tokenize(text string) []int {
	if e.lowercase {
		text = strings.ToLower(text)
	}
	text = stripAccents(text, e.lowercase)
	var ids []int
	for _, w := range words(text) {
		if e.wordpiece {
			ids = e.wordPiece(w, ids)
		} else {
			ids = e.unigram("▁"+w, ids)
		}
	}
	return ids
}

func stripAccents(s string, on bool) string {
	if !on {
		return s
	}
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// words splits on white space and makes each punctuation mark a word.
func words(s string) []string {
	var out []string
	start := -1
	for i, r := range s {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		case unicode.IsPunct(r) || unicode.IsSymbol(r):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
			out = append(out, string(r))
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

func (e *Embedder) wordPiece(w string, ids []int) []int {
	runes := []rune(w)
	if len(runes) > maxTokenChars {
		return appendUnk(ids, e.unk)
	}
	var pieces []int
	for start := 0; start < len(runes); {
		found := -1
		end := len(runes)
		for ; end > start; end-- {
			sub := string(runes[start:end])
			if start > 0 {
				sub = e.prefix + sub
			}
			if id, ok := e.vocab[sub]; ok {
				found = id
				break
			}
		}
		if found < 0 {
			return appendUnk(ids, e.unk) // the whole word is unknown
		}
		pieces = append(pieces, found)
		start = end
	}
	return append(ids, pieces...)
}

func (e *Embedder) unigram(w string, ids []int) []int {
	runes := []rune(w)
	for start := 0; start < len(runes); {
		end := len(runes)
		for ; end > start; end-- {
			if id, ok := e.vocab[string(runes[start:end])]; ok {
				ids = append(ids, id)
				break
			}
		}
		if end == start {
			ids = appendUnk(ids, e.unk)
			end = start + 1
		}
		start = end
	}
	return ids
}

func appendUnk(ids []int, unk int) []int {
	if unk >= 0 {
		return append(ids, unk)
	}
	return ids
}
