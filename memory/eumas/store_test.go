package eumas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// logEnv is an Env over a scripted insertion log: positions 1..len(log).
type logEnv struct {
	mu   sync.Mutex
	log  []Logged
	meta map[cid.Cid]*messages.MemoryMeta
}

func newLogEnv(t *testing.T, texts ...string) *logEnv {
	e := &logEnv{meta: map[cid.Cid]*messages.MemoryMeta{}}
	for i, text := range texts {
		h, err := multihash.Sum([]byte(fmt.Sprint(i, text)), multihash.SHA2_256, -1)
		if err != nil {
			t.Fatal(err)
		}
		c := cid.NewCidV1(cid.DagCBOR, h)
		e.log = append(e.log, Logged{Seq: uint64(i + 1), CID: c, Input: Input{Text: text, Kind: "note"}})
		e.meta[c] = &messages.MemoryMeta{Kind: "note", Importance: 0.1}
	}
	return e
}

func (e *logEnv) Logged(_ store.Reader, after uint64, n int) ([]Logged, uint64, error) {
	var out []Logged
	for _, l := range e.log {
		if l.Seq > after && len(out) < n {
			out = append(out, l)
		}
	}
	return out, uint64(len(e.log)), nil
}

func (e *logEnv) UpdateMeta(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) store.Op {
	return func(store.Tx) error {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range cids {
			fn(e.meta[c], c)
		}
		return nil
	}
}

func (e *logEnv) VectorID(c cid.Cid) (uint64, bool) {
	for _, l := range e.log {
		if l.CID == c {
			return l.Seq, true
		}
	}
	return 0, false
}

func openEvals(t *testing.T, env Env, ev Evaluator) (*Store, *store.Store) {
	t.Helper()
	st, err := store.OpenMemory(store.OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return NewStore(st, env, Options{Evaluator: ev, Metrics: Metrics(archetypes()), ImportanceSeed: 1}), st
}

func TestEvaluatePendingWalksTheLog(t *testing.T) {
	ctx := context.Background()
	env := newLogEnv(t, "so happy and glad today", "  ", "a sad loss", "the first new thing")
	ev := NewHeuristic(archetypes())
	s, _ := openEvals(t, env, ev)

	step, err := s.EvaluatePending(ctx, ev, 2)
	if err != nil || step != (Step{Evaluated: 1, More: true, Watermark: 2}) {
		t.Fatalf("first step %+v, %v; want 1 evaluated (the blank one passed over), more, watermark 2", step, err)
	}
	if step, err = s.EvaluatePending(ctx, ev, 10); err != nil || step != (Step{Evaluated: 2, Watermark: 4}) {
		t.Fatalf("second step %+v, %v; want the last 2, watermark 4", step, err)
	}
	if step, err = s.EvaluatePending(ctx, ev, 10); err != nil || step != (Step{Watermark: 4}) {
		t.Fatalf("third step %+v, %v; want nothing left", step, err)
	}
	happy := env.log[0].CID
	full, err := s.Evaluation(happy)
	if err != nil || len(full.Archetypes) == 0 {
		t.Fatalf("evaluation of the first memory: %v, %v", full, err)
	}
	if _, err := s.Evaluation(env.log[1].CID); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("evaluation of the blank memory: %v, want ErrNotFound", err)
	}
	meta := env.meta[happy]
	if meta.Evaluation == nil || meta.Importance < meta.Evaluation.Priority.Score {
		t.Fatalf("metadata not seeded: %+v", meta)
	}
	if s.ProfileOf(1) == nil || s.ProfileOf(2) != nil || s.Profiles() != 3 {
		t.Fatalf("profiles: %v %v, %d of them, want 3 (not the blank memory's)", s.ProfileOf(1), s.ProfileOf(2), s.Profiles())
	}
	q, err := s.QueryProfile(ctx, "happy glad")
	if err != nil || q == nil {
		t.Fatalf("query profile %v, %v", q, err)
	}
	if hits := s.Nearest(q, []uint64{1, 2, 3, 4}, 1); len(hits) != 1 || hits[0].ID != 1 {
		t.Fatalf("nearest to a glad query: %v, want id 1", hits)
	}
}

// moving is an evaluator that moves the watermark behind the step's back,
// as a second evaluator would.
type moving struct {
	Evaluator
	st *store.Store
}

