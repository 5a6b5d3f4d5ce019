package assoc

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// Association types (XmetaV memory_associations).
const (
	Causal     = "causal"     // a response and what it was answering or drew on
	Similar    = "similar"    // a memory and its strong neighbours when it was stored
	Sequential = "sequential" // consecutive memories of a sona
	Related    = "related"    // explicit edges given at insert
	CoAccess   = "coaccess"   // Hebbian co-access partners
)

// MaxLinks bounds the associations (and the co-access partners per agent)
// a memory keeps: the weakest are forgotten first.
const MaxLinks = 32

// The key spaces of the links.
var (
	// KeyAssoc: a/ memory CID → messages.Associations (typed links).
	KeyAssoc = []byte("a/")
	// KeyCoAccess: h/ agent 0x00 memory CID → messages.Associations
	// (co-access partners of the memory for that agent).
	KeyCoAccess = []byte("h/")
)

// Key is the key of c's typed associations.
func Key(c cid.Cid) []byte { return base.Join(KeyAssoc, c.Bytes()) }

// CoAccessKey is the key of c's co-access partners for agent.
func CoAccessKey(agent string, c cid.Cid) []byte {
	return base.Join(KeyCoAccess, []byte(agent), []byte{0}, c.Bytes())
}

// Link is a typed association or a co-access partnership seen from one memory.
type Link struct {
	Target   cid.Cid
	Type     string
	Strength float64
}

// Decode reads a stored link list, strongest first.
func Decode(raw []byte) ([]Link, error) {
	scratch := getEntries()
	defer scratch.put()
	es, err := decodeEntries(raw, scratch.es, &scratch.targets)
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(es))
	for _, e := range es {
		c, err := cid.Cast(e.Target)
		if err != nil {
			return nil, fmt.Errorf("%w: link target: %v", base.ErrCorrupt, err)
		}
		out = append(out, Link{Target: c, Type: e.Type, Strength: e.Strength})
	}
	return out, nil
}

