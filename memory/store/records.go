package store

import (
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
)

// Records caches the bytes of the records whose keys match accepts, as
// the commits leave them: records read far more often than written (a
// tier's state, a sona's record), each read otherwise a lookup in Badger
// — an operation's in the committer, where it waits for every other
// write. Keep it current with Committed (Subscribe before the first
// write); read through Get. The writers of those records must hand the
// store a buffer of their own for each (a marshalled message), which the
// commit's event shares. Records are shared: callers must not modify
// them.
type Records struct {
	cache *Cache[[]byte] // nil: none
	match func(key string) bool
}

// NewRecords caches about size records of the keys match accepts.
func NewRecords(size int, match func(key string) bool) *Records {
	return &Records{cache: NewCache[[]byte](size), match: match}
}

// Committed caches the records a commit wrote (nil: deleted).
func (c *Records) Committed(ev Event) {
	var changes []CacheChange[[]byte]
	for i, k := range ev.Keys {
		if c.match(k) {
			changes = append(changes, CacheChange[[]byte]{Key: k, V: ev.Values[i]})
		}
	}
	c.cache.Apply(ev.Told, changes, nil)
}

// Get reads the record at key (one match accepts) in r through the
// cache: an operation (r a Tx) reads the cached record only when its
// batch has not written the key, a view only one that it sees; only a
// view's read fills the cache, a record absent too. base.ErrNotFound
// when there is none. A nil c reads r.
func (c *Records) Get(r Reader, key []byte) ([]byte, error) {
	if c == nil {
		return r.Get(key)
	}
	v, ok := c.cache.Lookup(string(key), key, r)
	if !ok {
		var err error
		if v, err = r.Get(key); errors.Is(err, base.ErrNotFound) {
			v = nil // cached: none
		} else if err != nil {
			return nil, err
		} else if v == nil {
			v = []byte{} // a record of no bytes
		}
		c.cache.Fill(string(key), v, r)
	}
	if v == nil {
		return nil, base.ErrNotFound
	}
	return v, nil
}

// GetProto reads the record at key into m through the cache (Get), as
// GetProto reads it from r: false when there is none.
func (c *Records) GetProto(r Reader, key []byte, m proto.Message) (bool, error) {
	v, err := c.Get(r, key)
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := UnmarshalRecord(key, v, m); err != nil {
		return false, err
	}
	return true, nil
}

// Latest is the cached record at key as the last commit left it (nil:
// cached as none), and whether the cache holds it (Cache.Latest).
func (c *Records) Latest(key string) ([]byte, bool) { return c.cache.Latest(key) }

// Stats are c's reads so far and its entries now (none for a nil c).
func (c *Records) Stats() CacheStats {
	if c == nil {
		return CacheStats{}
	}
	return c.cache.Stats()
}