func (m moving) Evaluate(ctx context.Context, in Input) (*messages.Evaluation, error) {
	if err := m.st.Update(ctx, func(tx store.Tx) error { tx.Set(KeyEvalSeq, base.U64(9)); return nil }); err != nil {
		return nil, err
	}
	return m.Evaluator.Evaluate(ctx, in)
}

func TestEvaluatePendingConflictWritesNothing(t *testing.T) {
	ctx := context.Background()
	env := newLogEnv(t, "so happy")
	s, st := openEvals(t, env, nil)
	step, err := s.EvaluatePending(ctx, moving{NewHeuristic(archetypes()), st}, 10)
	if !errors.Is(err, ErrConflict) || step.Watermark != 0 {
		t.Fatalf("step %+v, %v; want ErrConflict at watermark 0", step, err)
	}
	if _, err := s.Evaluation(env.log[0].CID); !errors.Is(err, base.ErrNotFound) || env.meta[env.log[0].CID].Evaluation != nil || s.Profiles() != 0 {
		t.Fatalf("the losing step wrote something: %v", err)
	}
}

// A step starts from the watermark the last step here committed, not
// read again; one that loses the race to another evaluator reads it again
// for the next: two evaluators over one store take turns, each memory
// evaluated once.
func TestEvaluatorsOverOneStoreTakeTurns(t *testing.T) {
	ctx := context.Background()
	env := newLogEnv(t, "so happy", "a sad loss", "glad again", "the last one")
	ev := NewHeuristic(archetypes())
	a, st := openEvals(t, env, ev)
	b := NewStore(st, env, Options{Evaluator: ev, Metrics: Metrics(archetypes()), ImportanceSeed: 1})
	if step, err := a.EvaluatePending(ctx, ev, 1); err != nil || step.Watermark != 1 {
		t.Fatalf("a's first step %+v, %v", step, err)
	}
	if step, err := b.EvaluatePending(ctx, ev, 1); err != nil || step.Watermark != 2 {
		t.Fatalf("b's first step %+v, %v: want it to read a's watermark", step, err)
	}
	// a's watermark (1) is behind the store's (2): it loses once, then
	// goes on from the store's.
	if step, err := a.EvaluatePending(ctx, ev, 1); !errors.Is(err, ErrConflict) {
		t.Fatalf("a's step behind b's: %+v, %v, want ErrConflict", step, err)
	}
	if step, err := a.EvaluatePending(ctx, ev, 1); err != nil || step.Watermark != 3 || step.Evaluated != 1 {
		t.Fatalf("a's step after losing %+v, %v, want the third memory", step, err)
	}
	if step, err := b.EvaluatePending(ctx, ev, 10); !errors.Is(err, ErrConflict) {
		t.Fatalf("b's step behind a's: %+v, %v, want ErrConflict", step, err)
	}
	if step, err := b.EvaluatePending(ctx, ev, 10); err != nil || step != (Step{Evaluated: 1, Watermark: 4}) {
		t.Fatalf("b's last step %+v, %v, want the fourth memory", step, err)
	}
	for _, l := range env.log {
		if env.meta[l.CID].Evaluation == nil {
			t.Errorf("%s was not evaluated", l.Input.Text)
		}
	}
}

func TestSettle(t *testing.T) {
	texts := make([]string, 600)
	for i := range texts {
		texts[i] = fmt.Sprint("happy day ", i)
	}
	env := newLogEnv(t, texts...)
	s, _ := openEvals(t, env, NewHeuristic(archetypes()))
	if err := s.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Profiles() != len(texts) {
		t.Fatalf("%d profiles after Settle, want %d", s.Profiles(), len(texts))
	}
	off, _ := openEvals(t, env, nil)
	if err := off.Settle(context.Background()); err != nil || off.Profiles() != 0 {
		t.Fatalf("Settle without an evaluator: %v, %d profiles", err, off.Profiles())
	}
}

