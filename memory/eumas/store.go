package eumas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The key spaces of the evaluations.
var (
	// KeyEval: e/ memory CID → messages.Evaluation (the full evaluation).
	KeyEval = []byte("e/")
	// KeyEvalSeq: x/evalseq → the insertion-log position evaluated so
	// far (8 bytes BE), the watermark.
	KeyEvalSeq = []byte("x/evalseq")
)

// EvalKey is the key of c's evaluation.
func EvalKey(c cid.Cid) []byte { return base.Join(KeyEval, c.Bytes()) }

// ErrConflict means two evaluators ran at once; the one that lost wrote
// nothing.
var ErrConflict = errors.New("memory: the evaluation watermark moved")

// Step reports one evaluator step.
type Step struct {
	// Evaluated counts the memories whose evaluation was stored, Failed
	// those every archetype failed on (recorded, no metrics).
	Evaluated, Failed int
	// More: the log holds memories after this step's.
	More bool
	// Watermark is the last insertion-log position evaluated.
	Watermark uint64
}

// Logged is a memory at its insertion-log position, as it is evaluated.
type Logged struct {
	Seq   uint64
	CID   cid.Cid
	Input Input
}

// Env is what the evaluations need of the memories they evaluate.
type Env interface {
	// Logged reads up to n memories logged after position after, in log
	// order, and the log's end position.
	Logged(r store.Reader, after uint64, n int) (items []Logged, end uint64, err error)
	// UpdateMeta is the op that changes the metadata of cids with fn.
	UpdateMeta(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) store.Op
	// VectorID is a memory's vector-index id (every stored memory has
	// one before it is evaluated).
	VectorID(c cid.Cid) (uint64, bool)
}

// Options configure the evaluations.
type Options struct {
	// Evaluator evaluates memories and queries; nil turns evaluation and
	// the metric path off.
	Evaluator Evaluator
	// Metrics are the dimensions of a metric profile (Metrics).
	Metrics []string
	// ImportanceSeed scales an evaluated priority into the memory's
	// importance (evaluation.importance_seed).
	ImportanceSeed float64
	Clock          clock.Clock
}

// Store keeps the evaluations of the stored memories and the metric
// profiles derived from them.
type Store struct {
	store interface {
		store.Committer
		store.Viewer
	}
	env      Env
	o        Options
	clock    clock.Clock
	profiles profileTable
	// loaded is closed once the profiles are loaded (BeginLoad), with
	// loadErr what the load failed with.
	loaded  chan struct{}
	loadErr error
	// evaluated is the watermark as this store last read or committed
	// it: only a step writes it, and reading it from Badger at every step
	// looked into each level for a key with a version in most of them.
	// Unknown until read once, and again after a step lost its race.
	evaluated struct {
		sync.Mutex
		mark  uint64
		known bool
	}
}

// watermark is the watermark as this store last read or committed it,
// if known.
func (s *Store) watermark() (uint64, bool) {
	s.evaluated.Lock()
	defer s.evaluated.Unlock()
	return s.evaluated.mark, s.evaluated.known
}

// setWatermark records the watermark a step read or committed; known
// false forgets it. One recorded from a view older than another
// evaluator's commit makes the next step lose its race, and forget it.
func (s *Store) setWatermark(mark uint64, known bool) {
	s.evaluated.Lock()
	defer s.evaluated.Unlock()
	s.evaluated.mark, s.evaluated.known = mark, known
}

// NewStore keeps evaluations in st.
func NewStore(st interface {
	store.Committer
	store.Viewer
}, env Env, o Options) *Store {
	loaded := make(chan struct{})
	close(loaded)
	return &Store{store: st, env: env, o: o, clock: clock.Or(o.Clock), loaded: loaded}
}

// Loads reports whether the metric profiles are kept at all (metrics are
// configured): whether a load at open has anything to do.
func (s *Store) Loads() bool { return len(s.o.Metrics) > 0 }