// Read reads the link list under key (nil when there is none).
func Read(r store.Reader, key []byte) ([]Link, error) {
	item, err := r.Item(key)
	if errors.Is(err, base.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Link
	err = item.Value(func(v []byte) error {
		out, err = Decode(v)
		return err
	})
	return out, err
}

// Entry is a link as a list stores it (messages.Association).
type Entry struct {
	Target    []byte // the CID's bytes
	Type      string
	Strength  float64
	UpdatedAt int64 // Unix seconds
}

// List is a stored link list as Update's change edits it; neither it nor
// its entries outlive the change (their storage is reused).
type List struct {
	entries []Entry
	now     int64
}

// Find returns target's link, nil when the list has none. It is valid
// until the next Get or Remove.
func (l *List) Find(target cid.Cid) *Entry {
	if i := l.index(target); i >= 0 {
		return &l.entries[i]
	}
	return nil
}

func (l *List) index(target cid.Cid) int {
	key := target.KeyString()
	return slices.IndexFunc(l.entries, func(e Entry) bool { return string(e.Target) == key })
}

// Get returns target's link — made if new — stamped with Update's now. It
// is valid until the next Get or Remove.
func (l *List) Get(target cid.Cid) *Entry {
	e := l.Find(target)
	if e == nil {
		l.entries = append(l.entries, Entry{Target: target.Bytes()})
		e = &l.entries[len(l.entries)-1]
	}
	e.UpdatedAt = l.now
	return e
}

// each calls f with the link of each of n targets (target(i) the i-th's
// CID's bytes),
// made if new and stamped as Get's, found through an index in room: a
// flush applies up to maxDeltas partners to a list of MaxLinks.
func (l *List) each(n int, target func(i int) string, room *indexRoom, f func(i int, e *Entry)) {
	ix := newTargetIndex(len(l.entries)+n, room)
	for i, e := range l.entries {
		ix.findOrAdd(targetHash(e.Target), i, func(at int) bool { return bytes.Equal(l.entries[at].Target, e.Target) })
	}
	for i := range n {
		c := target(i)
		at, added := ix.findOrAdd(targetHash(c), len(l.entries), func(at int) bool { return string(l.entries[at].Target) == c })
		if added {
			l.entries = append(l.entries, Entry{Target: []byte(c)})
		}
		e := &l.entries[at]
		e.UpdatedAt = l.now
		f(i, e)
	}
}

// Remove drops target's link, reporting whether the list had one.
func (l *List) Remove(target cid.Cid) bool {
	i := l.index(target)
	if i >= 0 {
		l.entries = slices.Delete(l.entries, i, i+1)
	}
	return i >= 0
}

// Update applies change to the link list under key (read through tx)
// and writes it back strongest first, keeping at most MaxLinks; links
// change makes or touches (List.Get) are stamped with now. A list that
// comes out as it was — change kept a stronger link, or the new link was
// weaker than a full list's weakest — is not written again.
//
// The list is read and written by hand (decodeEntries, appendEntries),
// not through the generated messages: one Put rewrites a list per link,
// a recall's co-access one per hit, and the generic codec's allocations
// and reflection were most of their cost.
func Update(tx store.Tx, key []byte, now int64, change func(*List)) error {
	return (*Graph)(nil).Update(tx, key, now, change)
}

// Update is assoc.Update reading the list through g's cache when tx's
// batch has not written it (stored): the committer rewrites a list for
// every link an append brings, and reading each from Badger — deeper in
// its tree as the store grows — was a twentieth of an advance's CPU once
// sonas held a few dozen memories (issue 15). A nil g reads tx alone.
func (g *Graph) Update(tx store.Tx, key []byte, now int64, change func(*List)) error {
	raw, err := g.stored(tx, key)
	if errors.Is(err, base.ErrNotFound) {
		raw = nil
	} else if err != nil {
		return err
	}
	l := List{now: now}
	scratch := getEntries()
	defer scratch.put()
	if l.entries, err = decodeEntries(raw, scratch.es, &scratch.targets); err != nil {
		return err
	}
	change(&l)
	slices.SortFunc(l.entries, strongerFirst)
	out := appendEntries(make([]byte, 0, len(raw)+64), l.entries[:min(len(l.entries), MaxLinks)])
	if raw != nil && bytes.Equal(out, raw) {
		return nil
	}
	tx.Set(key, out)
	return nil
}

// strongerFirst orders links as a list stores them: strongest first,
// ties by their targets' bytes.
func strongerFirst(a, b Entry) int {
	if c := cmp.Compare(b.Strength, a.Strength); c != 0 {
		return c
	}
	return bytes.Compare(a.Target, b.Target)
}

// entryLists are the lists Update decodes into: a list of MaxLinks+1
// entries is 1.8 KB, and an append or a recall's trace rewrites several.
var entryLists = sync.Pool{New: func() any {
	return &entryScratch{es: make([]Entry, 0, MaxLinks+1)}
}}

// entryScratch is a decoded list's room: its entries, and the targets a
// compact list's entries were built again in.
type entryScratch struct {
	es      []Entry
	targets builtTargets
}

func getEntries() *entryScratch { return entryLists.Get().(*entryScratch) }

func (s *entryScratch) put() {
	clear(s.es[:cap(s.es)]) // no target aliasing a list stays
	s.es, s.targets.buf, s.targets.keep = s.es[:0], s.targets.buf[:0], false
	entryLists.Put(s)
}

// The field numbers of messages.Associations and messages.Association.
const (
	fieldLinks     = 1
	fieldType      = 1
	fieldStrength  = 2
	fieldUpdatedAt = 3
	fieldTarget    = 4

	// An entry's fields' tags, of one byte each.
	tagType      = fieldType<<3 | byte(protowire.BytesType)
	tagStrength  = fieldStrength<<3 | byte(protowire.Fixed64Type)
	tagUpdatedAt = fieldUpdatedAt<<3 | byte(protowire.VarintType)
	tagTarget    = fieldTarget<<3 | byte(protowire.BytesType)
)

// decodeEntries appends to out the links of raw, a stored list in either
// form (a message as proto.Unmarshal reads it: fields of other numbers
// skipped, a field given twice taking its last value); the targets alias
// raw, or are built in ts, kept, where the compact form left out their
// prefix.
func decodeEntries(raw []byte, out []Entry, ts *builtTargets) ([]Entry, error) {
	ts.keep = true
	err := eachEntry(raw, ts, func(e Entry) bool {
		out = append(out, e)
		return true
	})
	return out, err
}

// eachEntry calls fn with each link of raw, a stored list in either
// form, in order, until fn returns false; the targets alias raw or are
// built in ts (eachCompact).
func eachEntry(raw []byte, ts *builtTargets, fn func(Entry) bool) error {
	if compact(raw) {
		return eachCompact(raw, ts, fn)
	}
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return corruptList(n)
		}
		raw = raw[n:]
		if num != fieldLinks || typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, raw); n < 0 {
				return corruptList(n)
			}
			raw = raw[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(raw)
		if n < 0 {
			return corruptList(n)
		}
		raw = raw[n:]
		e, err := decodeEntry(msg)
		if err != nil {
			return err
		}
		if !fn(e) {
			return nil
		}
	}
	return nil
}

