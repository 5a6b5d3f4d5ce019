package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// EUMAS evaluation (seed 004). The evaluator walks the insertion log
// behind its watermark (x/evalseq), so nothing stored is ever skipped and
// the acknowledgement of a write never waits for it: each step evaluates
// the next memories and commits, in one transaction, every memory's full
// evaluation (e/), the aggregate in its metadata (which also seeds its
// importance), and the new watermark. The aggregates' metric profiles are
// kept in a small derived index for recall's metric path.

var (
	prefixEval = []byte("e/")
	keyEvalSeq = []byte("x/evalseq")
)

func evalKey(c cid.Cid) []byte { return base.Join(prefixEval, c.Bytes()) }

// ErrEvalConflict means two evaluators ran at once; the one that lost
// wrote nothing.
var ErrEvalConflict = errors.New("memory: the evaluation watermark moved")

// EvalStep reports one evaluator step.
type EvalStep struct {
	// Evaluated counts the memories whose evaluation was stored, Failed
	// those every archetype failed on (recorded, no metrics).
	Evaluated, Failed int
	// More: the log holds memories after this step's.
	More bool
	// Watermark is the last insertion-log position evaluated.
	Watermark uint64
}

// Evaluator is the evaluator recall uses for queries; nil turns the
// metric path off.
func (s *Self) Evaluator() eumas.Evaluator { return s.evaluator }

// EvaluatePending evaluates up to batch memories after the watermark with
// ev. Memories without text (files) are passed over. Only the context's
// error or a store error is returned.
func (s *Self) EvaluatePending(ctx context.Context, ev eumas.Evaluator, batch int) (EvalStep, error) {
	type pending struct {
		c  cid.Cid
		in eumas.Input
	}
	var (
		items      []pending
		mark, last uint64
		end        uint64
	)
	err := s.store.View(func(txn Reader) error {
		var err error
		if mark, err = store.ReadU64(txn, keyEvalSeq); err != nil {
			return err
		}
		if end, err = logEnd(txn); err != nil {
			return err
		}
		it := txn.NewIterator(IterOptions{Prefix: prefixLog, PrefetchValues: true, PrefetchSize: batch})
		defer it.Close()
		for it.Seek(logKey(mark + 1)); it.Valid() && len(items) < batch; it.Next() {
			var c cid.Cid
			var err error
			if last, c, err = logEntry(it.Item()); err != nil {
				return err
			}
			m, err := s.loadMemory(txn, c)
			if err != nil {
				return err
			}
			meta, err := getMeta(txn, c)
			if err != nil {
				return err
			}
			items = append(items, pending{c, eumas.Input{Text: m.Text(), Kind: meta.Kind}})
		}
		return nil
	})
	if err != nil || last == 0 {
		return EvalStep{Watermark: mark}, err
	}
	step := EvalStep{More: last < end, Watermark: last}
	evals := make(map[cid.Cid]*messages.Evaluation, len(items))
	var cids []cid.Cid
	for _, it := range items {
		if strings.TrimSpace(it.in.Text) == "" {
			continue
		}
		e, err := ev.Evaluate(ctx, it.in)
		if err != nil {
			return EvalStep{Watermark: mark}, err
		}
		if e.EvaluatedAt == 0 {
			e.EvaluatedAt = s.clock.Now().Unix()
		}
		evals[it.c] = e
		cids = append(cids, it.c)
	}
	seed := s.cfg.Evaluation.ImportanceSeed
	profiles := map[cid.Cid][]float32{}
	err = s.store.Update(ctx, func(tx Tx) error {
		raw, err := tx.Get(keyEvalSeq)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if base.DecodeU64(raw) != mark {
			return ErrEvalConflict
		}
		for _, c := range cids {
			b, err := proto.Marshal(evals[c])
			if err != nil {
				return err
			}
			tx.Set(evalKey(c), b)
		}
		step.Evaluated, step.Failed = 0, 0
		clear(profiles)
		if err := s.metaOp(cids, func(meta *messages.MemoryMeta, c cid.Cid) {
			sum := eumas.Aggregate(evals[c])
			meta.Evaluation = sum
			step.Evaluated++
			if sum.Failed {
				step.Failed++
				return
			}
			meta.Importance = max(meta.Importance, seed*sum.Priority.Score)
			if p := eumas.Profile(sum, s.metricNames); p != nil {
				profiles[c] = p
			}
		})(tx); err != nil {
			return err
		}
		tx.Set(keyEvalSeq, base.U64(last))
		tx.OnCommit(func() {
			for c, p := range profiles {
				s.setProfile(c, p)
			}
		})
		return nil
	})
	if err != nil {
		return EvalStep{Watermark: mark}, err
	}
	return step, nil
}