// BeginLoad marks the profiles as being loaded (LoadProfile, in the
// background) until done is called with the load's result: QueryProfile
// waits for it meanwhile, so the metric path never runs on a partial
// table; if the load failed, QueryProfile answers nil afterwards (the
// metric path off, as when nothing is evaluated) and LoadFailed says
// why. It must be called before the store is used concurrently.
func (s *Store) BeginLoad() (done func(error)) {
	ch := make(chan struct{})
	s.loaded = ch
	return func(err error) {
		s.loadErr = err
		close(ch)
	}
}

// Evaluator is the evaluator recall uses for queries; nil turns the
// metric path off.
func (s *Store) Evaluator() Evaluator { return s.o.Evaluator }

// EvaluatePending evaluates up to batch memories after the watermark with
// ev, as the evaluator actor does: unless more wait, its write shares a
// later group commit (store.Committer.UpdateDeferred). Memories without
// text (files) are passed over. Only the context's error, a store error
// or ErrConflict is returned.
func (s *Store) EvaluatePending(ctx context.Context, ev Evaluator, batch int) (Step, error) {
	return s.evaluate(ctx, ev, batch, true)
}

// evaluate is EvaluatePending; in the background or not (Settle, whose
// caller waits for every batch).
func (s *Store) evaluate(ctx context.Context, ev Evaluator, batch int, background bool) (Step, error) {
	var (
		items     []Logged
		mark, end uint64
	)
	mark, known := s.watermark()
	err := s.store.View(func(txn store.Reader) error {
		var err error
		if !known {
			if mark, err = store.ReadU64(txn, KeyEvalSeq); err != nil {
				return err
			}
		}
		items, end, err = s.env.Logged(txn, mark, batch)
		return err
	})
	if err == nil && !known {
		s.setWatermark(mark, true)
	}
	if err != nil || len(items) == 0 {
		return Step{Watermark: mark}, err
	}
	last := items[len(items)-1].Seq
	step := Step{More: last < end, Watermark: last}
	evals := make(map[cid.Cid]*messages.Evaluation, len(items))
	var cids []cid.Cid
	for _, it := range items {
		if strings.TrimSpace(it.Input.Text) == "" {
			continue
		}
		e, err := ev.Evaluate(ctx, it.Input)
		if err != nil {
			return Step{Watermark: mark}, err
		}
		if e.EvaluatedAt == 0 {
			e.EvaluatedAt = s.clock.Now().Unix()
		}
		evals[it.CID] = e
		cids = append(cids, it.CID)
	}
	// The records and their summaries are made here, outside the
	// committer: the operation only writes them and the metadata.
	records := make(map[cid.Cid][]byte, len(cids))
	sums := make(map[cid.Cid]*messages.EvalSummary, len(cids))
	for _, c := range cids {
		b, err := encodeEval(evals[c])
		if err != nil {
			return Step{Watermark: mark}, err
		}
		records[c], sums[c] = b, Aggregate(evals[c])
	}
	seed := s.o.ImportanceSeed
	profiles := map[cid.Cid][]float32{}
	update := s.store.Update
	if background && !step.More { // nothing waits for it but the actor
		update = s.store.UpdateDeferred
	}
	err = update(ctx, func(tx store.Tx) error {
		raw, err := tx.Get(KeyEvalSeq)
		if err != nil && !errors.Is(err, base.ErrNotFound) {
			return err
		}
		if base.DecodeU64(raw) != mark {
			return ErrConflict
		}
		for _, c := range cids {
			tx.Set(EvalKey(c), records[c])
		}
		step.Evaluated, step.Failed = 0, 0
		clear(profiles)
		if err := s.env.UpdateMeta(cids, func(meta *messages.MemoryMeta, c cid.Cid) {
			sum := sums[c]
			meta.Evaluation = sum
			step.Evaluated++
			if sum.Failed {
				step.Failed++
				return
			}
			meta.Importance = max(meta.Importance, seed*sum.Priority.Score)
			if p := Profile(sum, s.o.Metrics); p != nil {
				profiles[c] = p
			}
		})(tx); err != nil {
			return err
		}
		tx.Set(KeyEvalSeq, base.U64(last))
		tx.OnCommit(func() {
			s.setWatermark(last, true)
			for c, p := range profiles {
				s.setProfile(c, p)
			}
		})
		return nil
	})
	if errors.Is(err, ErrConflict) {
		s.setWatermark(0, false) // another step moved it: read it again
	}
	if err != nil {
		return Step{Watermark: mark}, err
	}
	return step, nil
}