func decodeEntry(b []byte) (Entry, error) {
	var e Entry
	// An entry as appendEntries writes it — its fields in order, each
	// once, lengths of one byte — is read straight; what follows that
	// form, or departs from it, by the general loop. A long-lived sona's
	// recall walks hundreds of entries (issue 15).
	if len(b) > 2 && b[0] == tagType && b[1] < 0x80 && 2+int(b[1]) <= len(b) {
		e.Type, b = linkType(b[2:2+b[1]]), b[2+b[1]:]
	}
	if len(b) >= 9 && b[0] == tagStrength {
		e.Strength, b = math.Float64frombits(binary.LittleEndian.Uint64(b[1:9])), b[9:]
	}
	if len(b) > 1 && b[0] == tagUpdatedAt {
		if v, n := protowire.ConsumeVarint(b[1:]); n > 0 {
			e.UpdatedAt, b = int64(v), b[1+n:]
		}
	}
	if len(b) > 1 && b[0] == tagTarget && b[1] < 0x80 && 2+int(b[1]) == len(b) {
		e.Target = b[2:]
		return e, nil
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e, corruptList(n)
		}
		b = b[n:]
		switch {
		case num == fieldType && typ == protowire.BytesType:
			var v []byte
			v, n = protowire.ConsumeBytes(b)
			e.Type = linkType(v)
		case num == fieldStrength && typ == protowire.Fixed64Type:
			var v uint64
			v, n = protowire.ConsumeFixed64(b)
			e.Strength = math.Float64frombits(v)
		case num == fieldUpdatedAt && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			e.UpdatedAt = int64(v)
		case num == fieldTarget && typ == protowire.BytesType:
			e.Target, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return e, corruptList(n)
		}
		b = b[n:]
	}
	return e, nil
}

// linkType is the type named by b, the known ones without allocating.
func linkType(b []byte) string {
	for _, t := range [...]string{Similar, CoAccess, Sequential, Causal, Related} {
		if string(b) == t {
			return t
		}
	}
	return string(b)
}

func corruptList(n int) error {
	return fmt.Errorf("%w: link list: %v", base.ErrCorrupt, protowire.ParseError(n))
}

// Put records typed associations between from and each of links'
// targets, both ways, keeping the stronger of an existing link and the
// new one (strengths clamped to [0, 1]). from's own list is rewritten
// once. It is the append's contribution to the a/ space.
func Put(tx store.Tx, from cid.Cid, links []Link, now int64) error {
	return (*Graph)(nil).Put(tx, from, links, now)
}

