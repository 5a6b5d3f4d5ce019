package memory

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// Association types (XmetaV memory_associations).
const (
	AssocCausal     = "causal"     // a response and what it was answering or drew on
	AssocSimilar    = "similar"    // a memory and its strong neighbours when it was stored
	AssocSequential = "sequential" // consecutive memories of a sona
	AssocRelated    = "related"    // explicit edges given at insert
	AssocCoAccess   = "coaccess"   // Hebbian co-access partners
)

// maxLinks bounds the associations (and the co-access partners per agent)
// a memory keeps: the weakest are forgotten first.
const maxLinks = 32

var (
	prefixAssoc    = []byte("a/")
	prefixCoAccess = []byte("h/")
	prefixQueryLog = []byte("l/")
)

func assocKey(c cid.Cid) []byte { return base.Join(prefixAssoc, c.Bytes()) }
func coAccessKey(agent string, c cid.Cid) []byte {
	return base.Join(prefixCoAccess, []byte(agent), []byte{0}, c.Bytes())
}

// ValidateAgentID checks an agent id: printable, short.
func ValidateAgentID(id string) error {
	if len(id) > 200 || strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("%w: agent_id must be at most 200 printable characters", ErrInvalid)
	}
	return nil
}

// Link is a typed association or a co-access partnership seen from one memory.
type Link struct {
	Target   cid.Cid
	Type     string
	Strength float64
}

// links reads a link list, strongest first.
func decodeLinks(raw []byte) ([]Link, error) {
	list := &messages.Associations{}
	if err := proto.Unmarshal(raw, list); err != nil {
		return nil, fmt.Errorf("%w: link list: %v", ErrCorrupt, err)
	}
	out := make([]Link, 0, len(list.Links))
	for _, l := range list.Links {
		c, err := cid.Cast(l.Target)
		if err != nil {
			return nil, fmt.Errorf("%w: link target: %v", ErrCorrupt, err)
		}
		out = append(out, Link{Target: c, Type: l.Type, Strength: l.Strength})
	}
	return out, nil
}

// updateLinks applies change to the link list under key (read through tx)
// and writes it back strongest first, keeping at most maxLinks.
func updateLinks(tx Tx, key []byte, now int64, change func(map[cid.Cid]*messages.Association, func(cid.Cid) *messages.Association)) error {
	list := &messages.Associations{}
	if raw, err := tx.Get(key); err == nil {
		if err := proto.Unmarshal(raw, list); err != nil {
			return fmt.Errorf("%w: link list: %v", ErrCorrupt, err)
		}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	byTarget := map[cid.Cid]*messages.Association{}
	for _, l := range list.Links {
		c, err := cid.Cast(l.Target)
		if err != nil {
			return fmt.Errorf("%w: link target: %v", ErrCorrupt, err)
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
	list.Links = links[:min(len(links), maxLinks)]
	out, err := proto.Marshal(list)
	if err != nil {
		return err
	}
	tx.Set(key, out)
	return nil
}

// putAssociations records typed associations between from and each of
// links' targets, both ways, keeping the stronger of an existing link and
// the new one. from's own list is rewritten once.
func putAssociations(tx Tx, from cid.Cid, links []Link, now int64) error {
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
	err := updateLinks(tx, assocKey(from), now, func(have map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association) {
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
		err := updateLinks(tx, assocKey(l.Target), now, func(have map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association) {
			keep(have, get, from, l.Type, l.Strength)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func readLinks(txn Reader, key []byte) ([]Link, error) {
	item, err := txn.Item(key)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Link
	err = item.Value(func(v []byte) error {
		out, err = decodeLinks(v)
		return err
	})
	return out, err
}

// Associations returns the typed associations of a memory, strongest first.
func (s *Self) Associations(c cid.Cid) ([]Link, error) {
	var out []Link
	err := s.store.View(func(txn Reader) error {
		var err error
		out, err = readLinks(txn, assocKey(c))
		return err
	})
	return out, err
}

// CoAccess returns the co-access partners of a memory for an agent,
// strongest first.
func (s *Self) CoAccess(agent string, c cid.Cid) ([]Link, error) {
	var out []Link
	err := s.store.View(func(txn Reader) error {
		var err error
		out, err = readLinks(txn, coAccessKey(agent, c))
		return err
	})
	return out, err
}

// coAccessOp strengthens the Hebbian co-access weight of every pair of
// memories returned together, for one agent: w ← w + rate·(1 − w).
func coAccessOp(agent string, together []cid.Cid, rate float64, now int64) Op {
	return func(tx Tx) error {
		for _, a := range together {
			err := updateLinks(tx, coAccessKey(agent, a), now, func(_ map[cid.Cid]*messages.Association, get func(cid.Cid) *messages.Association) {
				for _, b := range together {
					if b != a {
						l := get(b)
						l.Type = AssocCoAccess
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

// QueryLogEntry is one logged recall.
type QueryLogEntry = messages.QueryLog

func queryLogKey(ns int64, sona string) []byte {
	return base.Join(prefixQueryLog, base.U64(uint64(ns)), []byte(sona))
}

// QueryLog returns the latest logged recalls, newest first.
func (s *Self) QueryLog(limit int) ([]*QueryLogEntry, error) {
	var out []*QueryLogEntry
	err := s.store.View(func(txn Reader) error {
		it := txn.NewIterator(IterOptions{Prefix: prefixQueryLog, Reverse: true, PrefetchValues: true})
		defer it.Close()
		for it.Seek(append(bytes.Clone(prefixQueryLog), 0xff)); it.Valid() && len(out) < limit; it.Next() {
			e := &QueryLogEntry{}
			if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, e) }); err != nil {
				return fmt.Errorf("%w: query log: %v", ErrCorrupt, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}
