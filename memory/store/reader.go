package store

import (
	"errors"

	"github.com/memoria-ai/memoria/memory/base"
)

// Reader reads the store. In View it reads one consistent snapshot of
// what is committed; in an Op (Tx) it reads what is committed, what the
// earlier operations of the batch wrote and — for Get, Item and Has —
// the operation's own buffered writes.
type Reader interface {
	// Get returns a copy of key's value, or base.ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Item returns key's entry, whose value is read on demand, or
	// base.ErrNotFound.
	Item(key []byte) (Item, error)
	// Has reports whether key exists.
	Has(key []byte) (bool, error)
	// NewIterator iterates over keys in order (see IterOptions); close
	// it when done. In an Op it does not see the op's own buffered
	// writes.
	NewIterator(o IterOptions) Iterator
}

// Item is one entry of the store.
type Item interface {
	// Key is the entry's key, valid until the iterator moves.
	Key() []byte
	// KeyCopy appends the key to dst[:0].
	KeyCopy(dst []byte) []byte
	// Value calls fn with the entry's value, valid only during fn.
	Value(fn func(v []byte) error) error
	// ValueCopy appends the value to dst[:0].
	ValueCopy(dst []byte) ([]byte, error)
	// ValueSize is the value's length, without reading it.
	ValueSize() int64
}

// IterOptions choose what an Iterator visits.
type IterOptions struct {
	// Prefix limits the iteration to keys with this prefix.
	Prefix []byte
	// Reverse iterates from the greatest key down.
	Reverse bool
	// PrefetchValues reads values ahead of the iteration (a hint for a
	// scan that reads every value); PrefetchSize is how many.
	PrefetchValues bool
	PrefetchSize   int
	// Since, when not 0, limits the iteration to entries written by
	// commits after that version (ReadVersion): what changed since a
	// view. Only a reader whose ReadVersion is known honours it; a
	// deletion since is not seen (the key is passed over).
	Since uint64
}

// ReadVersion is the version of what r sees — Badger's read timestamp,
// which orders every commit the store ever made, across restarts — and
// false for a reader of an engine without versions (the in-memory one).
// An iteration with IterOptions.Since at a later view finds what was
// written after it.
func ReadVersion(r Reader) (uint64, bool) {
	if v, ok := r.(interface{ readVersion() uint64 }); ok {
		return v.readVersion(), true
	}
	return 0, false
}

// ToldBefore is, for a reader of Store.View, the number of commits the
// store had told its subscribers (Subscribe) when the view's snapshot was
// taken, counted from 1 at open: the view sees every one of them. It is 0
// for an operation's reader (a Tx). A cache that its subscription
// invalidates fills from a view only if none of the key's invalidations
// came after ToldBefore: that view may have read the value a later
// commit replaced.
func ToldBefore(r Reader) uint64 {
	if v, ok := r.(interface{ toldBefore() uint64 }); ok {
		return v.toldBefore()
	}
	return 0
}

// Iterator walks keys in order: Rewind (or Seek), then Valid, Item, Next.
type Iterator interface {
	// Rewind moves to the first key. With Reverse, start with Seek
	// instead (Badger's Rewind does not find the last key under a prefix).
	Rewind()
	// Seek moves to the first key ≥ key (≤ key, when Reverse); key must
	// be within the prefix.
	Seek(key []byte)
	// Valid reports whether the iterator is at a key.
	Valid() bool
	// Next moves to the following key.
	Next()
	// Item is the entry at the iterator.
	Item() Item
	// Close releases the iterator.
	Close()
}

// valueItem is an entry held in memory: a buffered write seen by its own
// op, or an entry of the in-memory backend.
type valueItem struct{ key, val []byte }

func (i valueItem) Key() []byte                         { return i.key }
func (i valueItem) KeyCopy(dst []byte) []byte           { return append(dst[:0], i.key...) }
func (i valueItem) Value(fn func(v []byte) error) error { return fn(i.val) }
func (i valueItem) ValueSize() int64                    { return int64(len(i.val)) }
func (i valueItem) ValueCopy(dst []byte) ([]byte, error) {
	return append(dst[:0], i.val...), nil
}

// itemReader is what hasItem needs of a reader.
type itemReader interface {
	Item(key []byte) (Item, error)
}

// hasItem is Has of a reader whose Item answers base.ErrNotFound for a key
// it does not hold: each of the store's readers answers Has by its Item.
func hasItem(r itemReader, key []byte) (bool, error) {
	_, err := r.Item(key)
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
