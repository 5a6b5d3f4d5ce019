package eumas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

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
		if !bytes.HasPrefix(rec, zstdMagic) {
			t.Fatalf("record %d does not begin with zstd's magic number: %x", i, rec[:min(8, len(rec))])
		}
		if i < 2 && len(rec)*4 > len(plain) {
			t.Errorf("heuristic evaluation %d: record of %d bytes for a protobuf of %d, want a quarter or less", i, len(rec), len(plain))
		}
		for _, form := range [][]byte{rec, plain} { // and as stored before
			var got messages.Evaluation
			if err := decodeEval(form, &got); err != nil || !proto.Equal(&got, e) {
				t.Fatalf("evaluation %d read back as %v, %v; want %v", i, &got, err, e)
			}
		}
	}
	bad, _ := encodeEval(evals[0])
	bad[len(bad)/2] ^= 0xff
	bad = bad[:len(bad)-3]
	if err := decodeEval(bad, &messages.Evaluation{}); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a damaged record: %v, want ErrCorrupt", err)
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
	if !bytes.HasPrefix(rec, zstdMagic) {
		t.Fatalf("stored record %x…, want a zstd frame", rec[:8])
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