// Put is assoc.Put reading the lists through g's cache (Graph.Update).
func (g *Graph) Put(tx store.Tx, from cid.Cid, links []Link, now int64) error {
	return g.put(tx, from, links, now, 0)
}

// put is Put, from being new at insertion-log position logSeq (0: not
// new): the links back of a new memory are held when g holds them
// (HoldLinksBack).
func (g *Graph) put(tx store.Tx, from cid.Cid, links []Link, now int64, logSeq uint64) error {
	for i := range links {
		links[i].Strength = math.Max(0, math.Min(1, links[i].Strength))
	}
	err := g.Update(tx, Key(from), now, func(list *List) {
		for _, l := range links {
			if l.Target != from {
				keepStronger(list, l.Target, l.Type, l.Strength)
			}
		}
	})
	if err != nil {
		return err
	}
	if g != nil && g.back != nil && logSeq > 0 {
		return g.back.put(tx, from, links, now, logSeq)
	}
	for _, l := range links {
		if l.Target == from {
			continue
		}
		err := g.Update(tx, Key(l.Target), now, func(list *List) {
			keepStronger(list, from, l.Type, l.Strength)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Strengthen is the op that strengthens the Hebbian co-access weight of
// every pair of memories returned together, for one agent:
// w ← w + rate·(1 − w).
func Strengthen(agent string, together []cid.Cid, rate float64, now int64) store.Op {
	return (*Graph)(nil).strengthen(agent, together, rate, now)
}

// strengthen is Strengthen's op, reading the lists through g's cache.
func (g *Graph) strengthen(agent string, together []cid.Cid, rate float64, now int64) store.Op {
	return func(tx store.Tx) error {
		for _, a := range together {
			err := g.Update(tx, CoAccessKey(agent, a), now, func(list *List) {
				for _, b := range together {
					if b != a {
						e := list.Get(b)
						e.Type = CoAccess
						e.Strength += rate * (1 - e.Strength)
					}
				}
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// Graph reads the links of a store, through a cache of the lists read
// or written lately, as stored, that the store's commit events keep
// current: a commit's lists enter it as written. The recalls read the
// links of their hits and best candidates — lists that their own
// co-access strengthening keeps rewriting — so reads from Badger and
// decoding were a sixth of a recall's CPU; and an append rewrites the
// lists of what the new memory links to, mostly memories written lately
// (Graph.Update). A list is decoded at each read: kept decoded, a list
// took about twice its stored bytes and an object a link for the
// collector to mark, so the same memory held half as many lists, and a
// read from Badger costs ten decodings (issue 15, stop 50).
type Graph struct {
	v     store.Viewer
	cache *store.Cache[[]byte] // a list as stored, nil when there is none; shared, never modified
	// coKeys are the co-access lists the store holds (with the cache):
	// most co-access reads are of a list that does not exist — a hit's
	// partners for its agent, where most memories have none (1,210 lists
	// in the 1M store, against a typed list for every memory) —, and each
	// such read went to Badger's tables (LoadKeys).
	coKeys *store.KeySet
	absent atomic.Uint64 // reads coKeys answered
	buf    *buffer       // the co-access strengthening not yet written (Buffer)
	back   *backBuffer   // the links back not yet written (HoldLinksBack)
	told   atomic.Uint64 // the latest commit told (Event.Told)
}

// NewGraph reads the links through v, caching at most size lists and
// about size·cachedListBytes bytes of them. When v reports its commits
// (store.Store), the cache follows them — call it before v's first write;
// otherwise nothing is cached.
func NewGraph(v store.Viewer, size int) *Graph {
	g := &Graph{v: v}
	if sub, ok := v.(interface{ Subscribe(func(store.Event)) }); ok && size > 0 {
		g.cache = store.NewWeighedCache(size, size*cachedListBytes, listWeight)
		g.coKeys = store.NewKeySet(KeyCoAccess)
		sub.Subscribe(g.committed)
	}
	return g
}

// cachedListBytes is what the cache of lists may hold for each list it
// may hold: the lists' sizes vary (a co-access list of 32 partners takes
// 1.6 KB, a new memory's links a hundred bytes), and bounded by their
// number alone, the cache took twice the memory where appends rewrite
// long lists (advances over 120 s) as where recalls read short ones.
// 768 bytes is about what the lists took kept decoded, at half the
// number, where recalls read them (at 100k memories a list takes 620
// bytes on average, decoded 1.4 times as much again).
const cachedListBytes = 768

// listWeight is a cached list's weight: its bytes, and its key's and its
// entry's.
func listWeight(raw []byte) int { return len(raw) + 96 }

// LoadKeys reads which co-access lists the store holds (the keys only),
// after which a read of one it does not hold is answered without Badger;
// it returns how many it holds. Without a cache it does nothing.
func (g *Graph) LoadKeys() (int, error) {
	if g.coKeys == nil {
		return 0, nil
	}
	return g.coKeys.Load(g.v)
}

func (g *Graph) committed(e store.Event) {
	g.told.Store(e.Told)
	g.coKeys.Told(e)
	var changes []store.CacheChange[[]byte]
	for i, k := range e.Keys {
		if strings.HasPrefix(k, string(KeyAssoc)) || strings.HasPrefix(k, string(KeyCoAccess)) {
			changes = append(changes, store.CacheChange[[]byte]{Key: k, V: e.Values[i]}) // shared, never modified
		} else if g.back != nil && k == string(store.KeyMemSeq) && len(e.Values[i]) == 8 {
			g.back.loggedTo(binary.BigEndian.Uint64(e.Values[i]))
		}
	}
	g.cache.Apply(e.Told, changes, nil)
}

// In reads the link list under key in r (nil when there is none),
// strongest first, through the cache; a view's co-access list has the
// buffered strengthening in it (Buffer), an operation's is as stored.
// The result is the caller's.
func (g *Graph) In(r store.Reader, key []byte) ([]Link, error) {
	if _, op := r.(store.Tx); op {
		return Read(r, key) // an operation sees its batch's writes
	}
	var room [MaxLinks]backLink // most lists wait for fewer
	if held := g.heldIn(r, key, room[:0]); len(held) > 0 {
		var links []Link
		err := g.walkHeld(r, key, held, func(e Entry) bool {
			c, err := cid.Cast(e.Target)
			if err == nil {
				links = append(links, Link{Target: c, Type: e.Type, Strength: e.Strength})
			}
			return true
		})
		return links, err
	}
	links, err := g.in(r, key)
	if err == nil && g.buf != nil && bytes.HasPrefix(key, KeyCoAccess) {
		links = g.buf.merged(key, links, store.ToldBefore(r))
	}
	return links, err
}

func (g *Graph) in(r store.Reader, key []byte) ([]Link, error) {
	if g.cache == nil {
		return Read(r, key)
	}
	raw, err := g.listIn(r, key)
	if err != nil {
		return nil, err
	}
	return decodeStored(raw)
}

// listIn reads the list under key in r as stored, nil when there is
// none: through the cache when g has one and r is a view. The list is
// shared: never modify it.
func (g *Graph) listIn(r store.Reader, key []byte) ([]byte, error) {
	_, op := r.(store.Tx)
	cached := g != nil && g.cache != nil && !op
	if cached && g.coKeys.Absent(key, r) {
		g.absent.Add(1)
		return nil, nil
	}
	var k string
	if cached {
		k = string(key)
		if raw, ok := g.cache.In(k, r); ok {
			return raw, nil
		}
	}
	raw, err := r.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		raw = nil
	} else if err != nil {
		return nil, err
	}
	if cached {
		// Cached as stored, unchecked: a damaged list fails every read
		// that decodes it, from the cache as from the store.
		g.cache.Fill(k, raw, r)
	}
	return raw, nil
}

// Walk calls fn with each link of the list under key in r, strongest
// first, until fn returns false: the list In reads, not decoded into
// Links — an entry's Target is the target CID's bytes, unchecked, valid
// until fn returns (it aliases the list, which is shared, or is built
// again from its digest): fn must not modify it or keep it. A recall's
// affinity walk reads a few dozen lists and keeps a few of the links it
// meets, and decoding every list into Links, a CID made and checked for
// each link, was a fourteenth of the bytes a long mixed run allocated
// (issue 15).
func (g *Graph) Walk(r store.Reader, key []byte, fn func(Entry) bool) error {
	if _, op := r.(store.Tx); !op && g != nil && g.buf != nil && bytes.HasPrefix(key, KeyCoAccess) {
		links, err := g.In(r, key) // the buffered strengthening merged
		for _, l := range links {
			if !fn(Entry{Target: l.Target.Bytes(), Type: l.Type, Strength: l.Strength}) {
				break
			}
		}
		return err
	}
	var room [MaxLinks]backLink // most lists wait for fewer
	if held := g.heldIn(r, key, room[:0]); len(held) > 0 {
		return g.walkHeld(r, key, held, fn)
	}
	raw, err := g.listIn(r, key)
	if err != nil {
		return err
	}
	scratch := getEntries() // room to build a target in, without an allocation a walk
	defer scratch.put()
	return eachEntry(raw, &scratch.targets, fn)
}

// heldIn appends to room the links back held for the list under key that
// the view r sees (none in an operation, or for a co-access list).
func (g *Graph) heldIn(r store.Reader, key []byte, room []backLink) []backLink {
	if _, op := r.(store.Tx); op || g == nil || g.back == nil || !bytes.HasPrefix(key, KeyAssoc) {
		return nil
	}
	return g.back.collect(key, store.ToldBefore(r), room)
}

// walkHeld is Walk of a list for which links back are held: the list
// read in r and decoded, with held applied.
func (g *Graph) walkHeld(r store.Reader, key []byte, held []backLink, fn func(Entry) bool) error {
	raw, err := g.listIn(r, key)
	if err != nil {
		return err
	}
	scratch := getEntries()
	defer scratch.put()
	es, err := decodeEntries(raw, scratch.es, &scratch.targets)
	if err != nil {
		return err
	}
	for _, e := range withHeld(es, held, &scratch.targets) {
		if !fn(e) {
			break
		}
	}
	return nil
}

// Walk is Graph.Walk without a cache.
func Walk(r store.Reader, key []byte, fn func(Entry) bool) error {
	return (*Graph)(nil).Walk(r, key, fn)
}

// decodeStored decodes a list as stored, nil when there is none.
func decodeStored(raw []byte) ([]Link, error) {
	if raw == nil {
		return nil, nil
	}
	return Decode(raw)
}

// stored reads the list under key in tx as stored (base.ErrNotFound when
// there is none): the cached list when tx's batch has not written key —
// the committer tells every commit to the cache before its next batch
// (store.Cache.Lookup) —, else from tx.
func (g *Graph) stored(tx store.Tx, key []byte) ([]byte, error) {
	if g != nil && g.cache != nil {
		if g.coKeys.Absent(key, tx) {
			return nil, base.ErrNotFound
		}
		if raw, ok := g.cache.Lookup(string(key), key, tx); ok {
			if raw == nil {
				return nil, base.ErrNotFound
			}
			return raw, nil
		}
	}
	return tx.Get(key)
}

// CacheStats are the reads of g's cache of link lists (none without one),
// a read of a co-access list the store does not hold a hit.
func (g *Graph) CacheStats() store.CacheStats {
	if g.cache == nil {
		return store.CacheStats{}
	}
	st := g.cache.Stats()
	st.Hits += g.absent.Load()
	return st
}

// Associations returns the typed associations of a memory, strongest first.
func (g *Graph) Associations(c cid.Cid) ([]Link, error) { return g.read(Key(c)) }

// CoAccess returns the co-access partners of a memory for an agent,
// strongest first.
func (g *Graph) CoAccess(agent string, c cid.Cid) ([]Link, error) {
	return g.read(CoAccessKey(agent, c))
}

func (g *Graph) read(key []byte) ([]Link, error) {
	var out []Link
	err := g.v.View(func(r store.Reader) error {
		var err error
		out, err = g.In(r, key)
		return err
	})
	return slices.Clone(out), err
}

// Forget is the links' part of an excision (memory/forget): in tx, it
// deletes the typed associations and the co-access partners (for every
// agent in agents) of each memory of gone, and takes it out of its
// partners' lists, which keep the links between memories that stay.
// isGone also names the memories forgotten before, whose rows are gone.
func Forget(tx store.Tx, gone []cid.Cid, agents []string, isGone func(cid.Cid) bool) error {
	return (*Graph)(nil).Forget(tx, gone, agents, isGone)
}

// Forget is assoc.Forget with the links back g holds: those of a memory
// gone name partners its stored list does not have yet, and what is held
// of and toward the memories gone is dropped once tx commits.
func (g *Graph) Forget(tx store.Tx, gone []cid.Cid, agents []string, isGone func(cid.Cid) bool) error {
	drop := func(key []byte, c cid.Cid) error {
		links, err := Read(tx, key)
		if err != nil {
			return err
		}
		if g != nil && g.back != nil && bytes.HasPrefix(key, KeyAssoc) {
			links = append(links, g.back.forList(c)...)
		}
		if links == nil {
			return nil
		}
		tx.Delete(key)
		for _, l := range links {
			if isGone(l.Target) {
				continue
			}
			var pk []byte
			if bytes.HasPrefix(key, KeyCoAccess) {
				pk = base.Join(key[:len(key)-len(c.Bytes())], l.Target.Bytes())
			} else {
				pk = Key(l.Target)
			}
			if err := remove(tx, pk, c, isGone); err != nil {
				return err
			}
		}
		return nil
	}
	if g != nil && g.back != nil {
		gone := slices.Clone(gone)
		tx.OnCommit(func() { g.back.forgotten(gone) })
	}
	for _, c := range gone {
		if err := drop(Key(c), c); err != nil {
			return err
		}
		for _, agent := range agents {
			if err := drop(CoAccessKey(agent, c), c); err != nil {
				return err
			}
		}
	}
	return nil
}

// remove rewrites the link list under key without c and without any
// forgotten target; a list left empty goes.
func remove(tx store.Tx, key []byte, c cid.Cid, isGone func(cid.Cid) bool) error {
	raw, err := tx.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	es, err := decodeEntries(raw, nil, &builtTargets{})
	if err != nil {
		return err
	}
	n := len(es)
	es = slices.DeleteFunc(es, func(e Entry) bool {
		t, err := cid.Cast(e.Target)
		return err == nil && (t == c || isGone(t))
	})
	switch {
	case len(es) == n:
		return nil
	case len(es) == 0:
		tx.Delete(key)
		return nil
	}
	tx.Set(key, appendEntries(nil, es))
	return nil
}

// Agents lists the agents that have co-access partners, reading one key
// per agent.
func Agents(r store.Reader) ([]string, error) {
	var out []string
	it := r.NewIterator(store.IterOptions{Prefix: KeyCoAccess})
	defer it.Close()
	for it.Rewind(); it.Valid(); {
		k := it.Item().Key()
		rest := k[len(KeyCoAccess):]
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, fmt.Errorf("%w: co-access key", base.ErrCorrupt)
		}
		agent := string(rest[:i])
		out = append(out, agent)
		it.Seek(base.Join(KeyCoAccess, []byte(agent), []byte{1}))
	}
	return out, nil
}
