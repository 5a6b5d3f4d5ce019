package memory

import "github.com/memoria-ai/memoria/memory/store"

// The store lives in memory/store; these aliases keep the callers of
// package memory compiling while the subsystems move out (issue 14). New
// code imports memory/store.
type (
	Store        = store.Store
	StoreOptions = store.Options
	Tx           = store.Tx
	Op           = store.Op
	Pending      = store.Pending
	Reader       = store.Reader
	Item         = store.Item
	Iterator     = store.Iterator
	IterOptions  = store.IterOptions
)

// OpenStore opens the Badger store in dir (store.Open).
var OpenStore = store.Open
