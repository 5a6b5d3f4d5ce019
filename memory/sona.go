package memory

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// MaxSonaName is the longest sona name, in bytes.
const MaxSonaName = 200

// ValidateSonaName checks a sona name: a printable name (see
// validPrintable) of at most MaxSonaName bytes that is no path: no "/" or
// "\\", not "." or "..".
func ValidateSonaName(name string) error {
	if err := validPrintable("sona name", name, MaxSonaName); err != nil {
		return err
	}
	if strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return fmt.Errorf("%w: sona name %q must not look like a path (no / or \\, not . or ..)", ErrInvalid, name)
	}
	return nil
}

// ValidateSpeaker checks the speaker name of a chat's input: empty, or a
// printable name (see validPrintable) of at most MaxSonaName bytes.
func ValidateSpeaker(name string) error {
	if name == "" {
		return nil
	}
	return validPrintable("name", name, MaxSonaName)
}

// ValidateStep checks what a step of a sona (an advance) is given besides
// its content, so that nothing is stored for a step that cannot run: the
// speaker name, the agent id and the recall scope.
func ValidateStep(name, agentID, scope string) error {
	if err := ValidateSpeaker(name); err != nil {
		return err
	}
	if err := ValidateAgentID(agentID); err != nil {
		return err
	}
	switch scope {
	case "", ScopeSelf, ScopeSona:
		return nil
	}
	return fmt.Errorf("%w: scope must be %q or %q", ErrInvalid, ScopeSelf, ScopeSona)
}

// validPrintable checks a name shown to people: non-empty UTF-8 of at most
// maxBytes, no blanks around it, no control characters, and none of the
// invisible characters that reorder or hide the text around them when it
// is displayed (bidirectional controls such as U+202E, zero-width spaces).
func validPrintable(field, v string, maxBytes int) error {
	if err := base.ValidText(field, v, maxBytes); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(v) != v:
		return fmt.Errorf("%w: %s must not begin or end with blanks", ErrInvalid, field)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s must not contain control characters", ErrInvalid, field)
	case strings.IndexFunc(v, hidesText) >= 0:
		return fmt.Errorf("%w: %s must not contain bidirectional controls or invisible characters", ErrInvalid, field)
	}
	return nil
}

// hidesText reports the format characters that change how the text around
// them is displayed or hide text: bidirectional marks, embeddings,
// overrides and isolates, zero-width spaces, the BOM. The zero-width
// joiners that emoji sequences need are allowed.
func hidesText(r rune) bool {
	switch {
	case r == 0x200B, r == 0x200E, r == 0x200F, r == 0x061C, r == 0x2060, r == 0xFEFF:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// CreateSona creates a sona with a fresh uuid. Its centroid — the mean of
// its name's embedding and its memories' embeddings, kept in memory and
// recomputed at start — starts at the name, so sona similarity works from
// the first memory.
func (s *Self) CreateSona(ctx context.Context, name string) (*messages.Sona, error) {
	return s.createSona(ctx, name, nil)
}

// createSona creates a sona; also, when set, writes in the same transaction.
func (s *Self) createSona(ctx context.Context, name string, also func(tx Tx, rec *messages.Sona)) (*messages.Sona, error) {
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
	err = s.store.Update(ctx, func(tx Tx) error {
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
	err := s.store.View(func(txn Reader) error {
		p := namePrefix(name)
		return store.Keys(txn, p, func(k []byte) { ids = append(ids, string(k[len(p):])) })
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
	err := s.store.View(func(txn Reader) error {
		return store.ListKeys(txn, prefix, start, limit, func(k []byte) error {
			item, err := txn.Item(k)
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
