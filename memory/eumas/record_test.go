package eumas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The dictionary of ID 1 is in every record written with it: it must
// never change (a better one takes a new ID).
func TestEvalDictionaryNeverChanges(t *testing.T) {
	const want = "2b00e2f8d8f65cb41abea4d68ccd1d495f14387580cf5aeb6c33cdb2bd96b445"
	if sum := sha256.Sum256(evalDict); hex.EncodeToString(sum[:]) != want || evalDictID != 1 {
		t.Fatalf("dictionary %d is %x, want %s: records compressed with it would not read", evalDictID, sum, want)
	}
}

func TestEvaluationRecords(t *testing.T) {
	h := NewHeuristic(config.DefaultArchetypes())
	var evals []*messages.Evaluation
	for _, in := range []Input{
		{Text: "orchard rain, pears shed in august", Kind: "note"},
		{Text: "I was so happy to learn the lesson; I wonder what it means for who I become.", Kind: "event"},
		{Text: "Ünïcode ✓ and a quote \" and a long tail " + string(bytes.Repeat([]byte("word "), 200))},
	} {
		e, err := h.Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		e.EvaluatedAt = 1795848902
		evals = append(evals, e)
	}
	evals = append(evals, &messages.Evaluation{}, &messages.Evaluation{
		Evaluator: "some-model",
		Archetypes: []*messages.ArchetypeEvaluation{{
			Archetype: "critic", Metrics: map[string]float64{"rigour": 0.25},
			Justifications: map[string]string{"rigour": "it argues from one example"},
		}},
		Failures: []*messages.EvalFailure{{Archetype: "ella", Error: "malformed answer twice"}},
	})
	for i, e := range evals {
		plain, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := encodeEval(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(rec, []byte{s2Tag, evalDictID}) {
			t.Fatalf("record %d does not begin with the S2 header: %x", i, rec[:min(8, len(rec))])
		}
		// Without the dictionary S2 leaves ~45%.
		if i < 2 && len(rec)*3 > len(plain) {
			t.Errorf("heuristic evaluation %d: record of %d bytes for a protobuf of %d, want a third or less", i, len(rec), len(plain))
		}
		for _, form := range [][]byte{rec, zstdRecord(t, plain), plain} { // and as stored before
			var got messages.Evaluation
			if err := decodeEval(form, &got); err != nil || !proto.Equal(&got, e) {
				t.Fatalf("evaluation %d read back as %v, %v; want %v", i, &got, err, e)
			}
		}
	}
	good, _ := encodeEval(evals[0])
	for name, bad := range map[string][]byte{
		"cut short":             good[:len(good)-3],
		"of another dictionary": append([]byte{s2Tag, evalDictID + 1}, good[2:]...),
		"header alone":          good[:1],
		"claiming too much":     append([]byte{s2Tag, evalDictID}, binary.AppendUvarint(nil, maxEvalRecord+1)...),
		"zstd cut short":        zstdRecord(t, []byte("0123456789abcdef"))[:12],
	} {
		if err := decodeEval(bad, &messages.Evaluation{}); !errors.Is(err, base.ErrCorrupt) {
			t.Errorf("a record %s: %v, want ErrCorrupt", name, err)
		}
	}
}

// zstdRecord is plain as records were written before: one zstd frame
// against the dictionary.
func zstdRecord(t *testing.T, plain []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(false),
		zstd.WithEncoderDictRaw(evalDictID, evalDict))
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeAll(plain, nil)
}

// Records of each form as this version wrote them read back forever,
// whatever the compression library's version.
func TestEvaluationRecordsAsWritten(t *testing.T) {
	want := &messages.Evaluation{Evaluator: "heuristic", EvaluatedAt: 1795848902, Archetypes: []*messages.ArchetypeEvaluation{{
		Archetype: "ella", Metrics: map[string]float64{"emotional_intensity": 0.5},
		Justifications: map[string]string{"emotional_intensity": "a few words of feeling"},
	}}}
	for form, rec := range map[string]string{
		"s2":   "3001682c0a550a04656c6c61121e0a13593414696e74656e73b97f0ce03f1a2d522000701216612066657720776f726473206f66206665656c696e6718c6f5a9d801681100",
		"zstd": "28b52ffd0100011d0200e4020a551e0a13696e74656e73e03f1a2d0a131216612066657720776f726473206f66206665656c696e6718c6f5a9d80600ad81fb5005805d04cbbbdc107b0096652c",
	} {
		b, _ := hex.DecodeString(rec)
		var got messages.Evaluation
		if err := decodeEval(b, &got); err != nil || !proto.Equal(&got, want) {
			t.Errorf("the %s record read as %v, %v; want %v", form, &got, err, want)
		}
	}
}

func BenchmarkEncodeEval(b *testing.B) {
	e, err := NewHeuristic(config.DefaultArchetypes()).Evaluate(context.Background(),
		Input{Text: "I was so happy to learn the lesson; I wonder what it means for who I become.", Kind: "event"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := encodeEval(e); err != nil {
			b.Fatal(err)
		}
	}
}

// The store writes the compressed record and reads both forms.
func TestStoredEvaluationRecords(t *testing.T) {
	ctx := context.Background()
	env := newLogEnv(t, "so happy and glad today", "a sad loss")
	ev := NewHeuristic(archetypes())
	s, st := openEvals(t, env, ev)
	if _, err := s.EvaluatePending(ctx, ev, 10); err != nil {
		t.Fatal(err)
	}
	happy, sad := env.log[0].CID, env.log[1].CID
	var rec []byte
	if err := st.View(func(r store.Reader) error {
		item, err := r.Item(EvalKey(happy))
		if err != nil {
			return err
		}
		rec, err = item.ValueCopy(nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(rec, []byte{s2Tag, evalDictID}) {
		t.Fatalf("stored record %x…, want an S2 block", rec[:8])
	}
	got, err := s.Evaluation(happy)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ev.Evaluate(ctx, env.log[0].Input)
	want.EvaluatedAt = got.EvaluatedAt
	if !proto.Equal(got, want) {
		t.Fatalf("evaluation read back %v, want %v", got, want)
	}
	// A record as written before: the plain protobuf.
	old := &messages.Evaluation{Evaluator: "heuristic", EvaluatedAt: 7}
	if err := st.Update(ctx, func(tx store.Tx) error { return store.SetProto(tx, EvalKey(sad), old) }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Evaluation(sad); err != nil || !proto.Equal(got, old) {
		t.Fatalf("a protobuf record read as %v, %v; want %v", got, err, old)
	}
}
