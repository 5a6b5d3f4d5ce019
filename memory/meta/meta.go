package meta

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The key spaces of a memory's records.
var (
	Prefix       = []byte("m/") // MemoryMeta, by memory CID
	VectorPrefix = []byte("v/") // embedding, by memory CID
)

// Key is the key of c's metadata.
func Key(c cid.Cid) []byte { return base.Join(Prefix, c.Bytes()) }

// VectorKey is the key of c's embedding.
func VectorKey(c cid.Cid) []byte { return base.Join(VectorPrefix, c.Bytes()) }

// EncodeVector writes v as little-endian float32s (a v/ value; the
// codec is base's, shared with export).
func EncodeVector(v []float32) []byte { return base.EncodeVector(v) }

// DecodeVector reads a v/ value.
func DecodeVector(b []byte) ([]float32, error) { return base.DecodeVector(b) }

// Read reads a memory's metadata past the cache (ErrNotFound when c is
// not a stored memory, ErrForgotten when it was forgotten).
func Read(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error) { return read(r, c, nil) }

// read is Read, the hot state's record looked for unless known (when not
// nil) is sure there is none (hotIn).
func read(r store.Reader, c cid.Cid, known *store.KeySet) (*messages.MemoryMeta, error) {
	return readWith(r, c, known, nil)
}

// readWith is read, the hot state read through hots when it is not nil
// (a view's read: hotIn).
func readWith(r store.Reader, c cid.Cid, known *store.KeySet, hots *store.Cache[hotEntry]) (*messages.MemoryMeta, error) {
	item, err := r.Item(Key(c))
	if errors.Is(err, base.ErrNotFound) {
		if gone, herr := r.Has(store.TombstoneKey(c)); herr == nil && gone {
			return nil, fmt.Errorf("%w: memory %s", base.ErrForgotten, c)
		}
		return nil, fmt.Errorf("%w: memory %s", base.ErrNotFound, c)
	}
	if err != nil {
		return nil, err
	}
	var meta *messages.MemoryMeta
	if err := item.Value(func(v []byte) (err error) { meta, err = decodeMeta(v, c); return err }); err != nil {
		return nil, err
	}
	h, ok, err := hotIn(r, c, known, hots)
	if err != nil {
		return nil, err
	}
	if ok {
		h.into(meta)
	}
	return meta, nil
}

// decodeMeta decodes c's metadata record b (Read's, and a committed
// record's at its first read from the cache), its strings that many
// records repeat the shared copies (intern, internMetrics): by hand when
// it holds what most records hold (decodePlain), else by proto.Unmarshal.
func decodeMeta(b []byte, c cid.Cid) (*messages.MemoryMeta, error) {
	if m, ok := decodePlain(b); ok {
		return m, nil
	}
	m := &messages.MemoryMeta{}
	if err := Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: metadata of %s: %v", base.ErrCorrupt, c, err)
	}
	intern(m)
	internMetrics(m)
	return m, nil
}

// intern makes a decoded record's sonas, agent and kind the process's
// one copy of each (names): thousands of records name the same
// sona, agent and kind, and the cache's records each held a string of
// their own for them, three of the ten objects a cached record is for
// the collector to mark (issue 15).
func intern(m *messages.MemoryMeta) {
	for i, s := range m.Sonas {
		m.Sonas[i] = names.intern(s)
	}
	m.AgentId = names.intern(m.AgentId)
	m.Kind = names.intern(m.Kind)
}

// internMetrics keys a decoded record's evaluation metrics by the
// process's one copy of each name (names): the records the cache
// holds (store.memory_cache, 100,000) then keep no string of their own for
// the same dozen names — a million fewer objects for the collector to mark
// at 100,000 memories (issue 15).
func internMetrics(m *messages.MemoryMeta) {
	ev := m.GetEvaluation()
	if len(ev.GetMetrics()) == 0 {
		return
	}
	// An assignment to a key the map holds stores the key given (strings
	// need their key updated): the decoded names are let go in place, with
	// no second map.
	for k, v := range ev.Metrics {
		ev.Metrics[names.intern(k)] = v
	}
}

