package chain

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
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
		return fmt.Errorf("%w: sona name %q must not look like a path (no / or \\, not . or ..)", base.ErrInvalid, name)
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
		return fmt.Errorf("%w: %s must not begin or end with blanks", base.ErrInvalid, field)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: %s must not contain control characters", base.ErrInvalid, field)
	case strings.IndexFunc(v, hidesText) >= 0:
		return fmt.Errorf("%w: %s must not contain bidirectional controls or invisible characters", base.ErrInvalid, field)
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

// CanonicalUUID returns the canonical (lower-case, hyphenated) form of a
// uuid in any spelling uuid.Parse accepts, and whether ref is a uuid.
func CanonicalUUID(ref string) (string, bool) {
	u, err := uuid.Parse(ref)
	if err != nil {
		return ref, false
	}
	return u.String(), true
}

// Embed embeds texts in the store's embedding space (unit length).
type Embed func(ctx context.Context, texts ...string) ([][]float32, error)

// Sonas is the registry of sonas: every sona's committed record, its
// centroid (the mean of its name's embedding and its memories'
// embeddings, kept in memory and recomputed at open) and its members (the
// vector ids of its memories, in chain order). It is safe for concurrent
// use; it changes only when a write that creates a sona or appends to a
// chain commits.
type Sonas struct {
	st    *store.Store
	embed Embed
	clock clock.Clock
	dims  int

	mu    sync.RWMutex
	sonas map[string]*sonaState // by uuid
	// changes counts the changes of the sonas' states (Changes).
	changes uint64
}

// Changes counts the changes of the sonas' records, members and
// centroids since the registry was made: EncodeMembers at the same count
// encodes the same state.
func (s *Sonas) Changes() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changes
}

// sonaState is the committed state of a sona.
type sonaState struct {
	rec *messages.Sona
	// mean is its centroid's (Snapshot): the mean of its name's embedding
	// and its memories', added in chain order.
	mean    base.Mean
	members []uint64 // vector ids of its memories, in chain order (append only)
	// name is its name's embedding between Load and LoadMembers.
	name []float32
}

// NewSonas is the registry of the sonas in st, whose embeddings (names
// and memories) have dims dimensions. Fill it with Load.
func NewSonas(st *store.Store, embed Embed, clk clock.Clock, dims int) *Sonas {
	return &Sonas{st: st, embed: embed, clock: clk, dims: dims, sonas: map[string]*sonaState{}}
}

// Load reads the sonas' records and the embeddings of their names.
func (s *Sonas) Load(r store.Reader) error {
	if err := store.Scan(r, SonaPrefix, func(_, v []byte) error {
		rec := &messages.Sona{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("%w: sona record: %v", base.ErrCorrupt, err)
		}
		s.sonas[rec.Uuid] = &sonaState{rec: rec}
		return nil
	}); err != nil {
		return err
	}
	return store.Scan(r, NameVecPrefix, func(k, v []byte) error {
		st, ok := s.sonas[string(k[len(NameVecPrefix):])]
		if !ok {
			return nil
		}
		var err error
		st.name, err = meta.DecodeVector(v)
		return err
	})
}

// CheckHeads checks that every sona's head ACT block is readable: what
// the store wrote last (a store that lost its last writes whole is caught
// by the acknowledged mark; this catches damage to the tables that hold
// them).
func (s *Sonas) CheckHeads(r store.Reader) error {
	for id, st := range s.sonas {
		rec, err := model.SonaOf(st.rec)
		if err != nil {
			return err
		}
		if rec.Head == nil {
			continue
		}
		head := *rec.Head
		if _, err := store.ReadBlock(r, head); err != nil {
			return s.st.Explain(fmt.Errorf("%w: the head ACT %s of sona %s is unreadable: %v", base.ErrCorrupt, head, id, err))
		}
	}
	return nil
}

// LoadMembers reads the members of every sona from the chains, whose
// memories' embeddings ix must already hold, and computes the centroids.
func (s *Sonas) LoadMembers(r store.Reader, ix *vector.Index) error {
	// Each centroid: the mean of its name's embedding and its memories',
	// added up in the order appends add them, so that a reopened self
	// scores exactly as before.
	for _, st := range s.sonas {
		name := st.name
		st.name, st.mean, st.members = nil, base.Mean{}, nil
		if len(name) == s.dims {
			st.mean.AddInPlace(name)
		}
	}
	buf := make([]float32, s.dims) // room for a vector read from a file
	err := ScanMemories(r, func(id string, mem cid.Cid) error {
		st, ok := s.sonas[id]
		if !ok {
			return nil
		}
		return s.addMember(r, ix, id, st, mem, buf)
	})
	return err
}