// Settle evaluates everything stored so far (alongside the evaluator
// actor, if it runs: a step that loses the race is retried).
func (s *Store) Settle(ctx context.Context) error {
	if s.o.Evaluator == nil {
		return nil
	}
	for {
		step, err := s.evaluate(ctx, s.o.Evaluator, 256, false)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil || !step.More {
			return err
		}
	}
}

// Evaluation returns the stored evaluation of a memory.
func (s *Store) Evaluation(c cid.Cid) (*messages.Evaluation, error) {
	e := &messages.Evaluation{}
	err := s.store.View(func(txn store.Reader) error {
		item, err := txn.Item(EvalKey(c))
		if errors.Is(err, base.ErrNotFound) {
			return fmt.Errorf("%w: no evaluation of %s", base.ErrNotFound, c)
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return decodeEval(v, e) })
	})
	return e, err
}

// setProfile records a memory's metric profile under its vector id.
func (s *Store) setProfile(c cid.Cid, p []float32) {
	if id, ok := s.env.VectorID(c); ok {
		s.profiles.set(id, p)
	}
}

// LoadProfile adds a memory's metric profile to the derived table at
// open; raw is its metadata record, of which only the evaluation's fields
// are decoded.
func (s *Store) LoadProfile(c cid.Cid, raw []byte) error {
	if len(s.o.Metrics) == 0 {
		return nil
	}
	ev, err := evaluationOf(raw)
	if err != nil {
		return fmt.Errorf("%w: metadata of %s", base.ErrCorrupt, c)
	}
	p, err := rawProfile(ev.summary, ev.packed, s.o.Metrics)
	if err != nil {
		return fmt.Errorf("%w: evaluation of %s: %v", base.ErrCorrupt, c, err)
	}
	if p != nil {
		s.setProfile(c, p)
	}
	return nil
}

// TrimProfile appends to dst the evaluation's fields of raw, an encoded
// MemoryMeta, when they give a metric profile — what LoadProfile keeps of
// raw — and reports whether it did; LoadProfile of the result keeps the
// same. The metadata snapshot of the open stores this instead of the
// whole record (most evaluations give no profile: nothing then).
func (s *Store) TrimProfile(dst, raw []byte) ([]byte, bool, error) {
	if len(s.o.Metrics) == 0 {
		return dst, false, nil
	}
	ev, err := evaluationOf(raw)
	if err != nil {
		return dst, false, err
	}
	p, err := rawProfile(ev.summary, ev.packed, s.o.Metrics)
	if err != nil || p == nil {
		return dst, false, err
	}
	return append(append(dst, ev.fields[0]...), ev.fields[1]...), true, nil
}

// recordEvaluation is what a metadata record holds of its evaluation: the
// summary's value and the packed metrics' (meta.Marshal), and each whole
// field as encoded (tag included; nil when missing).
type recordEvaluation struct {
	summary, packed []byte
	fields          [2][]byte
}

// evaluationOf finds the evaluation's fields of raw, an encoded
// MemoryMeta: the first of each.
func evaluationOf(raw []byte) (ev recordEvaluation, err error) {
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return ev, protowire.ParseError(n)
		}
		field := raw[:n]
		raw = raw[n:]
		n = protowire.ConsumeFieldValue(num, typ, raw)
		if n < 0 {
			return ev, protowire.ParseError(n)
		}
		field, value := field[:len(field)+n], raw[:n]
		raw = raw[n:]
		if typ != protowire.BytesType {
			continue
		}
		value, _ = protowire.ConsumeBytes(value)
		switch {
		case num == metaEvaluationField && ev.fields[0] == nil:
			ev.summary, ev.fields[0] = value, field
		case num == meta.PackedField && ev.fields[1] == nil:
			ev.packed, ev.fields[1] = value, field
		}
	}
	return ev, nil
}

// MetricNames are the metrics a profile has, in its order (none when the
// profiles are not kept).
func (s *Store) MetricNames() []string { return s.o.Metrics }