// ReadMemory reads and decodes a memory's verified block, past the cache.
func ReadMemory(r store.Reader, c cid.Cid) (*model.Memory, error) {
	b, err := store.ReadBlock(r, c)
	if err != nil {
		return nil, err
	}
	m, err := model.DecodeMemory(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not decode as a memory: %v", base.ErrCorrupt, c, err)
	}
	return m, nil
}

// Update is the operation that applies fn to the metadata of each of cids
// that is a stored memory, in the order given.
func Update(cids []cid.Cid, fn func(*messages.MemoryMeta, cid.Cid)) store.Op {
	return func(tx store.Tx) error {
		for _, c := range cids {
			meta, err := Read(tx, c)
			if errors.Is(err, base.ErrNotFound) || errors.Is(err, base.ErrForgotten) {
				continue
			}
			if err != nil {
				return err
			}
			fn(meta, c)
			if err := Write(tx, c, meta); err != nil {
				return err
			}
		}
		return nil
	}
}

// Store reads memories and their metadata through two caches — decoded
// memories by CID (immutable: never stale) and metadata by CID (mutable:
// kept current by the store's commit events) — and keeps importance. It is
// safe for concurrent use.
type Store struct {
	st    *store.Store
	rc    config.Recall
	metas *store.Cache[*metaEntry]
	mems  *memCache
	// hotKeys are the hot states' records (o/) the store holds, once
	// loaded (LoadHot): a read of a memory's metadata that the cache
	// misses then reads its o/ record only when there may be one.
	hotKeys *store.KeySet
	// hots are the hot states read lately (hotIn), kept current by the
	// commits, by the memory's CID key.
	hots *store.Cache[hotEntry]
	// touches are the recalls' touches not yet written, when buffered
	// (BufferTouches).
	touches *touches
	// floors are importances Reinforce read lately, kept by the commits
	// (floors.go).
	floors *floors
}

// New reads the memories of st with caches of cacheSize entries each
// (store.memory_cache); rc gives importance's parameters. It subscribes to
// st's commit events, so call it before st's first write.
func New(st *store.Store, cacheSize int, rc config.Recall) *Store {
	m := &Store{st: st, rc: rc, metas: store.NewCache[*metaEntry](cacheSize), mems: newMemCache(cacheSize),
		hots: store.NewCache[hotEntry](hotCacheScale * cacheSize), hotKeys: store.NewKeySet(HotPrefix), floors: newFloors()}
	st.Subscribe(m.committed)
	return m
}

// LoadHot reads which memories have a record of their hot state, after
// which a read of a memory's metadata reads that record only for them; it
// returns how many have one. each, when not nil, is given the CID key
// (cid.Cid.KeyString's bytes, valid only during the call) and the hot
// state of every memory that has one; nil reads the keys only.
func (m *Store) LoadHot(each func(key []byte, h Hot)) (int, error) {
	if each == nil {
		return m.hotKeys.Load(m.st)
	}
	return m.hotKeys.LoadEach(m.st, func(k, v []byte) {
		if h, ok := HotValue(v); ok {
			each(k[len(HotPrefix):], h)
		}
	})
}

