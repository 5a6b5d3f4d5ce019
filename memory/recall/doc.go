// Package recall answers recalls: which memories matter for a prompt in a
// sona (DESIGN.md §5). Recaller.Recall gathers candidates from the dense
// (HNSW), full-text (BM25) and metric (EUMAS) paths and an affinity path
// of the associations and co-access partners of the best of them, fuses
// them (FuseRRF, FuseWeighted), scores each (ScoreHit: relevance × kind
// weight, recency by activity-relative Decay, importance, sona
// similarity), drops what falls below the emergent retrieval threshold,
// takes the k hits that fit the budget (by score or by maximal marginal
// relevance; near-identical memories folded into one), adds co-access
// partners and an expansion along edges, and returns them in
// topological order (TopoSort). Ranked gives the hits in rank order;
// every result carries its Explain, whose contributions add up to its
// score.
//
// Recall reads and never writes. What a recall leaves behind — the access
// of what it returned (meta.Touch), the co-access of its hits
// (assoc.Strengthen), its query log entry (l/) — comes back as its Trace,
// writes the caller submits (Trace.Submit) or, for a peek, drops.
//
// What it reads besides the store comes through Env, by role: the sona
// registry (memory/chain), the memories' cached metadata (memory/meta),
// the full-text index (memory/index), the metric profiles
// (memory/eumas), the vector index (memory/vector), the embedder. Fusion,
// decay, scoring, the topological order and the diversity rules are pure
// and tested here (testdata/scoring: `go test ./memory/recall -run
// TestScoringGolden -rewrite`); recall over a whole self is tested in
// package memory.
//
// # Invariants
//
//   - Deterministic: the same store, query and clock give the same
//     result, ties broken by CID.
//   - A memory recall must not return (another sona's in sona scope,
//     newer than AsOf, archived, expired, a low-confidence insight,
//     excluded) is never a candidate, however it was reached.
//   - The contributions of a result's Explain add up to its score.
//   - Read-your-writes: a memory whose append was acknowledged is found
//     (the vector index is updated, and the full-text index has noted it,
//     before the acknowledgement).
//
// # Key spaces
//
//	l/  unix ns (8 bytes BE) sona uuid  QueryLog (protobuf): a logged
//	    recall (written by its Trace when recall.query_log is on; the
//	    latest recall.query_log_keep are kept: querylog.go)
package recall
