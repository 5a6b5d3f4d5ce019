package eumas

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// An evaluation record (e/) is its protobuf compressed as one zstd frame
// against a fixed dictionary (evalDict). An evaluation repeats itself — each
// archetype names every metric twice (score and justification), the
// heuristic's justifications are a few phrases, each archetype's spoken
// annotation quotes the memory — so its protobuf, ~1.35 KB for the
// default archetypes, is ~150 bytes compressed (~300 in Badger's
// Snappy-compressed blocks, where records do not share a dictionary).
// It is written once per memory and is the largest key space of the
// store's tree after the embeddings (which live in the value log): the
// bytes every flush and compaction copies, and that a compaction's reads
// bring into memory.
//
// A record that does not begin with zstd's magic number is a protobuf as
// stored before (field 5, which that first byte would be, is not one of
// Evaluation's).

// evalDict is the dictionary of ID evalDictID (evaldict/gen.go wrote it).
// Records name the ID they were compressed with; a dictionary, once used,
// never changes: a better one takes a new ID, and the decoder keeps every
// earlier one.
//
//go:embed evaldict/dict1.bin
var evalDict []byte

const evalDictID = 1

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxEvalRecord bounds what a record decompresses to.
const maxEvalRecord = 16 << 20

var (
	evalEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest), // the default level: 1.7 times slower, 2% smaller
			zstd.WithEncoderConcurrency(1),
			zstd.WithEncoderCRC(false), // the store checks its blocks' checksums
			zstd.WithEncoderDictRaw(evalDictID, evalDict))
		if err != nil {
			panic(err)
		}
		return e
	})
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
	b, err := proto.Marshal(e)
	if err != nil {
		return nil, err
	}
	return evalEncoder().EncodeAll(b, nil), nil
}

// decodeEval reads a record into e.
func decodeEval(rec []byte, e *messages.Evaluation) error {
	if bytes.HasPrefix(rec, zstdMagic) {
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
