// Package index keeps the derived indexes in step with the store. Text is
// the full-text (BM25) index of memory/text: it follows the store's commit
// events (store.Subscribe, pebble's EventListener) rather than being fed
// by the writers, so anything that commits a chain entry is indexed, and
// the index is a function of the store alone — rebuilt from it when
// damaged, caught up from it at open. Open returns at once: the index
// loads in the background (its files read, the insertion log caught up)
// while the commits are already queued, and searches wait for the load,
// so that a large store serves without waiting for its full-text index.
//
// # How it follows the store
//
// Each commit's event lists the keys it wrote. For every chain entry (c/)
// — a memory that came to exist, or one that joined another sona — the
// subscriber queues the entry's key and notes it as its sona's latest
// position; an insertion-log key (q/) raises the watermark, the log
// position the index will have reached once the queue is applied. The
// subscriber runs on the committer's goroutine and reads nothing. The
// indexer's goroutine takes what has accumulated, reads the memories'
// texts and sonas in one snapshot (through memory/meta's caches), and
// applies them as one batch with the watermark, which the index persists
// atomically with the batch. It rests between batches (index.text_backlog)
// so that indexing takes a small share of a core from the writes.
//
// # Invariants
//
//   - Read-your-writes: events are told after a commit is durable and
//     before its operations are acknowledged, so a sona's latest position
//     is noted before its append is acknowledged; a search in the sona
//     waits until the indexer has passed it. A recall right after an
//     acknowledged insert finds it. Writes never wait for the index.
//   - The persisted watermark never claims more than was applied: after a
//     crash, or commits that raced with Close, Open catches up from the
//     insertion log after the watermark, and re-indexes the chain entries
//     appended at or after it (the joins, which the log does not record).
//   - An index that is stale (another layout), damaged (a segment fails
//     its checksum, a search or a batch fails) or ahead of the store (the
//     store lost acknowledged writes and the loss was accepted) is rebuilt
//     from the store: at open, or while serving — recall then goes on
//     without BM25 (ErrUnavailable) until the rebuild ends.
//
// Its files live in the data directory's text/ (memory/text's layout);
// it owns no key space of the store.
//
// # The vector index's snapshot
//
// VectorSnapshots keeps the HNSW index (memory/vector), also derived
// state, in data_dir/vector/index.snap: written when the index changed
// (every index.snapshot_interval, and at a clean shutdown), tagged with
// the insertion-log position it covers; at open it is restored and caught
// up from the store (the memories logged after it added, every tombstoned
// one removed), or, when it is missing, damaged or another store's,
// RebuildVectors rebuilds the index from the stored embeddings.
package index
