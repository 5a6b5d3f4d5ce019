package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dgraph-io/badger/v4"
	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// Sona errors.
var (
	// ErrChainConflict means an append did not extend the current head:
	// someone else wrote the chain, which the one-writer rule forbids.
	ErrChainConflict = errors.New("memory: chain head moved")
	// ErrAmbiguous means a name matches more than one sona.
	ErrAmbiguous = errors.New("memory: ambiguous sona name")
)

// MaxSonaName is the longest sona name, in bytes.
const MaxSonaName = 200

// ValidateSonaName checks a sona name: non-empty, printable UTF-8, short.
func ValidateSonaName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%w: sona name must not be empty", ErrInvalid)
	case len(name) > MaxSonaName:
		return fmt.Errorf("%w: sona name longer than %d bytes", ErrInvalid, MaxSonaName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: sona name must be UTF-8", ErrInvalid)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: sona name must not contain control characters", ErrInvalid)
	}
	return nil
}

// CreateSona creates a sona with a fresh uuid. Its centroid — the mean of
// its name's embedding and its memories' embeddings, kept in memory and
// recomputed at start — starts at the name, so sona similarity works from
// the first memory.
func (s *Self) CreateSona(ctx context.Context, name string) (*messages.Sona, error) {
	return s.createSona(ctx, name, nil)
}

// createSona creates a sona; also, when set, writes in the same transaction.
func (s *Self) createSona(ctx context.Context, name string, also func(tx *Tx, rec *messages.Sona)) (*messages.Sona, error) {
	if err := ValidateSonaName(name); err != nil {
		return nil, err
	}
	vecs, err := s.Embed(ctx, name)
	if err != nil {
		return nil, err
	}
	rec := &messages.Sona{
		Uuid:      uuid.NewString(),
		Name:      name,
		CreatedAt: s.clock.Now().Unix(),
	}
	raw, err := proto.Marshal(rec)
	if err != nil {
		return nil, err
	}
	err = s.store.Update(ctx, func(tx *Tx) error {
		tx.Set(sonaKey(rec.Uuid), raw)
		tx.Set(nameKey(name, rec.Uuid), nil)
		tx.Set(nameVectorKey(rec.Uuid), encodeVector(vecs[0]))
		if also != nil {
			also(tx, rec)
		}
		tx.OnCommit(func() {
			s.smu.Lock()
			s.sonas[rec.Uuid] = newSonaState(rec, vecs[0])
			s.smu.Unlock()
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return proto.Clone(rec).(*messages.Sona), nil
}

// Sona returns the committed record of a sona.
func (s *Self) Sona(id string) (*messages.Sona, error) {
	s.smu.RLock()
	defer s.smu.RUnlock()
	st, ok := s.sonas[id]
	if !ok {
		return nil, fmt.Errorf("%w: sona %q", ErrNotFound, id)
	}
	return proto.Clone(st.rec).(*messages.Sona), nil
}

// SonasNamed returns the uuids of the sonas called name.
func (s *Self) SonasNamed(name string) ([]string, error) {
	var ids []string
	err := s.store.View(func(txn *badger.Txn) error {
		p := namePrefix(name)
		return iterateKeys(txn, p, func(k []byte) { ids = append(ids, string(k[len(p):])) })
	})
	return ids, err
}

// CanonicalUUID returns the canonical (lower-case, hyphenated) form of a
// uuid in any spelling uuid.Parse accepts, and whether ref is a uuid.
func CanonicalUUID(ref string) (string, bool) {
	u, err := uuid.Parse(ref)
	if err != nil {
		return ref, false
	}
	return u.String(), true
}

// ResolveSona finds a sona by uuid (in any spelling) or, when unambiguous,
// by name.
func (s *Self) ResolveSona(ref string) (*messages.Sona, error) {
	if id, ok := CanonicalUUID(ref); ok {
		if rec, err := s.Sona(id); err == nil {
			return rec, nil
		}
	}
	ids, err := s.SonasNamed(ref)
	if err != nil {
		return nil, err
	}
	switch len(ids) {
	case 0:
		return nil, fmt.Errorf("%w: no sona with uuid or name %q", ErrNotFound, ref)
	case 1:
		return s.Sona(ids[0])
	}
	return nil, fmt.Errorf("%w: %d sonas are named %q (%s): use a uuid", ErrAmbiguous, len(ids), ref, strings.Join(ids, ", "))
}

// ListSonas lists sonas in uuid order after cursor (a uuid).
func (s *Self) ListSonas(cursor string, limit int) (Page[*messages.Sona], error) {
	s.smu.RLock()
	ids := make([]string, 0, len(s.sonas))
	for id := range s.sonas {
		ids = append(ids, id)
	}
	s.smu.RUnlock()
	return s.sonaPage(ids, cursor, limit)
}

// ListSonasNamed lists the sonas called name, like ListSonas.
func (s *Self) ListSonasNamed(name, cursor string, limit int) (Page[*messages.Sona], error) {
	ids, err := s.SonasNamed(name)
	if err != nil {
		return Page[*messages.Sona]{}, err
	}
	return s.sonaPage(ids, cursor, limit)
}

func (s *Self) sonaPage(ids []string, cursor string, limit int) (Page[*messages.Sona], error) {
	ids = slices.DeleteFunc(ids, func(id string) bool { return id <= cursor })
	slices.Sort(ids)
	var page Page[*messages.Sona]
	if len(ids) > limit {
		ids = ids[:limit]
		page.Next = ids[limit-1]
	}
	for _, id := range ids {
		rec, err := s.Sona(id)
		if err != nil {
			return page, err
		}
		page.Items = append(page.Items, rec)
	}
	return page, nil
}

// sonaSnapshot returns the committed centroid and length of a sona.
func (s *Self) sonaSnapshot(id string) (centroid []float32, length int64, ok bool) {
	s.smu.RLock()
	defer s.smu.RUnlock()
	st, ok := s.sonas[id]
	if !ok {
		return nil, 0, false
	}
	return st.centroid, st.rec.Length, true
}

// ChainEntry is one ACT of a chain.
type ChainEntry struct {
	Seq    int64
	Act    cid.Cid
	Memory cid.Cid
	// LogSeq is the insertion-log position of the store when the ACT was
	// appended: the memories that existed then have Seq ≤ LogSeq.
	LogSeq uint64
}

// Chain lists a sona's ACTs by seq, starting at from.
func (s *Self) Chain(id string, from int64, limit int) (Page[ChainEntry], error) {
	var page Page[ChainEntry]
	if _, err := s.Sona(id); err != nil {
		return page, err
	}
	prefix := chainPrefix(id)
	var start []byte
	if from > 0 {
		start = chainKey(id, from-1)
	}
	err := s.store.View(func(txn *badger.Txn) error {
		return listKeys(txn, prefix, start, limit, func(k []byte) error {
			item, err := txn.Get(k)
			if err != nil {
				return err
			}
			seq := int64(binary.BigEndian.Uint64(k[len(prefix):]))
			return item.Value(func(v []byte) error {
				act, mem, logSeq, err := decodeChainEntry(v)
				page.Items = append(page.Items, ChainEntry{Seq: seq, Act: act, Memory: mem, LogSeq: logSeq})
				return err
			})
		}, func() { page.Next = fmt.Sprint(page.Items[len(page.Items)-1].Seq + 1) })
	})
	return page, err
}
