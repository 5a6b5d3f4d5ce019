// Package assoc owns how memories relate beyond their edges: the typed
// associations, the Hebbian co-access partners, and Living Memory's
// emergent thresholds.
//
// Key spaces:
//
//	a/  memory CID                  a link list: the memory's typed links (Causal,
//	                                Similar, Sequential, Related), both directions
//	h/  agent 0x00 memory CID       a link list: co-access partners for one agent
//	d/  sona uuid                   SimStats (EncodeStats: n, mean, M2 as 8-byte BE
//	                                floats): the sona's nearest-neighbour similarities
//	x/linksback                     the insertion-log position at or below which every
//	                                memory's links back are written (backlinks.go)
//
// Writers: the append contributes a memory's links with Graph.Append
// (which writes them with Graph.Put, reading each list through the
// graph's cache unless its batch wrote it, and feeds the sona's d/
// distribution; a new memory's links back a held Graph keeps in memory
// a while, read back into every list it gives, and writes in batches:
// backlinks.go); recall
// strengthens co-access with Graph.Strengthen (w ← w + rate·(1 − w)),
// which a buffered Graph (Buffer) keeps in memory, reads back into every
// list it gives and writes in batches (coaccess.go); living
// memory prunes a/ lists with Update; import writes whole lists. Readers
// go through Graph (Self.Assoc), whose cache of the lists read or
// committed lately the commit events keep current (recall reads its
// hits' and seeds' lists with Graph.In), or Read inside a transaction.
//
// A link list is stored in a compact form (form.go), ~43 bytes a link; a
// list an older build wrote as a messages.Associations is read as well,
// and written again compact at its next change. Export and import see
// lists as messages (Unmarshal, Marshal).
//
// Invariants: a link list is sorted strongest first (ties by target
// bytes) and holds at most MaxLinks links — the weakest are forgotten
// first; strengths are in [0, 1]; a memory never links to itself; Put
// writes both directions (a new memory's link back perhaps held, and
// then read back with the list until written) and keeps the stronger of
// an old and a new link;
// co-access is per agent, never shared between agents.
//
// The thresholds: the running similarity distributions (SimStats,
// Welford's algorithm, merged by Chan et al.'s parallel update) and the
// threshold Signal Detection Theory derives from them
// (EmergentThreshold: mean + log(β)·std, bootstrapped while the
// distribution is small). Dedup, retrieval, consensus and the MemoryOS
// STM all decide with it.
//
// It needs nothing of package memory: a store.Tx to write, a
// store.Reader or store.Viewer to read.
package assoc
