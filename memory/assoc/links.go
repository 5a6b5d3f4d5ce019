package assoc

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
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
	list := &messages.Associations{}
	if err := proto.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("%w: link list: %v", base.ErrCorrupt, err)
	}
	out := make([]Link, 0, len(list.Links))
	for _, l := range list.Links {
		c, err := cid.Cast(l.Target)
		if err != nil {
			return nil, fmt.Errorf("%w: link target: %v", base.ErrCorrupt, err)
		}
		out = append(out, Link{Target: c, Type: l.Type, Strength: l.Strength})
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

// Update applies change to the link list under key (read through tx)
// and writes it back strongest first, keeping at most MaxLinks. change
// sees the links by target and get, which returns a target's link
// (created if new) stamped with now. A list that comes out as it was —
// change kept a stronger link, or the new link was weaker than a full
// list's weakest — is not written again.
func Update(tx store.Tx, key []byte, now int64, change func(have map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association)) error {
	list := &messages.Associations{}
	raw, err := tx.Get(key)
	if err == nil {
		if err := proto.Unmarshal(raw, list); err != nil {
			return fmt.Errorf("%w: link list: %v", base.ErrCorrupt, err)
		}
	} else if errors.Is(err, base.ErrNotFound) {
		raw = nil
	} else {
		return err
	}
	byTarget := map[cid.Cid]*messages.Association{}
	for _, l := range list.Links {
		c, err := cid.Cast(l.Target)
		if err != nil {
			return fmt.Errorf("%w: link target: %v", base.ErrCorrupt, err)
		}
		byTarget[c] = l
	}
	get := func(c cid.Cid) *messages.Association {
		l, ok := byTarget[c]
		if !ok {
			l = &messages.Association{Target: c.Bytes()}
			byTarget[c] = l
		}
		l.UpdatedAt = now
		return l
	}
	change(byTarget, get)
	links := make([]*messages.Association, 0, len(byTarget))
	for _, l := range byTarget {
		links = append(links, l)
	}
	slices.SortFunc(links, func(a, b *messages.Association) int {
		if c := cmp.Compare(b.Strength, a.Strength); c != 0 {
			return c
		}
		return bytes.Compare(a.Target, b.Target)
	})
	list.Links = links[:min(len(links), MaxLinks)]
	out, err := proto.Marshal(list)
	if err != nil {
		return err
	}
	if raw != nil && bytes.Equal(out, raw) {
		return nil
	}
	tx.Set(key, out)
	return nil
}

// Put records typed associations between from and each of links'
// targets, both ways, keeping the stronger of an existing link and the
// new one (strengths clamped to [0, 1]). from's own list is rewritten
// once. It is the append's contribution to the a/ space.
func Put(tx store.Tx, from cid.Cid, links []Link, now int64) error {
	keep := func(have map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association, to cid.Cid, typ string, strength float64) {
		if l, ok := have[to]; ok && l.Strength >= strength {
			return
		}
		l := get(to)
		l.Type, l.Strength = typ, strength
	}
	for i := range links {
		links[i].Strength = math.Max(0, math.Min(1, links[i].Strength))
	}
	err := Update(tx, Key(from), now, func(have map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association) {
		for _, l := range links {
			if l.Target != from {
				keep(have, get, l.Target, l.Type, l.Strength)
			}
		}
	})
	if err != nil {
		return err
	}
	for _, l := range links {
		if l.Target == from {
			continue
		}
		err := Update(tx, Key(l.Target), now, func(have map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association) {
			keep(have, get, from, l.Type, l.Strength)
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
	return func(tx store.Tx) error {
		for _, a := range together {
			err := Update(tx, CoAccessKey(agent, a), now, func(_ map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association) {
				for _, b := range together {
					if b != a {
						l := get(b)
						l.Type = CoAccess
						l.Strength += rate * (1 - l.Strength)
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
// lately (each decoded once) that the store's commit events keep current:
// a commit that writes a cached list replaces it with the value written,
// decoded when next read. The recalls read the links of their hits and
// best candidates — lists that their own co-access strengthening keeps
// rewriting — so reads from Badger and decoding were a sixth of a
// recall's CPU.
type Graph struct {
	v     store.Viewer
	cache *store.Cache[*cachedLinks]
}

// cachedLinks is a list as committed, decoded on first use.
type cachedLinks struct {
	raw   []byte // nil: no list
	once  sync.Once
	links []Link
	err   error
}

func (c *cachedLinks) decoded() ([]Link, error) {
	c.once.Do(func() {
		if c.raw != nil {
			c.links, c.err = Decode(c.raw)
			c.raw = nil
		}
	})
	return c.links, c.err
}

// NewGraph reads the links through v, caching about size lists. When v
// reports its commits (store.Store), the cache follows them — call it
// before v's first write; otherwise nothing is cached.
func NewGraph(v store.Viewer, size int) *Graph {
	g := &Graph{v: v}
	if sub, ok := v.(interface{ Subscribe(func(store.Event)) }); ok && size > 0 {
		g.cache = store.NewCache[*cachedLinks](size)
		sub.Subscribe(g.committed)
	}
	return g
}

func (g *Graph) committed(e store.Event) {
	for i, k := range e.Keys {
		if strings.HasPrefix(k, string(KeyAssoc)) || strings.HasPrefix(k, string(KeyCoAccess)) {
			value := e.Values[i] // shared, never modified
			g.cache.Patch(k, e.Told, func(*cachedLinks) *cachedLinks { return &cachedLinks{raw: value} })
		}
	}
}

// In reads the link list under key in r (nil when there is none),
// strongest first, through the cache. The result is shared: do not
// modify it.
func (g *Graph) In(r store.Reader, key []byte) ([]Link, error) {
	if g.cache == nil {
		return Read(r, key)
	}
	if _, op := r.(store.Tx); op {
		return Read(r, key) // an operation sees its batch's writes
	}
	k := string(key)
	if c, ok := g.cache.Get(k); ok {
		return c.decoded()
	}
	links, err := Read(r, key)
	if err != nil {
		return nil, err
	}
	c := &cachedLinks{links: links}
	c.once.Do(func() {}) // decoded
	g.cache.Fill(k, c, r)
	return links, nil
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
	drop := func(key []byte, c cid.Cid) error {
		links, err := Read(tx, key)
		if err != nil || links == nil {
			return err
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
	list := &messages.Associations{}
	if err := proto.Unmarshal(raw, list); err != nil {
		return fmt.Errorf("%w: link list: %v", base.ErrCorrupt, err)
	}
	n := len(list.Links)
	list.Links = slices.DeleteFunc(list.Links, func(l *messages.Association) bool {
		t, err := cid.Cast(l.Target)
		return err == nil && (t == c || isGone(t))
	})
	switch {
	case len(list.Links) == n:
		return nil
	case len(list.Links) == 0:
		tx.Delete(key)
		return nil
	}
	return store.SetProto(tx, key, list)
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