// Create creates a sona with a fresh uuid, unless a sona is called name
// already (ErrExists): names are unique unless CreateDuplicate asks
// otherwise. Its centroid starts at the embedding of its name, so sona
// similarity works from the first memory.
func (s *Sonas) Create(ctx context.Context, name string) (*messages.Sona, error) {
	return s.create(ctx, name, true, nil)
}

// CreateDuplicate creates a sona with a fresh uuid even when others are
// called name: the name then resolves to none of them (ErrAmbiguous), and
// their uuids name them.
func (s *Sonas) CreateDuplicate(ctx context.Context, name string) (*messages.Sona, error) {
	return s.create(ctx, name, false, nil)
}

// create creates a sona, refusing a name that is taken when unique; also,
// when set, writes in the same transaction.
func (s *Sonas) create(ctx context.Context, name string, unique bool, also func(tx store.Tx, rec *messages.Sona)) (*messages.Sona, error) {
	if err := ValidateSonaName(name); err != nil {
		return nil, err
	}
	vecs, err := s.embed(ctx, name)
	if err != nil {
		return nil, err
	}
	rec := &messages.Sona{
		Uuid:      uuid.NewString(),
		Name:      name,
		CreatedAt: s.clock.Now().Unix(),
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		if unique {
			if err := nameFree(tx, name); err != nil {
				return err
			}
		}
		if err := s.Put(tx, rec, vecs[0]); err != nil {
			return err
		}
		if also != nil {
			also(tx, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return proto.Clone(rec).(*messages.Sona), nil
}

// Adopt creates the sona rec names (its uuid, name and creation time)
// with an empty chain, unless this store has it: a cluster member that
// replicates or takes over a sona created on another member. The name is
// not checked for uniqueness here: the member that created the sona did.
// It reports whether it created it.
func (s *Sonas) Adopt(ctx context.Context, rec *messages.Sona) (bool, error) {
	if u, ok := CanonicalUUID(rec.GetUuid()); !ok || u != rec.GetUuid() {
		return false, fmt.Errorf("%w: sona uuid %q", base.ErrInvalid, rec.GetUuid())
	}
	if _, err := s.Get(rec.Uuid); err == nil {
		return false, nil
	} else if !errors.Is(err, base.ErrNotFound) {
		return false, err
	}
	if err := ValidateSonaName(rec.Name); err != nil {
		return false, err
	}
	vecs, err := s.embed(ctx, rec.Name)
	if err != nil {
		return false, err
	}
	fresh := &messages.Sona{Uuid: rec.Uuid, Name: rec.Name, CreatedAt: rec.CreatedAt}
	created := false
	err = s.st.Update(ctx, func(tx store.Tx) error {
		if ok, err := tx.Has(SonaKey(fresh.Uuid)); err != nil || ok {
			return err // adopted meanwhile
		}
		tx.OnCommit(func() { created = true })
		return s.Put(tx, fresh, vecs[0])
	})
	return created && err == nil, err
}

// nameFree checks, in the transaction that would take it, that no sona is
// called name. The transaction sees the sonas the batch's earlier
// operations create, so two creations of one name never both succeed.
func nameFree(tx store.Tx, name string) error {
	p := namePrefix(name)
	it := tx.NewIterator(store.IterOptions{Prefix: p})
	defer it.Close()
	if it.Rewind(); it.Valid() {
		return fmt.Errorf("%w: a sona is called %q already (%s): choose another name, or ask for a duplicate name", base.ErrExists, name, it.Item().Key()[len(p):])
	}
	return nil
}

// Put writes a new sona — its record, its name and its name's embedding —
// in tx, and registers it once tx commits: how a sona is created, also by
// an import. rec must not change afterwards.
func (s *Sonas) Put(tx store.Tx, rec *messages.Sona, name []float32) error {
	if err := store.SetProto(tx, SonaKey(rec.Uuid), rec); err != nil {
		return err
	}
	tx.Set(NameKey(rec.Name, rec.Uuid), nil)
	tx.Set(NameVecKey(rec.Uuid), meta.EncodeVector(name))
	tx.OnCommit(func() {
		st := &sonaState{rec: proto.Clone(rec).(*messages.Sona)}
		st.mean.AddInPlace(name)
		s.mu.Lock()
		s.sonas[rec.Uuid] = st
		s.changes++
		s.mu.Unlock()
	})
	return nil
}

// appended registers a committed append to sona: its record after it, and
// its memory's vector id and embedding.
func (s *Sonas) appended(sona string, rec *messages.Sona, vid uint64, vec []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &sonaState{rec: rec}
	if old := s.sonas[sona]; old != nil {
		st.members, st.mean = old.members, old.mean
	}
	// The sum is added to in place: a mean is only read under s.mu, and
	// the old state's goes with it.
	st.mean.AddInPlace(vec)
	st.members = append(st.members, vid)
	s.sonas[sona] = st
	s.changes++
}

// advanced records rec, the record of sona after an append whose memory
// was forgotten (no member, no vector).
func (s *Sonas) advanced(sona string, rec *messages.Sona) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &sonaState{rec: rec}
	if old := s.sonas[sona]; old != nil {
		st.members, st.mean = old.members, old.mean
	}
	s.sonas[sona] = st
	s.changes++
}

// Forget registers, once tx commits, that the memories whose vector ids
// are in gone were forgotten: the sonas lose them as members and each
// sona that lost one has its centroid computed again from its name's
// embedding and the members left, in chain order, as LoadMembers does
// (ix must still hold their vectors then).
func (s *Sonas) Forget(tx store.Tx, sonas []string, gone map[uint64]bool, ix *vector.Index) error {
	names := map[string][]float32{}
	for _, id := range sonas {
		v, err := tx.Get(NameVecKey(id))
		if errors.Is(err, base.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if names[id], err = meta.DecodeVector(v); err != nil {
			return err
		}
	}
	tx.OnCommit(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, id := range sonas {
			old := s.sonas[id]
			if old == nil {
				continue
			}
			st := &sonaState{rec: old.rec}
			if name := names[id]; len(name) == s.dims {
				st.mean.AddInPlace(name)
			}
			buf := make([]float32, s.dims) // room for a vector read from a file
			for _, vid := range old.members {
				if !gone[vid] {
					st.members = append(st.members, vid)
					st.mean.AddInPlace(ix.Vector(vid, buf))
				}
			}
			s.sonas[id] = st
		}
		s.changes++
	})
	return nil
}

// Get returns the committed record of a sona.
func (s *Sonas) Get(id string) (*messages.Sona, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.sonas[id]
	if !ok {
		return nil, fmt.Errorf("%w: sona %q", base.ErrNotFound, id)
	}
	return proto.Clone(st.rec).(*messages.Sona), nil
}

// State returns the committed state of a sona's chain, its CIDs parsed.
func (s *Sonas) State(id string) (model.Sona, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.sonas[id]
	if !ok {
		return model.Sona{}, fmt.Errorf("%w: sona %q", base.ErrNotFound, id)
	}
	return model.SonaOf(st.rec)
}

// Count is the number of sonas.
func (s *Sonas) Count() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(len(s.sonas))
}

// IDs returns the uuids of the sonas, in no order.
func (s *Sonas) IDs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]string, 0, len(s.sonas))
	for id := range s.sonas {
		ids = append(ids, id)
	}
	return ids
}

