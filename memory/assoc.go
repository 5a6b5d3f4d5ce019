package memory

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// Association types (XmetaV memory_associations).
const (
	AssocCausal     = "causal"     // a response and what it was answering or drew on
	AssocSimilar    = "similar"    // a memory and its strong neighbours when it was stored
	AssocSequential = "sequential" // consecutive memories of a sona
	AssocRelated    = "related"    // explicit edges given at insert
)

var (
	prefixAssoc    = []byte("a/")
	prefixCoAccess = []byte("h/")
	prefixSimStats = []byte("d/")
	prefixQueryLog = []byte("l/")
)

func assocKey(from, to cid.Cid) []byte { return join(prefixAssoc, from.Bytes(), to.Bytes()) }
func assocPrefix(from cid.Cid) []byte  { return join(prefixAssoc, from.Bytes()) }
func simStatsKey(uuid string) []byte   { return join(prefixSimStats, []byte(uuid)) }
func coAccessPrefix(agent string, a cid.Cid) []byte {
	return join(prefixCoAccess, []byte(agent), []byte{0}, a.Bytes())
}
func coAccessKey(agent string, a, b cid.Cid) []byte {
	return join(coAccessPrefix(agent, a), b.Bytes())
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
	Type     string // association type, or "coaccess"
	Strength float64
}

// putAssociation records a typed association both ways, keeping the
// stronger of an existing one and the new one.
func putAssociation(tx *Tx, a, b cid.Cid, typ string, strength float64, now int64) error {
	if a == b {
		return nil
	}
	strength = math.Max(0, math.Min(1, strength))
	for _, k := range [][]byte{assocKey(a, b), assocKey(b, a)} {
		cur := &messages.Association{}
		raw, err := tx.Get(k)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			if err := proto.Unmarshal(raw, cur); err != nil {
				return fmt.Errorf("%w: association: %v", ErrCorrupt, err)
			}
			if cur.Strength >= strength {
				continue
			}
		}
		out, err := proto.Marshal(&messages.Association{Type: typ, Strength: strength, UpdatedAt: now})
		if err != nil {
			return err
		}
		tx.Set(k, out)
	}
	return nil
}

// associations lists the associations of c, strongest first.
func associations(txn *badger.Txn, c cid.Cid) ([]Link, error) {
	p := assocPrefix(c)
	var out []Link
	err := iteratePrefix(txn, p, func(k, v []byte) error {
		to, err := cid.Cast(bytes.Clone(k[len(p):]))
		if err != nil {
			return fmt.Errorf("%w: association key: %v", ErrCorrupt, err)
		}
		a := &messages.Association{}
		if err := proto.Unmarshal(v, a); err != nil {
			return fmt.Errorf("%w: association: %v", ErrCorrupt, err)
		}
		out = append(out, Link{Target: to, Type: a.Type, Strength: a.Strength})
		return nil
	})
	sortLinks(out)
	return out, err
}

// coPartners lists the co-access partners of c for an agent, strongest first.
func coPartners(txn *badger.Txn, agent string, c cid.Cid) ([]Link, error) {
	p := coAccessPrefix(agent, c)
	var out []Link
	err := iteratePrefix(txn, p, func(k, v []byte) error {
		to, err := cid.Cast(bytes.Clone(k[len(p):]))
		if err != nil || len(v) != 8 {
			return fmt.Errorf("%w: co-access entry", ErrCorrupt)
		}
		out = append(out, Link{Target: to, Type: "coaccess", Strength: math.Float64frombits(binary.BigEndian.Uint64(v))})
		return nil
	})
	sortLinks(out)
	return out, err
}

func sortLinks(ls []Link) {
	slices.SortFunc(ls, func(a, b Link) int {
		if c := cmp.Compare(b.Strength, a.Strength); c != 0 {
			return c
		}
		return bytes.Compare(a.Target.Bytes(), b.Target.Bytes())
	})
}

// Associations returns the typed associations of a memory.
func (s *Self) Associations(c cid.Cid) ([]Link, error) {
	var out []Link
	err := s.store.View(func(txn *badger.Txn) error {
		var err error
		out, err = associations(txn, c)
		return err
	})
	return out, err
}

// CoAccess returns the co-access partners of a memory for an agent.
func (s *Self) CoAccess(agent string, c cid.Cid) ([]Link, error) {
	var out []Link
	err := s.store.View(func(txn *badger.Txn) error {
		var err error
		out, err = coPartners(txn, agent, c)
		return err
	})
	return out, err
}

// coAccessOp strengthens the Hebbian co-access weight of every pair of
// memories returned together, for one agent: w ← w + rate·(1 − w).
func coAccessOp(agent string, together []cid.Cid, rate float64) Op {
	return func(tx *Tx) error {
		for i, a := range together {
			for _, b := range together[i+1:] {
				if a == b {
					continue
				}
				for _, k := range [][]byte{coAccessKey(agent, a, b), coAccessKey(agent, b, a)} {
					w := 0.0
					if raw, err := tx.Get(k); err == nil && len(raw) == 8 {
						w = math.Float64frombits(binary.BigEndian.Uint64(raw))
					} else if err != nil && !errors.Is(err, ErrNotFound) {
						return err
					}
					w += rate * (1 - w)
					var v [8]byte
					binary.BigEndian.PutUint64(v[:], math.Float64bits(w))
					tx.Set(k, v[:])
				}
			}
		}
		return nil
	}
}

// QueryLogEntry is one logged recall.
type QueryLogEntry = messages.QueryLog

func queryLogKey(ns int64, sona string) []byte {
	return join(prefixQueryLog, u64(uint64(ns)), []byte(sona))
}

// QueryLog returns the latest logged recalls, newest first.
func (s *Self) QueryLog(limit int) ([]*QueryLogEntry, error) {
	var out []*QueryLogEntry
	err := s.store.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixQueryLog, Reverse: true, PrefetchValues: true})
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
