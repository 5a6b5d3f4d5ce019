// Package tiers is MemoryOS (seed 003): the short-term memory (STM) of
// dialogue pages, the mid-term memory (MTM) of topic segments with their
// heat, and the long-term personal memory (LPM, the persona), over the
// tier records of messages/tiers.proto.
//
// It has two layers:
//
//   - the pure core (tiers.go, persona.go, model.go, llmmodel.go):
//     deterministic functions of the records, and the Model that writes
//     meta-chains, keywords, digests and persona updates (a heuristic, or
//     an LLM);
//   - the storage (store.go, recall.go): Store keeps every sona's tiers in
//     the store and moves work through them, one durable step at a time
//     (Step, Settle, VisitSegments), retrieves from them for a prompt
//     (Recall) and shows them (View). What it needs of the rest of
//     memory/ — memories, their vectors and sonas, the embedder — comes
//     through Env; it writes only through the store's Committer. An
//     append hands a dialogue page to the STM in its own transaction with
//     EnqueuePage.
//
// A mid-term segment is a Segment value (its weighted terms Keywords), the
// persona a Persona value (its facts and traits): the pure core, the
// storage and the prompt work on them; SegmentOf/Segment.Record and
// PersonaOf/Persona.Record convert at the storage edge (t/ uuid "g", "l"),
// segmentView and personaView build the API's views from them. A fact's
// source stays a CID string, as its page names it: the pages are still
// their records (messages.Page).
//
// The formulas, with the defaults of config.Tiers:
//
//	Fscore(s, p) = cos(e_s, e_p) + |K_s ∩ K_p| / |K_s ∪ K_p|          join when > θ = 0.6
//	Heat(s)      = α·N_visit + β·L_interaction + γ·exp(−Δt/µ)          α = β = γ = 1, µ = 1e7 s
//
// A segment whose heat exceeds τ = 5 and which holds pages not yet handed
// to the persona is promoted; its L_interaction then resets to 0. Over
// 200 segments the coldest is evicted.
//
// # Invariants
//
//   - Work flows between the tiers through durable inboxes: a step that
//     hands work on writes it into the next tier's inbox in the same
//     transaction as its own change, and the step that consumes an entry
//     deletes it in that transaction. A page is never dropped, and a step
//     that runs twice (a worker restarted mid-step) changes nothing the
//     second time.
//   - A step reads outside the committer, asks the Model (which may call
//     an LLM), then commits only if the tier's version is unchanged;
//     otherwise it retries on the new state.
//   - A term longer than 128 bytes is keyed by its first bytes, 0xff and
//     its SHA-256 (base.KeyText), so no word can exceed a key's size.
//
// # Key space
//
//	t/  uuid 0x00 …                 the tiers of the sona:
//	      "s"                       StmState: version, page similarity stats, the short-term pages' seqs
//	                                (an older build's: the pages inline, no embeddings)
//	      "S" seq (8 BE)            Page: a short-term page (no embedding), its own record since stop 83
//	      "m"                       MtmState: next segment id, page count, version
//	      "g" segment (8 BE)        Segment, its mean embedding packed (embedding8) since stop 84
//	      "v" segment (8 BE)        its visits since its last write: N_visit, last access (8 BE each);
//	                                a reader takes the larger of each and the Segment's (both only grow)
//	      "p" segment seq (8+8 BE)  Page of a mid-term segment, its embedding packed since stop 84
//	      "l"                       Persona (user profile, knowledge, traits; agent traits)
//	      "f" term                  document frequency of a term in the mid-term pages (8 BE)
//	      "i" tier 0x00 seq (8 BE)  TierWork: the tier's durable inbox, oldest first
//	      "n" counter               page and inbox sequence counters (8 BE)
package tiers
