// Package meta keeps what is stored about each memory beside its
// immutable block: its metadata (which sonas hold it, kind, agent,
// importance, access count, decay tick, archived and backbone marks,
// labels, its EUMAS aggregate) and its embedding, and reads both — and the
// decoded memory — through caches. Importance lives here: Reinforce (a
// response's support, propagated along edges), ReinforceDuplicate (a
// deduplicated insert) and Touch (a recall's access).
//
// The append (memory/chain) writes a memory's first metadata and its
// embedding; every later change is an Update operation, which reads,
// changes and writes the record in one transaction — except what a
// memory's use changes (importance, access count, decay tick: Hot), which
// once changed lives in a small record of its own (o/) that Touch and
// Reinforce write alone (UpdateHot), and which Read merges into the
// metadata it returns.
//
// Metadata is the record as a Go value (Of reads it): what the API shows
// of a memory's metadata is built from it field by field (Metadata.View,
// and api's metaView for a sona-scoped principal), not the stored record
// rendered as it is. The subsystems still pass messages.MemoryMeta.
//
// # Invariants
//
//   - A cached decoded memory is never stale: memories are addressed by
//     content, and one enters the cache only after its block was verified
//     against its CID.
//   - Metadata is mutable: every commit that writes an m/ key invalidates
//     its cache entry, and one that writes an o/ key gives the cached
//     record its values (Store follows the store's commit events, which
//     are told before the commit's operations are acknowledged); a read
//     that raced with either does not fill the cache. So a caller never
//     reads through the cache what its own acknowledged write replaced.
//   - A memory's hot state is its o/ record's when it has one, else its
//     metadata record's fields; Write (and Update) keep the two in step,
//     and an excision deletes both.
//   - Cached values are shared: callers must not modify them.
//   - Reinforce and ReinforceDuplicate only raise importance, each by an
//     EWMA step (recall.importance_alpha) toward a signal of at most 1.
//
// # Key spaces
//
//	m/  memory CID bytes  MemoryMeta (protobuf; the evaluation's metrics
//	                      packed in a field of their own: Marshal)
//	o/  memory CID bytes  Hot: importance (float64 bits), access count,
//	                      last access tick (8 bytes big-endian each)
//	v/  memory CID bytes  embedding: little-endian float32 × dims
package meta
