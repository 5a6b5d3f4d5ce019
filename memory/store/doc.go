// Package store is Memoria's source of truth: content-addressed blocks and
// the mutable key spaces beside them, behind small interfaces, on one of
// two backends. It knows keys and bytes, not what they mean: package memory
// and its subsystems own the key spaces (memory's doc lists them all).
//
// # Interfaces
//
//   - Reader reads: Get, Item (the value read on demand), Has, NewIterator
//     (prefix, Seek, Reverse). Viewer.View hands one over a consistent
//     snapshot of what is committed.
//   - Tx is a Reader that also buffers writes (Set, Delete, PutBlock) and
//     post-commit work (OnCommit), for one Op.
//   - Committer is the only door of writes: Submit, Update, Barrier.
//   - Event is a durable commit and the keys it wrote, told to Subscribe's
//     subscribers in commit order (pebble's EventListener), before the
//     views see it, and to Follow's followers once they do: derived
//     structures (caches, indexes) follow the store with it.
//   - Cache is the bounded cache of decoded records that events keep
//     current: a view's reader knows the commits told before its snapshot
//     (ToldBefore), and a value it read enters only if it saw every write
//     of its key the cache was told of (the metadata and link caches).
//
// *Store implements them all, over an engine: Badger (Open) or a sorted
// list in memory (OpenMemory). The committer, the blocks' verification,
// the space guard and the events are the Store's, shared by both engines;
// the conformance suite storetest holds both to the same behaviour. Options
// come from the configuration only (OptionsOf): there is no second set of
// defaults here.
//
// # Invariants
//
//   - Every block enters through Tx.PutBlock, which re-hashes it, and
//     leaves through Store.Block (or ReadBlock), which re-hashes it again:
//     a stored block whose bytes do not match its CID is ErrCorrupt, never
//     served.
//   - Every write passes the committer: operations run in submission
//     order, each sees the writes of those before it, and either all of an
//     operation's writes apply or none. A batch is applied in as few
//     transactions as fit (an op too big for any fails alone with
//     ErrTooLarge) and acknowledged only after that transaction's fsync
//     and, on disk, the acknowledged mark (the commit count, in a file
//     beside Badger's) moved. A store that opens with fewer commits than
//     its mark lost acknowledged writes and refuses to serve
//     (ErrLostWrites) until the loss is accepted.
//   - A batch that would leave less than the free-space reserve on the
//     store's file system is not committed (ErrDiskFull); reads go on.
//   - Before Badger opens the store, every table is verified and the
//     write-ahead logs are scanned (integrity.go): damage is named, never
//     read past.
//   - A view never waits for a commit in flight: it reads a snapshot of
//     what was shown before (badger.go), which holds everything
//     acknowledged. A commit is shown once its subscribers were told it.
//     Badger runs in its managed mode: each commit is given the next
//     version, a view begins at the last shown without waiting, and
//     Badger keeps what the oldest read open sees. While the committer is
//     busy, views share snapshots; while it is idle none is held, so none
//     keeps compactions from dropping garbage.
//   - Subscribers hear a commit after it is durable and before any of its
//     operations is acknowledged, so a cache invalidated by an event never
//     serves a caller what that caller's acknowledged write replaced; and
//     before any view sees it, so a cache never serves a view an entry
//     that a commit the view sees replaced.
//   - The garbage collection (gc.go) writes nothing through the committer:
//     it flushes Badger's memtables as an operation that writes nothing
//     (Badger refuses writes meanwhile, so they wait for it), compacts and
//     rewrites the value log beside the writes, and leaves half the
//     free-space reserve.
//   - A backup (backup.go) reads one snapshot; a restore writes only into
//     an empty directory and checks the result is exactly the snapshot
//     before recording its acknowledged mark.
//
// # Where this differs from the plan (issue 14)
//
//   - One Store type over an engine, not a Store interface with a Badger
//     and an in-memory implementation: the group commit, the split and
//     replay of a batch too big for one transaction, the disk-full rerun
//     and the events are the subtlest code here and do not depend on the
//     backend, so both backends share one copy; the engine (view, begin,
//     set/delete/commit/discard, check) is the seam, and storetest runs
//     the public API over both.
//   - The layout version (x/version) and its migrations are memory/migrate:
//     they rewrite the domain's key spaces, which the store does not know.
//     The embedding-space identity (x/embedder) is here.
//   - Tx.OnCommit remains for the in-memory structures the chain writer
//     updates directly (the sona registry, the vector index: they need
//     the values an append wrote, which an Event does not carry; why they
//     stay is in memory/chain's doc); the meta cache, the anchor list and
//     the full-text index (memory/index) follow Events instead.
//   - An iterator in Reverse starts with Seek (prefix+0xff, say): Badger's
//     Rewind in reverse does not find the last key under a prefix.
//
// # Key spaces
//
// The store's own:
//
//	b/           multihash   block bytes (memories, ACTs, files)
//	x/commits                commits made (8 bytes BE): every commit counts itself
//	x/memseq                 the insertion log's last position (8 bytes BE), which
//	                         the acknowledged mark records beside the commit count
//	x/embedder               identity of the embedding space of the stored vectors
//
// and beside Badger's files memoria.acked (the acknowledged mark),
// memoria.id (the store's identity, made by its first backup) and
// memoria.tables (the tables that passed the check at open, by size and
// CRC-32C: integrity.go).
package store
