// Package consensus is Living Memory's multi-agent consensus on what the
// backbone (the self's permanent memories) holds. Agents contribute
// versions of a concept; the Ledger decides, for each contribution, that
// the concept commits to the backbone, stays pending, or is — or stays —
// a conflict, which a resolution settles.
//
// The decision is pure: Signal is the mean pairwise cosine of the
// versions' embeddings, and Decide compares it with the emergent bounds
// (Ledger.Bounds: mean ± log(β)·std of the live similarity distribution
// of every sona, β = thresholds.consensus_beta, the upper bound times
// living.stakes_high for high stakes). A committed concept writes its
// medoid version (the one closest to the others) to the backbone,
// labelled with the concept and its agents.
//
// An open conflict is a Conflict value (ConflictOf reads its r/ record,
// Conflict.Record writes one; Conflicts lists them); the API shows it
// through its own view, versions without their embeddings.
//
// What it needs of the rest of memory/ — the backbone's writer, the
// embedder, the count of memories — comes through Env.
//
// # Invariants
//
//   - Each outcome is one transaction: a commit appends to the backbone
//     and deletes the pending concept (and its conflict) together; a
//     resolution does the same, and fails whole if the conflict is gone.
//   - A conflict stays one until it converges (commits) or is resolved;
//     it keeps the time it began.
//   - One version per agent: a new contribution replaces the agent's.
//
// # Key spaces
//
//	p/  concept key  PendingConcept: versions awaiting consensus
//	r/  conflict id  Conflict: an open consensus conflict
package consensus
