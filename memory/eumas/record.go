package eumas

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// An evaluation record (e/) is its protobuf compressed as one S2 block
// against a fixed dictionary (evalDict), after a header of two bytes:
// s2Tag and the dictionary's ID. An evaluation repeats itself — each
// archetype names every metric twice (score and justification), the
// heuristic's justifications are a few phrases, each archetype's spoken
// annotation quotes the memory — so its protobuf, ~1.35 KB for the
// default archetypes, is ~260 bytes compressed. It is written once per
// memory and is the largest key space of the store's tree after the
// embeddings (which live in the value log): the bytes every flush and
// compaction copies, and that a compaction's reads bring into memory.
//
// Records written before are one zstd frame against the same dictionary
// (they begin with zstd's magic number), or a plain protobuf. zstd made
// them ~12% smaller (~230 bytes, 5,000 records of a grown store) but cost
// 28 µs a record against S2's 5: most of it the entropy tables a frame
// builds however short it is (README, issue 15, stop 65). A record's first
// byte tells its form: neither s2Tag (field 6, varint) nor zstd's first
// (field 5) is one of Evaluation's fields, which a plain protobuf's first
// byte would name.

// evalDict is the dictionary of ID evalDictID (evaldict/gen.go wrote it).
// Records name the ID they were compressed with; a dictionary, once used,
// never changes: a better one takes a new ID, and the decoder keeps every
// earlier one.
//
//go:embed evaldict/dict1.bin
var evalDict []byte

const evalDictID = 1

const s2Tag = 0x30

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxEvalRecord bounds what a record decompresses to.
const maxEvalRecord = 16 << 20

var (
	// evalS2Dict's first repeat offset is fixed (0), not searched for, so
	// that the dictionary stays the same whatever the library's version.
	evalS2Dict  = sync.OnceValue(func() *s2.Dict { return s2.MakeDictManual(evalDict, 0) })
	evalDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(maxEvalRecord),
			zstd.WithDecoderDictRaw(evalDictID, evalDict))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// encodeEval is e's record.
func encodeEval(e *messages.Evaluation) ([]byte, error) {
	scratch := evalScratch.Get().(*[]byte)
	defer evalScratch.Put(scratch)
	b, err := appendEval((*scratch)[:0], e)
	if err != nil {
		return nil, err
	}
	*scratch = b
	rec := make([]byte, 2+s2.MaxEncodedLen(len(b)))
	rec[0], rec[1] = s2Tag, evalDictID
	n := len(evalS2Dict().Encode(rec[2:], b)) // into rec[2:], which is large enough
	return rec[: 2+n : 2+n], nil
}

// evalScratch holds the protobuf of an evaluation while its record is
// compressed from it.
var evalScratch = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// decodeEval reads a record into e.
func decodeEval(rec []byte, e *messages.Evaluation) error {
	switch {
	case len(rec) > 0 && rec[0] == s2Tag:
		if len(rec) < 2 || rec[1] != evalDictID {
			return fmt.Errorf("%w: evaluation record of an unknown dictionary", base.ErrCorrupt)
		}
		if n, err := s2.DecodedLen(rec[2:]); err != nil || n > maxEvalRecord {
			return fmt.Errorf("%w: evaluation record: %d bytes, %v", base.ErrCorrupt, n, err)
		}
		b, err := evalS2Dict().Decode(nil, rec[2:])
		if err != nil {
			return fmt.Errorf("%w: evaluation record: %v", base.ErrCorrupt, err)
		}
		rec = b
	case bytes.HasPrefix(rec, zstdMagic):
		b, err := evalDecoder().DecodeAll(rec, nil)
		if err != nil {
			return fmt.Errorf("%w: evaluation record: %v", base.ErrCorrupt, err)
		}
		rec = b
	}
	if err := proto.Unmarshal(rec, e); err != nil {
		return fmt.Errorf("%w: evaluation record: %v", base.ErrCorrupt, err)
	}
	return nil
}
