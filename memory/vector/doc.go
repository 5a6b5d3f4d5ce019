// Package vector is Memoria's dense index: a hierarchical navigable small
// world graph (HNSW, Malkov & Yashunin 2016) of its own over unit-length
// embeddings, cosine similarity being a dot product, safe for concurrent
// search and add.
//
// Adds are cheap and immediately searchable: a new vector first joins a
// small pending set that every search scans exactly, and a background
// builder moves pending vectors into the graph, one exclusive-lock
// insertion at a time. So an acknowledged write is found by the next
// search (read-your-writes) without paying for graph insertion on the
// write path, and a graph rebuilt at start serves exact results while it
// fills. The index is derived state: the store's embeddings are the copy
// of record; at start the index is restored from a snapshot of itself
// (snapshot.go) or rebuilt from them.
//
// The graph is built and searched over int8 copies of the vectors, each
// with a scale of its own (quant.go): a quarter of the memory traffic of
// float32, which is what a graph search over more vectors than the CPU's
// caches hold waits on. A search's candidates are scored again with the
// float32 vectors before they are returned, so similarities are exact;
// only which candidates the graph finds depends on the quantisation.
// Exact scans (the pending set, SearchAmong) use the float32 vectors.
// Those of a snapshot restored from a file are read from it when needed,
// not kept in memory (floats.go).
//
// Invariants:
//
//   - Ids number the keys 0, 1, … in the order they were added; a key
//     keeps its id and its vector.
//   - An id leaves the pending set only after it joined the graph, so a
//     search that reads the pending set before the graph misses no id.
//   - Vectors (float32 and quantised) live in chunks that never move; the
//     graph reads them under its own lock, the maps and exact scans under
//     theirs.
//   - The graph is a function of the insertion order and Options.Seed:
//     the same adds in the same order give the same graph and the same
//     results.
//   - Ties in similarity are broken by insertion order (lower id first).
package vector
