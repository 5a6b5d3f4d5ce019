// Package forget excises memories: Memoria's forgetting (issue 18).
// Memories are immutable and content-addressed; a forgotten one loses its
// content and everything derived from it, while its CID stays in the
// chains and edges that name it and a tombstone records it (z/ multihash:
// CID, kind, when, why, by whom, the rule that selected it, its sonas —
// never its content). Kept blocks are never rewritten, so every chain
// stays linear and every remaining block verifies.
//
// # Use
//
// Forgetter.Forget takes a Request: a Selector (CIDs; a sona, a label, an
// agent, a time range — together, the memories matching all; and
// DerivedFrom, what the reverse edges reach), a reason and a principal, a
// dry-run flag and, for limited principals, May, which says which
// memories it may forget. It plans on one snapshot — checking everything
// named, so a bad request writes nothing — then excises the plan in
// batches, each one store operation (one Badger transaction): all of a
// batch is forgotten or none of it, whatever stops the process.
//
// # Rules
//
//   - A summary that restated a forgotten memory is forgotten too: an
//     insight or a heartbeat merge (label "merge") whose edges reach a
//     memory that goes, to a fixed point, whatever its sonas.
//   - A forgotten file memory takes its content block with it.
//   - A CID a limited principal may not forget is refused as one stored
//     nowhere (ErrNotAllowed), so it learns nothing of other sonas.
//
// # What an excision removes
//
// The package deletes the block (b/), the metadata (m/) and the
// embedding (v/) and writes the tombstone; every other subsystem removes
// its own rows through a Part that Env.Parts lists, run in the batch's
// transaction before those deletions (the parts may still read the
// memories): see memory/forgetenv.go. In-memory state follows through
// tx.OnCommit (the vector index, the sonas' members) or the store's
// commit events on z/ keys (the full-text index, the decoded-memory
// cache).
//
// # Invariants
//
//   - store.ReadBlock answers a missing block that has a tombstone with
//     base.ErrForgotten (an ErrNotFound too), and Tx.PutBlock refuses to
//     store it again.
//   - A forgotten CID is never half gone: its tombstone, and the absence
//     of its block, metadata and embedding, commit together.
package forget