// Evaluation returns the stored evaluation of a memory.
func (s *Self) Evaluation(c cid.Cid) (*messages.Evaluation, error) {
	e := &messages.Evaluation{}
	var found bool
	err := s.store.View(func(txn Reader) error {
		var err error
		found, err = store.GetProto(txn, evalKey(c), e)
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: no evaluation of %s", ErrNotFound, c)
	}
	return e, err
}

// setProfile records a memory's metric profile under its vector id (every
// stored memory has an embedding, added before it is evaluated).
func (s *Self) setProfile(c cid.Cid, p []float32) {
	if id, ok := s.index.ID(c.KeyString()); ok {
		s.profiles.set(id, p)
	}
}

// loadProfile adds a memory's metric profile to the index; raw is its
// metadata record, of which only the evaluation field is decoded.
func (s *Self) loadProfile(c cid.Cid, raw []byte) error {
	if len(s.metricNames) == 0 {
		return nil
	}
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return fmt.Errorf("%w: metadata of %s", ErrCorrupt, c)
		}
		raw = raw[n:]
		if num == metaEvaluationField && typ == protowire.BytesType {
			b, n := protowire.ConsumeBytes(raw)
			if n < 0 {
				return fmt.Errorf("%w: metadata of %s", ErrCorrupt, c)
			}
			sum := &messages.EvalSummary{}
			if err := proto.Unmarshal(b, sum); err != nil {
				return fmt.Errorf("%w: evaluation of %s: %v", ErrCorrupt, c, err)
			}
			if p := eumas.Profile(sum, s.metricNames); p != nil {
				s.setProfile(c, p)
			}
			return nil
		}
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			return fmt.Errorf("%w: metadata of %s", ErrCorrupt, c)
		}
		raw = raw[n:]
	}
	return nil
}

// metaEvaluationField is MemoryMeta.evaluation's field number.
var metaEvaluationField = (&messages.MemoryMeta{}).ProtoReflect().Descriptor().Fields().ByName("evaluation").Number()

// queryProfile evaluates the query as memories are evaluated; nil when
// the metric path cannot run or nothing stands out in the query.
func (s *Self) queryProfile(ctx context.Context, q string) ([]float32, error) {
	if s.evaluator == nil || s.profiles.len() == 0 || strings.TrimSpace(q) == "" {
		return nil, nil
	}
	e, err := s.evaluator.Evaluate(ctx, eumas.Input{Text: q})
	if err != nil {
		return nil, err
	}
	return eumas.Profile(eumas.Aggregate(e), s.metricNames), nil
}

// decay is a memory's activity-relative decay factor (Decay), its rate
// scaled by its evaluated priority's decay_rate.
func (s *Self) decay(meta *messages.MemoryMeta, activity int64) float64 {
	lambda := s.cfg.Recall.Lambda * eumas.DecayMultiplier(meta.Evaluation)
	return Decay(lambda, meta.Importance, meta.Backbone, activity, meta.LastAccessTick)
}

// metricCandidates are the n memories of the sona (and the backbone)
// whose metric profiles are nearest prof: the metric path matches the
// query against the sona's own experience, in either scope.
func (s *Self) metricCandidates(sona, backbone string, prof []float32, n int) []pathHit {
	if prof == nil {
		return nil
	}
	var out []pathHit
	for _, h := range s.profiles.nearest(prof, s.ownMembers(sona, backbone, true), n) {
		if key, ok := s.index.Key(h.id); ok {
			out = append(out, pathHit{key: key, score: h.sim})
		}
	}
	return out
}

// metricSim is the cosine between the query's metric profile and the
// memory's; 0 when the memory has none.
func (sc *scorer) metricSim(c cid.Cid) float64 {
	if id, ok := sc.self.index.ID(c.KeyString()); ok {
		if p := sc.self.profiles.get(id); p != nil {
			return base.Dot(sc.profile, p)
		}
	}
	return 0
}

// SettleEvaluation evaluates everything stored so far (alongside the
// evaluator actor, if it runs: a step that loses the race is retried).
func (s *Self) SettleEvaluation(ctx context.Context) error {
	if s.evaluator == nil {
		return nil
	}
	for {
		step, err := s.EvaluatePending(ctx, s.evaluator, 256)
		if errors.Is(err, ErrEvalConflict) {
			continue
		}
		if err != nil || !step.More {
			return err
		}
	}
}
