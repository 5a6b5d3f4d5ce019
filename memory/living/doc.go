// Package living is Living Memory's upkeep of the self (XmetaV heartbeat,
// Living Memory OLS compression, dream mode): the work the heartbeat
// actor schedules, each call bounded and reading the clock it is given.
//
//   - Sweep examines up to a batch of memories, resuming where the last
//     sweep stopped: it counts the memories whose TTL ran out (recall
//     hides them from that second; nothing is deleted), prunes
//     associations whose strength, decayed by the memory's
//     activity-relative inactivity, fell below the emergent threshold of
//     the last complete pass, and counts each sona's active memories and
//     their accesses (the branch statistics).
//   - PlanCompressions merges the least important related memories of an
//     oversized branch (OversizedBranches: over living.phi × the mean) into
//     one centroid memory; PlanFolds folds a cold branch (ColdBranches)
//     into one archive memory. A merge's text is the configured
//     summarizer's or an extractive summary; appending it archives its
//     sources in the same transaction (Archive).
//   - PlanDream consolidates each sona's recent memories into insights
//     (Dream: patterns, corrections, recommendations, a summary), stored
//     as `note` memories with edges to their sources and indexed under g/
//     (PutInsight); Insights lists them as Insight values (the memory,
//     its mark, its sona; sources as CIDs), which the API shows through
//     Insight.View.
//
// Dream, OversizedBranches, ColdBranches and the choice of a merge's
// sources are pure. The merges and insights are planned here and
// appended by each sona's one writer (its actor), so the heartbeat never
// writes to a chain behind its owner's back.
//
// What it needs of the rest of memory/ — the memories' metadata and
// embeddings, the chains, their committed lengths and similarity
// statistics, recall's decay, the embedder, the append's preparation —
// comes through Env.
//
// # Invariants
//
//   - A sweep reads a snapshot and writes its pruning and its new state in
//     one transaction, which fails (ErrSweepConflict, writing nothing) if
//     another sweep moved the cursor meanwhile; a link strengthened since
//     it was judged is not pruned.
//   - A merge applies only while its sources are active memories of its
//     sona (base.ErrChainConflict otherwise): it cannot apply twice.
//   - A branch's size is counted afresh before a compression is planned,
//     so a branch compressed since the sweep is not compressed twice.
//   - Neither merges nor insights count as activity: dream mode's idle
//     time is measured from the last other append.
//
// # Key spaces
//
//	x/heartbeat  HeartbeatState: the sweep's cursor and pass statistics,
//	             the branch statistics, when each sona last dreamed
//	g/  log seq (8 bytes BE)  memory CID bytes: a dream insight, written
//	             by the append of its memory
package living