// Lengths returns every sona's committed length, by uuid.
func (s *Sonas) Lengths() map[string]int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]int64, len(s.sonas))
	for id, st := range s.sonas {
		out[id] = st.rec.Length
	}
	return out
}

// Snapshot returns the committed centroid (a new slice) and length of a
// sona.
func (s *Sonas) Snapshot(id string) (centroid []float32, length int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.sonas[id]
	if !ok {
		return nil, 0, false
	}
	return st.mean.Value(), st.rec.Length, true
}

// Activity is a sona's length, the tick its memories' decay counts in.
func (s *Sonas) Activity(id string) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.sonas[id]
	if !ok {
		return 0, false
	}
	return st.rec.Length, true
}

// Members returns the vector ids of the sona's memories, with the
// backbone's when withBackbone. The result is shared: do not modify it.
func (s *Sonas) Members(sona, backbone string, withBackbone bool) []uint64 {
	runs := s.Runs(sona, backbone, withBackbone)
	switch len(runs) {
	case 0:
		return nil
	case 1:
		return runs[0].IDs
	}
	return append(slices.Clip(runs[0].IDs), runs[1].IDs...)
}

// Runs are Members as the vector index searches them: the sona's, and
// the backbone's when withBackbone, each under its uuid (vector.Run). The
// ids are shared: do not modify them.
func (s *Sonas) Runs(sona, backbone string, withBackbone bool) []vector.Run {
	s.mu.RLock()
	defer s.mu.RUnlock()
	runs := make([]vector.Run, 0, 2)
	if st := s.sonas[sona]; st != nil && len(st.members) > 0 {
		runs = append(runs, vector.Run{Name: sona, IDs: st.members})
	}
	if bb := s.sonas[backbone]; withBackbone && bb != nil && backbone != sona && len(bb.members) > 0 {
		runs = append(runs, vector.Run{Name: backbone, IDs: bb.members})
	}
	return runs
}

