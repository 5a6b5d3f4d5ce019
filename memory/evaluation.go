package memory

import (
	"errors"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// EUMAS evaluation (seed 004) lives in memory/eumas (Self.Evals); this
// file is what it needs of Self and recall's metric path over its
// profiles.

// The evaluations' names (see memory/eumas), kept for callers during the
// move (issue 14).
type EvalStep = eumas.Step

// ErrEvalConflict means two evaluators ran at once (eumas.ErrConflict).
var ErrEvalConflict = eumas.ErrConflict

// evalEnv is what the evaluations need of Self.
type evalEnv struct{ s *Self }

func (e evalEnv) Logged(txn store.Reader, after uint64, n int) ([]eumas.Logged, uint64, error) {
	end, err := logEnd(txn)
	if err != nil {
		return nil, 0, err
	}
	var out []eumas.Logged
	it := txn.NewIterator(IterOptions{Prefix: prefixLog, PrefetchValues: true, PrefetchSize: n})
	defer it.Close()
	for it.Seek(logKey(after + 1)); it.Valid() && len(out) < n; it.Next() {
		seq, c, err := logEntry(it.Item())
		if err != nil {
			return nil, 0, err
		}
		m, err := e.s.Memories.MemoryIn(txn, c)
		if errors.Is(err, ErrForgotten) {
			continue // nothing left to evaluate
		}
		if err != nil {
			return nil, 0, err
		}
		meta, err := getMeta(txn, c)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, eumas.Logged{Seq: seq, CID: c, Input: eumas.Input{Text: m.Text(), Kind: meta.Kind}})
	}
	return out, end, nil
}

func (e evalEnv) UpdateMeta(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) store.Op {
	return metaOp(cids, fn)
}

func (e evalEnv) VectorID(c cid.Cid) (uint64, bool) { return e.s.index.ID(c.KeyString()) }

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
	for _, h := range s.Evals.Nearest(prof, s.Sonas.Members(sona, backbone, true), n) {
		if key, ok := s.index.Key(h.ID); ok {
			out = append(out, pathHit{key: key, score: h.Sim})
		}
	}
	return out
}

// metricSim is the cosine between the query's metric profile and the
// memory's; 0 when the memory has none.
func (sc *scorer) metricSim(c cid.Cid) float64 {
	if id, ok := sc.self.index.ID(c.KeyString()); ok {
		if p := sc.self.Evals.ProfileOf(id); p != nil {
			return base.Dot(sc.profile, p)
		}
	}
	return 0
}