// rawProfile is Profile of the encoded EvalSummary b and the packed
// metrics beside it (meta.Marshal), read without decoding them into a
// message: the open reads every memory's metadata for its profile, and
// most evaluations give none (nothing stands out), so the maps and
// strings of a decoded summary were most of the load's CPU (5 s of 15 at
// 200k memories, issue 15). It refuses what proto.Unmarshal refuses of
// the fields it reads (a map key that is not UTF-8, a malformed field),
// and packed metrics that do not parse or name no known metric;
// TestRawProfileIsProfile compares the two.
func rawProfile(b, packed []byte, names []string) ([]float32, error) {
	const (
		metricsField = 1
		failedField  = 3
		keyField     = 1
		valueField   = 2
	)
	var v []float32
	failed := false
	// set takes a metric's value; a later one of the same name replaces
	// an earlier one.
	set := func(metric string, x float64) {
		for i, name := range names {
			if name == metric {
				if v == nil {
					v = make([]float32, len(names))
				}
				v[i] = 0
				if x > 0 && !math.IsInf(x, 0) {
					v[i] = float32(x)
				}
			}
		}
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == metricsField && typ == protowire.BytesType:
			e, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			var key []byte
			var x float64
			for len(e) > 0 {
				num, typ, n := protowire.ConsumeTag(e)
				if n < 0 {
					return nil, protowire.ParseError(n)
				}
				e = e[n:]
				switch {
				case num == keyField && typ == protowire.BytesType:
					key, n = protowire.ConsumeBytes(e)
				case num == valueField && typ == protowire.Fixed64Type:
					var u uint64
					u, n = protowire.ConsumeFixed64(e)
					x = math.Float64frombits(u)
				default:
					n = protowire.ConsumeFieldValue(num, typ, e)
				}
				if n < 0 {
					return nil, protowire.ParseError(n)
				}
				e = e[n:]
			}
			if !utf8.Valid(key) {
				return nil, errors.New("a metric name that is not UTF-8")
			}
			set(string(key), x)
			continue
		case num == failedField && typ == protowire.VarintType:
			u, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			b = b[n:]
			failed = u != 0
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	if err := meta.RangePacked(packed, set); err != nil {
		return nil, err
	}
	if failed || v == nil || !llm.Normalize(v) {
		return nil, nil
	}
	return v, nil
}

// metaEvaluationField is MemoryMeta.evaluation's field number.
var metaEvaluationField = (&messages.MemoryMeta{}).ProtoReflect().Descriptor().Fields().ByName("evaluation").Number()

// QueryProfile evaluates the query as memories are evaluated; nil when
// the metric path cannot run or nothing stands out in the query. While
// the profiles load (BeginLoad) it waits for them: Nearest and ProfileOf,
// called after it, then see them all.
func (s *Store) QueryProfile(ctx context.Context, q string) ([]float32, error) {
	if s.o.Evaluator == nil {
		return nil, nil
	}
	select {
	case <-s.loaded:
		if s.loadErr != nil {
			return nil, nil // a partial table: the metric path is off (LoadFailed)
		}
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if s.profiles.len() == 0 || strings.TrimSpace(q) == "" {
		return nil, nil
	}
	e, err := s.o.Evaluator.Evaluate(ctx, Input{Text: q})
	if err != nil {
		return nil, err
	}
	return Profile(Aggregate(e), s.o.Metrics), nil
}

// LoadFailed is what the load of the profiles failed with (BeginLoad),
// once it ended; nil when it succeeded or is under way.
func (s *Store) LoadFailed() error {
	select {
	case <-s.loaded:
		return s.loadErr
	default:
		return nil
	}
}

// Nearest returns the k of the vector ids whose metric profiles are
// nearest prof (cosine above 0), best first.
func (s *Store) Nearest(prof []float32, ids []uint64, k int) []ProfileHit {
	return s.profiles.nearest(prof, ids, k)
}

// ProfileOf is the metric profile kept under a vector id; nil if none.
func (s *Store) ProfileOf(id uint64) []float32 { return s.profiles.get(id) }

// Profiles is the number of memories with a metric profile, once they
// are loaded (it waits for BeginLoad's load).
func (s *Store) Profiles() int {
	<-s.loaded
	return s.profiles.len()
}
