// Package anchor is XmetaV's anchoring: a memory that is significant — a
// milestone, a decision, an incident — is recorded as an anchor when it is
// appended, in the same transaction as the append. The anchor list is what
// an external Sink (XmetaV pins it to IPFS and anchors it on chain) and the
// CAR exporter read; an anchor is never lost to a failing sink.
//
// Rules (config.Anchoring, compiled by CompileRules) judge a memory by its
// kind, data kind, labels and whole-word phrases; the first rule that
// matches names the category. List.Judge applies them inside an append
// and Put is the append's contribution to the list. List follows the
// store's commit events: after every commit that wrote anchors (an append
// or an import) it tells the listener set with OnAdded, which only
// signals (the actors wake the sink's deliverer).
//
// # Invariants
//
//   - An anchor is written by the transaction of the append that created
//     its memory, under the memory's insertion-log position: it exists
//     with its memory or not at all, and the list is append-only.
//   - Heartbeat memories (merges, insights) and imported memories are not
//     judged (an export lists its anchors, and the import restores them).
//   - The sink's cursor only moves forward (SetCursor); delivery is at
//     least once, in list order.
//
// # Key spaces
//
//	y/  log seq (8 bytes BE)  Anchor (protobuf): CID, category, time, sona
//	x/anchored                the last anchor the sink took (8 bytes BE)
package anchor