// committed tells the caches of commit e's writes: the metadata cache a
// shard at a time (store.Cache.Apply).
func (m *Store) committed(e store.Event) {
	m.hotKeys.Told(e)
	var changes []store.CacheChange[*metaEntry]
	var hots []Hot                               // a CachePatch's, at its change's index
	var hotChanges []store.CacheChange[hotEntry] // a CachePatch's new entry in its V
	for i, k := range e.Keys {
		switch {
		case strings.HasPrefix(k, string(Prefix)):
			// The record as committed enters the cache, decoded when
			// first read: a memory's metadata is read soon after it is
			// stored (by the text index, the sona's next append, the
			// neighbours of the next insertions).
			ch := store.CacheChange[*metaEntry]{Key: k[len(Prefix):], Op: store.CacheInvalidate}
			m.floors.empty(m.floors.hash(ch.Key), e.Told)
			if v := e.Values[i]; v != nil {
				ch.Op, ch.V = store.CacheSet, &metaEntry{raw: v}
			}
			changes = append(changes, ch)
		case strings.HasPrefix(k, string(HotPrefix)):
			// The hot state changed: a cached record takes its values
			// (most of a memory's writes are these), and so does the
			// cache of hot states when it holds the memory's — it is
			// filled by the reads that miss the records' cache; filled
			// by the writes too, it cost the collector more than it
			// spared Badger over two minutes of advances (stop 81).
			key := k[len(HotPrefix):]
			ch := store.CacheChange[*metaEntry]{Key: key, Op: store.CacheInvalidate}
			hc := store.CacheChange[hotEntry]{Key: key, Op: store.CacheInvalidate}
			if h, ok := HotValue(e.Values[i]); !ok {
				m.floors.empty(m.floors.hash(key), e.Told)
			} else {
				m.floors.wrote(m.floors.hash(key), h.Importance, e.Told)
				ch.Op = store.CachePatch
				if hots == nil {
					hots = make([]Hot, len(e.Keys)) // at most a change a key
				}
				hots[len(changes)] = h
				hc.Op, hc.V = store.CachePatch, hotEntry{h: h, ok: true}
			}
			changes = append(changes, ch)
			hotChanges = append(hotChanges, hc)
		case strings.HasPrefix(k, string(store.PrefixTombstone)):
			// A forgotten memory leaves the decoded-memory cache (the
			// only entries that ever leave it but by age).
			if mh, err := multihash.Cast([]byte(k[len(store.PrefixTombstone):])); err == nil {
				c := cid.NewCidV1(cid.DagCBOR, mh)
				m.mems.remove(c)
				m.floors.empty(m.floors.hash(c.KeyString()), e.Told)
			}
		}
	}
	m.metas.Apply(e.Told, changes, func(i int, old *metaEntry) *metaEntry { return old.withHot(hots[i]) })
	if len(hotChanges) > 0 {
		m.hots.Apply(e.Told, hotChanges, func(i int, _ hotEntry) hotEntry { return hotChanges[i].V })
	}
}

// MetaIn reads a memory's metadata in r through the cache — in a view:
// an operation (r is its store.Tx) reads its transaction, which holds
// what its batch and the commit in flight wrote before the commit events
// that update the cache. The result is shared: do not modify it.
func (m *Store) MetaIn(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error) {
	if _, op := r.(store.Tx); op {
		return read(r, c, m.hotKeys)
	}
	key := c.KeyString()
	if e, ok := m.metas.In(key, r); ok {
		meta, err := e.get(c)
		if err != nil {
			return nil, err
		}
		return m.WithTouches(r, c, meta), nil
	}
	meta, err := readWith(r, c, m.hotKeys, m.hots)
	if err != nil {
		return nil, err
	}
	m.metas.Fill(key, decoded(meta), r)
	return m.WithTouches(r, c, meta), nil
}

// Has reports whether c is a stored memory in r (its metadata record is
// there), from the metadata cache when it holds c — only records that
// exist enter it, and a commit's deletion takes them out — else from r:
// a view reads what it sees, an operation what its batch has not changed
// as the last commit left it. The edges of every new memory are checked
// this way, twice (before its operation is submitted, and in it), and
// those checks were Badger lookups, one of them in the committer.
func (m *Store) Has(r store.Reader, c cid.Cid) (bool, error) {
	key := Key(c)
	if _, ok := m.metas.Lookup(c.KeyString(), key, r); ok {
		return true, nil
	}
	return r.Has(key)
}

