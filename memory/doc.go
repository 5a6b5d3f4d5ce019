// Package memory is Memoria's domain: the immutable IPLD memory model, the
// Badger store that is its source of truth, the derived indexes, recall
// and the subsystems over them, composed by Self.
//
// It is being split into packages (issue 14); what has moved so far:
//
//	memory/base   the error classes, Page, vector arithmetic, key helpers
//	memory/model  Memory, Act, their encoding and CIDs; Prepared, Append
//	memory/store  the store: Reader/Tx/Committer, group commit, commit
//	              events, Badger and in-memory backends, storetest
//	memory/tiers  MemoryOS: the pure tiers and their storage (Self.Tiers)
//	memory/assoc  associations, co-access, emergent thresholds (Self.Assoc)
//	memory/anchor the anchor list, its rules and cursor (Self.Anchors)
//	memory/consensus  the agents' consensus on the backbone (Self.Consensus)
//	memory/eumas  the EUMAS evaluators and the evaluations (Self.Evals)
//	memory/meta   each memory's metadata and embedding, cached reads,
//	              importance (Self.Memories)
//	memory/chain  the sona registry (Self.Sonas), the chains' writer and
//	              the insert path (Self.Chains), the backbone
//	              (Self.Backbone), files' sonas
//	memory/index  the full-text index kept in step with the store's
//	              commit events (Self.Text); the vector index's snapshot
//	              (VectorSnapshots: written, restored at open)
//	memory/transfer  export, import, reembed (Self.Transfer)
//	memory/living  sweep, compression, dream: Living Memory (Self.Living)
//	memory/recall  recall, its scoring and its trace (Self.Recaller)
//	memory/prompt  a step's prompt and the memories a step stores
//	memory/advance one step of a sona (an advance) as a pure machine
//	              planning effects; the sona actor carries them out
//	memory/migrate the layout version and the migrations from older
//	              layouts, run by Open
//	memory/forget  excision: tombstones, and everything derived removed
//	              in one operation per batch (Self.Forget; wired in
//	              forgetenv.go)
//	memory/memorytest  whole selves for the tests of the packages above
//	              (Open, an Owner appending as a sona's actor, Recall
//	              with its trace submitted, child processes to kill)
//
// Callers import the packages; package memory keeps the composition root
// (self.go: Open, Close, the subsystems as fields), what each subsystem adds to an
// append and what follows a committed append (append.go), the wiring of
// transfer, living and the tiers to the subsystems they read and write
// (env.go), the parts of an excision (forgetenv.go), and the metadata
// snapshot (metasnap.go: what the open takes of every memory's metadata,
// read back with only the records written since). What a subsystem
// needs of the store alone lives with it (eumas.StoreEnv,
// index.VectorSnapshots).
//
// env.go and forgetenv.go stay here because they are wiring between peers:
// each adapter satisfies one subsystem's Env with the others (transfer's
// Records reads chain's and meta's key spaces; forget's Parts name the
// rows of anchor, assoc, chain, eumas, living, recall and the tiers).
// Moved into the package it serves, an adapter would make that package
// import its peers — the coupling its Env interface exists to avoid, and
// for forget nearly all of memory/. Only the composition root knows every
// subsystem.
//
// # Tests
//
// Each package's tests live with it: its own parts where they suffice
// (chaintest, the store's in-memory backend), a whole self built by
// memorytest where the test is about the composition (an append through
// every contribution, a recall over the real indexes, a reopen, a kill).
// The root keeps the tests of Open itself (reopen, the embedder's
// identity), the fault tests of an open self (a full disk, kill -9,
// damaged files), the transport-purity rule and the benchmarks (the A/B
// commands run `go test ./memory -bench …`).
//
// # Domain types and stored records
//
// The generated messages types are the stored records and the API's
// payloads; the program works on Go types converted at the storage edge,
// CIDs as cid.Cid values, and the API's views are built from those
// field by field: model.Sona (a chain's state), tiers.Segment,
// tiers.Persona, consensus.Conflict, living.Insight (no record of its own: a memory, its
// mark and the g/ index), meta.Metadata (the API's view of a memory's
// metadata; the subsystems still read and write messages.MemoryMeta).
//
// It is pure of transports: it never imports protoactor, net/http or a
// model provider SDK (a test enforces it). Actors and servers adapt it.
//
// # Data model
//
// A Memory (memory/model's schema.ipldsch) is a DAG-CBOR block addressed by its CIDv1
// (codec dag-cbor 0x71, sha2-256); the same memory always has the same CID.
// An Act is one step of a sona's strictly linear chain: {sona, memory, prev,
// seq}. Files are raw blocks (codec 0x55). Mutable state lives beside the
// blocks in Badger and is never part of a block.
//
// # Invariants
//
//   - The store's invariants (blocks verified in and out, one committer,
//     group commit acknowledged after fsync and the acknowledged mark,
//     the free-space reserve, integrity checks at open) are package
//     store's: see its doc.
//   - Appending to a chain (memory block, ACT block, head move, metadata,
//     embedding, chain index, associations) is one operation, and it checks
//     that the head it extends is still the head: a chain can never fork.
//   - The vector index is derived: rebuilt from the embeddings key space at
//     start, never the only copy of anything. So is the full-text index
//     (memory/index): it follows the store's commit events, is caught up
//     from the insertion log at start and rebuilt from it when damaged.
//   - An anchor (y/) is written by the same transaction as the append that
//     created its memory; a sink hears it only after that commit.
//   - An import (memory/transfer) is checked whole before anything is
//     written, and replays chains through their writers at the exported seqs.
//
// # Key spaces
//
// Keys begin with a short prefix naming their space:
//
//	prefix  key                         value
//	b/      multihash                   block bytes (memories, ACTs, files)
//	m/      memory CID bytes            MemoryMeta (protobuf): sonas, agent_id, kind,
//	                                    backbone, archived, expires_at, importance,
//	                                    access_count, last_access_tick, created_at, labels,
//	                                    insight mark, evaluation (EUMAS aggregate; its metrics
//	                                    packed in field 16: meta.Marshal) (memory/meta)
//	o/      memory CID bytes            the memory's hot state once its use changed it: importance
//	                                    (float64 bits), access_count, last_access_tick (8 bytes BE
//	                                    each), which then override m/'s (memory/meta)
//	v/      memory CID bytes            embedding: little-endian float32 × dims (memory/meta)
//	s/      sona uuid                   Sona (protobuf): uuid, name, head, length,
//	                                    created_at, last_memory (memory/chain)
//	n/      name 0x00 uuid              empty: sonas by name (unique, unless created as a duplicate)
//	c/      uuid 0x00 seq (8 bytes BE)  ACT CID ‖ memory CID ‖ insertion-log position (8 bytes BE)
//	                                    when the ACT was appended: the chain by seq
//	k/      uuid                        embedding of the sona's name (its centroid is the mean of
//	                                    this and its memories' embeddings, computed at start)
//	q/      log seq (8 bytes BE)        memory CID bytes: the insertion log, in the order memories
//	                                    came to exist (derived indexes catch up from it)
//	x/      "version" | "embedder" |    store layout version; embedding space identity;
//	        "memseq" | "commits"        last insertion-log position; commits made (8 BE each:
//	                                    every group commit counts itself, see integrity.go);
//	        "heartbeat" | "backbone" |  HeartbeatState (protobuf, memory/living); uuid of the backbone's sona;
//	        "evalseq" | "anchored" |    last insertion-log position evaluated (8 BE); last anchor
//	                                    (y/ position, 8 bytes BE) the anchor.Sink took;
//	        "linksback"                 the insertion-log position at or below which every
//	                                    memory's links back are in their targets' lists (8 BE;
//	                                    memory/assoc/backlinks.go); none: all of them are
//	a/      memory CID bytes            a link list (memory/assoc/form.go: compact; lists an older
//	                                    build wrote are Associations, protobuf, until rewritten):
//	                                    the memory's typed links (causal, similar, sequential,
//	                                    related), strongest first; a new memory's links back to it
//	                                    wait in memory for recall.links_hold before they are written
//	h/      agent_id 0x00 memory CID    a link list: Hebbian co-access partners, per agent
//	d/      sona uuid                   similarity statistics of the sona (n, mean, M2 as
//	                                    8-byte BE each): the emergent thresholds
//	l/      unix ns (8 bytes BE) uuid   QueryLog (protobuf): a logged recall, the latest recall.query_log_keep (memory/recall)
//	g/      log seq (8 bytes BE)        memory CID bytes: a dream insight (memory/living)
//	e/      memory CID bytes            Evaluation (protobuf): every archetype's metrics,
//	                                    justifications, annotations, priority; failures (memory/eumas)
//	p/      concept key                 PendingConcept (protobuf): versions awaiting consensus
//	r/      conflict id                 Conflict (protobuf): an open consensus conflict
//	f/      multihash 0x00 uuid         empty: the sona may name this raw block as a file memory's
//	                                    content (uploaded for it, or held by one of its file
//	                                    memories; memory/chain)
//	z/      multihash                   Tombstone (protobuf, memory/forget): a forgotten block's
//	                                    CID, kind, when, why, by whom, rule, sonas — never its content;
//	                                    the block is then read as base.ErrForgotten and never stored again
//	y/      log seq (8 bytes BE)        Anchor (protobuf): a significant memory, written in the
//	                                    transaction of the append that created it (memory/anchor)
//	i/      uuid 0x00 "r" request id    seq (8 bytes BE) ‖ answer: the append a client's request
//	                                    (its idempotency key) made (memory/chain)
//	        uuid 0x00 "s" seq (8 BE)    the request id of the append at seq
//	t/      uuid 0x00 …                 MemoryOS tiers of the sona (memory/tiers):
//	          "s"                       StmState: version, page similarity stats, the short-term pages' seqs
//	                                    (an older build's: the pages inline, no embeddings)
//	          "S" seq (8 BE)            Page: a short-term page (no embedding), its own record since stop 83
//	          "m"                       MtmState: next segment id, page count, version
//	          "g" segment (8 BE)        Segment, its mean embedding packed (embedding8) since stop 84
//	          "p" segment seq (8+8 BE)  Page of a mid-term segment, its embedding packed since stop 84
//	          "l"                       Persona (user profile, knowledge, traits; agent traits)
//	          "f" term                  document frequency of a term in the mid-term pages (8 BE);
//	                                    a term over 128 bytes is keyed by its first 95 bytes,
//	                                    0xff and its SHA-256 (base.KeyText)
//	          "i" tier 0x00 seq (8 BE)  TierWork: the tier's durable inbox, oldest first
//	          "n" counter               page and inbox sequence counters (8 BE)
package memory
