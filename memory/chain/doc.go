// Package chain keeps the sonas' chains: the registry of sonas (Sonas),
// the writer of appends (Writer) and the backbone (Backbone).
//
// A sona's chain is strictly linear: each ACT names its memory, the ACT
// before it and its seq. The chain's one owner (its actor) prepares a
// memory (Writer.Prepare, PrepareInsert: validation, encoding, embedding,
// nearest neighbours, dedup), plans the append (model.PlanAppend, pure:
// the ACT that will be the new head) and submits Writer.Op(plan), one
// transaction that
//
//   - checks that the head it extends is still the head (ErrChainConflict
//     otherwise, so a chain never forks) and that every edge and file the
//     memory names is stored (ErrInvalid otherwise);
//   - writes the memory's block, its first metadata (or, for a memory
//     that joins another sona, the join), its embedding, its
//     insertion-log position, the ACT block, the chain entry and the new
//     head — the metadata computed by pure functions of the plan
//     (firstMeta, join, advance);
//   - runs the contributions the other subsystems register
//     (Options.Contributions: the anchor, the associations, a merge's
//     archived sources, the dialogue page for the tiers, a dream insight's
//     entry), each its own writes in the same transaction — the append
//     composes them rather than knowing their key spaces;
//   - once durable, adds the embedding to the vector index, updates the
//     registry, and tells Options.OnAppended (the composition root: the
//     memory count, dream mode's idle time, the full-text index) — the
//     in-memory effects, which never run for an append that failed.
//
// Sonas holds every sona's committed record, its centroid (the mean of
// its name's embedding and its memories', summed in chain order so that a
// reopened self scores exactly as before) and its members (their vector
// ids), loaded at open and changed only by commits. The backbone is the
// chain of one reserved sona whose one writer is the consensus actor.
//
// # Invariants
//
//   - A chain never forks: an append commits only onto the head it was
//     planned on, at the seq it expected.
//   - An append is all or nothing: the memory, its ACT, its metadata, its
//     embedding, its log position and every contribution commit together.
//   - The insertion log (q/) holds every memory once, in the order they
//     came to exist; a memory's metadata records its position (Seq), and
//     a chain entry records the log's end when it was appended, so derived
//     indexes catch up from the log and the chains.
//   - A sona's name is unique: Sonas.Create checks it in the transaction
//     that takes it (which sees the sonas its batch creates before it),
//     so two creations of one name never both succeed. Only
//     CreateDuplicate, the backbone's own sona and an import's sonas may
//     share a name; a shared name resolves to none of them (ErrAmbiguous).
//   - A file memory's sona may name its file (f/): recorded by the append
//     and by uploads for a sona (PutFile), checked by FileInSonas.
//   - The registry and the vector index change only after a commit, on
//     the committer's goroutine, before the append is acknowledged: a
//     caller sees its acknowledged append in both.
//
// # Key spaces
//
//	s/  uuid                        Sona (protobuf): uuid, name, head, length,
//	                                created_at, last_memory
//	n/  name 0x00 uuid              empty: sonas by name (unique, unless created as a duplicate)
//	k/  uuid                        embedding of the sona's name
//	c/  uuid 0x00 seq (8 bytes BE)  ACT CID ‖ memory CID ‖ insertion-log end (8 bytes BE)
//	q/  log seq (8 bytes BE)        memory CID: the insertion log
//	f/  multihash 0x00 uuid         empty: the sona may name this raw block as a file
//	x/backbone                      uuid of the backbone's sona
//
// The append also writes m/ and v/ (memory/meta) and b/ (memory/store's
// blocks), and x/memseq, the log's end, which the store's acknowledged
// mark records.
package chain
