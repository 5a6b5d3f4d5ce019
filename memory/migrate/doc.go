// Package migrate owns the store's layout version (x/version) and brings
// a store of an older layout to the current one (Version) when it is
// opened: Check, which memory.Open runs before anything reads the store.
//
// A new store is stamped with Version and the embedder's identity
// (store.CheckEmbedder); a store of a newer or unknown layout is refused,
// as is one of another embedding space. Each migration brings a layout n
// to n+1 in batches through the store's committer and stamps n+1 last, so
// a migration cut short runs again from its start at the next open:
//
//	1 → 2  the insertion log (q/, memories in the order they were stored,
//	       ties by CID), each memory's log position in its metadata and
//	       its chain entries; the sonas' name embeddings under k/
//	2 → 3  the file records f/ (a sona may name a file memory's raw block)
//	3 → 4  every metadata record's evaluation metrics packed (meta.Marshal;
//	       a layout-3 binary would read them as missing, and refuses)
//
// The migrations know the domain's key spaces (memory/chain, memory/meta):
// that is why they are here and not in memory/store.
package migrate