// TestRawProfileIsProfile: the open's profile of an encoded summary
// (rawProfile) is Profile of the decoded one, for summaries with and
// without the metrics named, failed ones, odd values, repeated entries,
// unknown fields, alone and in a record as stored (its metrics packed
// when they can be: meta.Marshal); and what proto.Unmarshal refuses, it
// refuses.
func TestRawProfileIsProfile(t *testing.T) {
	names := Metrics(config.Default().Evaluation.Archetypes)
	if len(names) < 2 {
		t.Fatalf("metrics %v", names)
	}
	pool := append(slices.Clone(names), "other", "", "zzz")
	values := []float64{0, -1, 0.25, 1, 3.5, 0.123, math.Inf(1), math.Inf(-1), math.NaN(), 1e-300}
	rng := rand.New(rand.NewPCG(1, 2))
	packed := 0
	for i := range 5000 {
		sum := &messages.EvalSummary{Metrics: map[string]float64{}, Failed: rng.IntN(10) == 0}
		for range rng.IntN(6) {
			if i%2 == 0 { // what can be packed: the table's metrics, whole thousandths
				sum.Metrics[names[rng.IntN(len(names))]] = values[rng.IntN(6)]
				continue
			}
			sum.Metrics[pool[rng.IntN(len(pool))]] = values[rng.IntN(len(values))]
		}
		if rng.IntN(2) == 0 {
			sum.Priority = &messages.Priority{Score: rng.Float64(), DecayRate: rng.Float64(), Factors: []string{"a"}}
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(sum)
		if err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 { // a repeated entry (the later one wins) and an unknown field
			b = protowire.AppendTag(b, 1, protowire.BytesType)
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, names[i%len(names)])
			e = protowire.AppendTag(e, 2, protowire.Fixed64Type)
			e = protowire.AppendFixed64(e, math.Float64bits(values[i%len(values)]))
			b = protowire.AppendBytes(b, e)
			b = protowire.AppendTag(b, 99, protowire.VarintType)
			b = protowire.AppendVarint(b, 7)
		}
		want := &messages.EvalSummary{}
		if err := proto.Unmarshal(b, want); err != nil {
			t.Fatal(err)
		}
		got, err := rawProfile(b, nil, names)
		if err != nil {
			t.Fatalf("summary %d: %v", i, err)
		}
		if w := Profile(want, names); !slices.Equal(got, w) {
			t.Fatalf("summary %d (%v): raw %v, decoded %v", i, want, got, w)
		}
		// In a metadata record as it is stored, its metrics packed when
		// they can be (meta.Marshal): the two fields read together.
		rec, err := meta.Marshal(&messages.MemoryMeta{Kind: "note", Evaluation: want})
		if err != nil {
			t.Fatal(err)
		}
		decoded := &messages.MemoryMeta{}
		if err := meta.Unmarshal(rec, decoded); err != nil {
			t.Fatal(err)
		}
		ev, err := evaluationOf(rec)
		if err != nil {
			t.Fatal(err)
		}
		if packable := ev.packed != nil; packable {
			packed++
		}
		got, err = rawProfile(ev.summary, ev.packed, names)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if w := Profile(decoded.Evaluation, names); !slices.Equal(got, w) {
			t.Fatalf("record %d (%v): raw %v, decoded %v", i, decoded, got, w)
		}
	}
	if packed < 500 {
		t.Fatalf("only %d of the records had their metrics packed", packed)
	}
	// Refused alike: a truncated summary, a metric name that is not UTF-8.
	var bad []byte
	bad = protowire.AppendTag(bad, 1, protowire.BytesType)
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendBytes(e, []byte{0xff, 0xfe})
	bad = protowire.AppendBytes(bad, e)
	good, _ := proto.Marshal(&messages.EvalSummary{Metrics: map[string]float64{names[0]: 1}})
	for _, b := range [][]byte{bad, good[:len(good)-3]} {
		if proto.Unmarshal(b, &messages.EvalSummary{}) == nil {
			t.Fatalf("proto.Unmarshal took %x", b)
		}
		if _, err := rawProfile(b, nil, names); err == nil {
			t.Fatalf("rawProfile took %x", b)
		}
	}
	// Packed metrics that do not parse, or name a metric the table does
	// not hold, are refused too.
	for _, p := range [][]byte{{0x01}, {byte(len(meta.PackedMetrics)), 0x02}} {
		if _, err := rawProfile(nil, p, names); err == nil {
			t.Fatalf("rawProfile took packed %x", p)
		}
	}
}
