// Package eumas evaluates memories as EUMAS does (seed 004) and keeps the
// evaluations.
//
// The evaluators: each configured archetype gives a memory scalar metrics
// (0..1) with a justification each, annotations, and a priority {score,
// factors, decay_rate}; the memory keeps their aggregate (Aggregate) and a
// metric profile (Profile: a unit vector over Metrics). LLM asks a
// language model with one JSON-schema'd prompt per archetype and
// validates the answer; Heuristic is deterministic and offline. Both are
// pure: no store, no transport.
//
// The storage (Store, Self.Evals): the evaluator walks the insertion log
// behind its watermark, so nothing stored is ever skipped and the
// acknowledgement of a write never waits for it. Each step
// (EvaluatePending) evaluates the next memories and commits, in one
// transaction, every memory's full evaluation, the aggregate in its
// metadata (which also seeds its importance: max(importance,
// importance_seed·priority)) and the new watermark. Key spaces:
//
//	e/         memory CID     messages.Evaluation: every archetype's metrics, compressed (S2)
//	                          against a fixed dictionary (record.go)
//	x/evalseq                 the last insertion-log position evaluated (8 bytes BE)
//
// and the evaluation field of the m/ metadata record (written through
// Env.UpdateMeta).
//
// Invariants: the watermark only moves forward, by the step that
// evaluated up to it; a step that finds the watermark moved since it read
// it (another evaluator ran) writes nothing and returns ErrConflict —
// a step starts from the watermark its store last read or committed,
// read again after a conflict;
// memories without text (files) are passed over, never evaluated.
//
// The metric profiles of the evaluated memories are derived state, kept
// in memory by vector-index id for recall's metric path (Nearest,
// ProfileOf, QueryProfile) and rebuilt from the metadata after open, in
// the background (LoadProfile, BeginLoad: QueryProfile waits for it).
//
// What it needs of the memories (Env): the insertion log read after a
// position, a metadata update op, and the vector-index ids. StoreEnv is
// that Env over the store (memory/chain's insertion log, memory/meta) and
// the vector index.
package eumas