// MemoryIn returns the decoded memory c, from the cache or from its
// verified block in r. The result is shared: do not modify it.
func (m *Store) MemoryIn(r store.Reader, c cid.Cid) (*model.Memory, error) {
	if mem, ok := m.mems.get(c); ok {
		return mem, nil
	}
	mem, err := ReadMemory(r, c)
	if err != nil {
		return nil, err
	}
	m.mems.put(c, mem)
	return mem, nil
}

// CacheStats are the reads of the caches of decoded memories, of
// metadata records and of hot states (hotIn).
func (m *Store) CacheStats() (memories, metadata, hot store.CacheStats) {
	return m.mems.Stats(), m.metas.Stats(), m.hots.Stats()
}

// Stored caches mem, the decoded block c that a commit just stored (so
// the indexes and readers that follow the commit need not read and decode
// it again). The caller gives up mem: it must not modify it.
func (m *Store) Stored(c cid.Cid, mem *model.Memory) { m.mems.put(c, mem) }

// Meta returns a memory's metadata.
func (m *Store) Meta(c cid.Cid) (*messages.MemoryMeta, error) {
	var meta *messages.MemoryMeta
	err := m.st.View(func(r store.Reader) error {
		var err error
		meta, err = m.MetaIn(r, c)
		return err
	})
	return meta, err
}

// Get returns a stored memory with its metadata.
func (m *Store) Get(c cid.Cid) (*model.Memory, *messages.MemoryMeta, error) {
	var (
		mem  *model.Memory
		meta *messages.MemoryMeta
	)
	err := m.st.View(func(r store.Reader) error {
		var err error
		if meta, err = m.MetaIn(r, c); err != nil {
			return err
		}
		mem, err = m.MemoryIn(r, c)
		return err
	})
	return mem, meta, err
}

// Vector returns the stored embedding of a memory.
func (m *Store) Vector(c cid.Cid) ([]float32, error) {
	var vec []float32
	err := m.st.View(func(r store.Reader) error {
		item, err := r.Item(VectorKey(c))
		if errors.Is(err, base.ErrNotFound) {
			return fmt.Errorf("%w: vector of %s", base.ErrNotFound, c)
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			vec, err = DecodeVector(v)
			return err
		})
	})
	return vec, err
}

// List lists memories in CID order, after cursor (a CID string).
func (m *Store) List(cursor string, limit int) (base.Page[cid.Cid], error) {
	var start []byte
	if cursor != "" {
		c, err := cid.Decode(cursor)
		if err != nil {
			return base.Page[cid.Cid]{}, fmt.Errorf("%w: cursor: %v", base.ErrInvalid, err)
		}
		start = Key(c)
	}
	var page base.Page[cid.Cid]
	err := m.st.View(func(r store.Reader) error {
		return store.ListKeys(r, Prefix, start, limit, func(k []byte) error {
			c, err := cid.Cast(k[len(Prefix):])
			if err != nil {
				return fmt.Errorf("%w: meta key: %v", base.ErrCorrupt, err)
			}
			page.Items = append(page.Items, c)
			return nil
		}, func() { page.Next = page.Items[len(page.Items)-1].String() })
	})
	return page, err
}

// InSona reports whether memory c is (durably) in sona id. Every append
// asks it of a memory that is mostly new: that is told by Has, without the
// error (and the CID it names) a read of a missing record builds.
func (m *Store) InSona(c cid.Cid, id string) (bool, error) {
	var in bool
	err := m.st.View(func(r store.Reader) error {
		if ok, err := m.Has(r, c); err != nil || !ok {
			return err
		}
		meta, err := m.MetaIn(r, c)
		if errors.Is(err, base.ErrNotFound) {
			return nil // forgotten
		}
		if err != nil {
			return err
		}
		in = slices.Contains(meta.Sonas, id)
		return nil
	})
	return in, err
}