// AllRuns are every sona's members as a run of its own (Runs without the
// backbone), for the vector index's snapshot. The ids are shared: do not
// modify them.
func (s *Sonas) AllRuns() []vector.Run {
	s.mu.RLock()
	defer s.mu.RUnlock()
	runs := make([]vector.Run, 0, len(s.sonas))
	for id, st := range s.sonas {
		if len(st.members) > 0 {
			runs = append(runs, vector.Run{Name: id, IDs: st.members})
		}
	}
	return runs
}

// Named returns the uuids of the sonas called name.
func (s *Sonas) Named(name string) ([]string, error) {
	var ids []string
	err := s.st.View(func(r store.Reader) error {
		p := namePrefix(name)
		return store.Keys(r, p, func(k []byte) { ids = append(ids, string(k[len(p):])) })
	})
	return ids, err
}

// Resolve finds a sona by uuid (in any spelling) or, when unambiguous,
// by name.
func (s *Sonas) Resolve(ref string) (*messages.Sona, error) {
	if id, ok := CanonicalUUID(ref); ok {
		if rec, err := s.Get(id); err == nil {
			return rec, nil
		}
	}
	ids, err := s.Named(ref)
	if err != nil {
		return nil, err
	}
	switch len(ids) {
	case 0:
		return nil, fmt.Errorf("%w: no sona with uuid or name %q", base.ErrNotFound, ref)
	case 1:
		return s.Get(ids[0])
	}
	return nil, fmt.Errorf("%w: %d sonas are named %q (%s): use a uuid", base.ErrAmbiguous, len(ids), ref, strings.Join(ids, ", "))
}

// List lists sonas in uuid order after cursor (a uuid).
func (s *Sonas) List(cursor string, limit int) (base.Page[*messages.Sona], error) {
	return s.page(s.IDs(), cursor, limit)
}

// ListNamed lists the sonas called name, like List.
func (s *Sonas) ListNamed(name, cursor string, limit int) (base.Page[*messages.Sona], error) {
	ids, err := s.Named(name)
	if err != nil {
		return base.Page[*messages.Sona]{}, err
	}
	return s.page(ids, cursor, limit)
}

func (s *Sonas) page(ids []string, cursor string, limit int) (base.Page[*messages.Sona], error) {
	ids = slices.DeleteFunc(ids, func(id string) bool { return id <= cursor })
	slices.Sort(ids)
	var page base.Page[*messages.Sona]
	if len(ids) > limit {
		ids = ids[:limit]
		page.Next = ids[limit-1]
	}
	for _, id := range ids {
		rec, err := s.Get(id)
		if err != nil {
			return page, err
		}
		page.Items = append(page.Items, rec)
	}
	return page, nil
}

// Entry is one ACT of a chain.
type Entry struct {
	Seq    int64
	Act    cid.Cid
	Memory cid.Cid
	// LogSeq is the insertion-log position of the store when the ACT was
	// appended: the memories that existed then have Seq ≤ LogSeq.
	LogSeq uint64
}

// Chain lists a sona's ACTs by seq, starting at from.
func (s *Sonas) Chain(id string, from int64, limit int) (base.Page[Entry], error) {
	var page base.Page[Entry]
	if _, err := s.Get(id); err != nil {
		return page, err
	}
	prefix := EntriesPrefix(id)
	var start []byte
	if from > 0 {
		start = EntryKey(id, from-1)
	}
	err := s.st.View(func(r store.Reader) error {
		return store.ListKeys(r, prefix, start, limit, func(k []byte) error {
			item, err := r.Item(k)
			if err != nil {
				return err
			}
			seq := int64(binary.BigEndian.Uint64(k[len(prefix):]))
			return item.Value(func(v []byte) error {
				act, mem, logSeq, err := DecodeEntry(v)
				page.Items = append(page.Items, Entry{Seq: seq, Act: act, Memory: mem, LogSeq: logSeq})
				return err
			})
		}, func() { page.Next = fmt.Sprint(page.Items[len(page.Items)-1].Seq + 1) })
	})
	return page, err
}
