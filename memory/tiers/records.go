package tiers

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Segment is a mid-term topic segment as the program uses it: pages on
// one topic. Its stored record (t/ uuid "g" id) is messages.Segment:
// SegmentOf reads one at the storage edge, Record writes one back; the
// API shows it through segmentView.
type Segment struct {
	ID      uint64
	Summary string
	// Keywords are its strongest weighted terms (or the Model's digest's).
	Keywords []string
	// Weights are its weighted terms, heaviest first: the sums of their
	// TF-IDF weights over its pages.
	Weights []Keyword
	// Embedding is the mean embedding of its pages.
	Embedding []float32
	// NVisit counts the times retrieval selected it; LInteraction the
	// pages joined since it was last promoted to the persona.
	NVisit       uint64
	LInteraction uint64
	// LastAccess is the Unix second of its last retrieval (or of its
	// creation); CreatedAt of its creation.
	LastAccess int64
	CreatedAt  int64
	// PageCount is how many pages it holds; PromotedThrough the seq of the
	// newest page already handed to the persona; Promotions the times it
	// was promoted.
	PageCount       uint64
	PromotedThrough uint64
	Promotions      uint64
	// scoring is what fscore reads of a segment the cache holds, made as
	// the cache takes it; nil elsewhere, and in a clone.
	scoring *segmentScoring
}

// Keyword is a weighted term.
type Keyword struct {
	Term   string
	Weight float64
}

// SegmentOf reads a stored segment record: its embedding packed
// (embedding8) or, as an older build wrote it, as floats.
func SegmentOf(rec *messages.Segment) (*Segment, error) {
	s := &Segment{ID: rec.GetId(), Summary: rec.GetSummary(), Keywords: rec.GetKeywords(), Embedding: rec.GetEmbedding(),
		NVisit: rec.GetNVisit(), LInteraction: rec.GetLInteraction(), LastAccess: rec.GetLastAccess(), CreatedAt: rec.GetCreatedAt(),
		PageCount: rec.GetPageCount(), PromotedThrough: rec.GetPromotedThrough(), Promotions: rec.GetPromotions()}
	if len(s.Embedding) == 0 && len(rec.GetEmbedding8()) > 0 {
		var err error
		if s.Embedding, err = UnpackEmbedding(rec.GetEmbedding8()); err != nil {
			return nil, fmt.Errorf("segment %d: %w", s.ID, err)
		}
	}
	for _, k := range rec.GetWeights() {
		s.Weights = append(s.Weights, Keyword{Term: k.GetTerm(), Weight: k.GetWeight()})
	}
	return s, nil
}

// Record is the stored record of s, its embedding packed. The API-only
// fields (pages, heat) stay unset.
func (s *Segment) Record() *messages.Segment {
	rec := &messages.Segment{Id: s.ID, Summary: s.Summary, Keywords: s.Keywords, Embedding8: PackEmbedding(s.Embedding),
		NVisit: s.NVisit, LInteraction: s.LInteraction, LastAccess: s.LastAccess, CreatedAt: s.CreatedAt,
		PageCount: s.PageCount, PromotedThrough: s.PromotedThrough, Promotions: s.Promotions}
	for _, k := range s.Weights {
		rec.Weights = append(rec.Weights, &messages.Keyword{Term: k.Term, Weight: k.Weight})
	}
	return rec
}

// PackEmbedding is v as a segment's or a mid-term page's record keeps it
// (embedding8): a little-endian float32 scale, the largest component's
// magnitude over 127, then each component over the scale rounded to a
// signed byte — 388 bytes at 384 dimensions where the floats took 1,539
// (most of what a step wrote into a segment and a page, issue 15). A
// component is off by at most half the scale, a unit vector's cosine
// with another by about a thousandth: well inside what a segment's
// placement (its theta) and a page's ranking tell apart. A non-finite
// component packs as 0; nil packs as nil.
func PackEmbedding(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	var top float32
	for _, x := range v {
		if a := float32(math.Abs(float64(x))); a > top && !math.IsInf(float64(a), 0) {
			top = a
		}
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(v)), math.Float32bits(top/127))
	for _, x := range v {
		q := 0.0
		if top > 0 && !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) {
			q = math.Round(float64(x) / float64(top) * 127)
		}
		out = append(out, byte(int8(q)))
	}
	return out
}

// UnpackEmbedding reads what PackEmbedding wrote.
func UnpackEmbedding(b []byte) ([]float32, error) {
	scale, err := packedScale(b)
	if err != nil {
		return nil, err
	}
	v := make([]float32, len(b)-4)
	for i, q := range b[4:] {
		v[i] = float32(int8(q)) * scale
	}
	return v, nil
}

// packedScale is the scale of a packed embedding (PackEmbedding), checked.
func packedScale(b []byte) (float32, error) {
	if len(b) < 5 {
		return 0, fmt.Errorf("%w: a packed embedding of %d bytes", base.ErrCorrupt, len(b))
	}
	scale := math.Float32frombits(binary.LittleEndian.Uint32(b))
	if !(scale >= 0) || math.IsInf(float64(scale), 0) {
		return 0, fmt.Errorf("%w: a packed embedding's scale %v", base.ErrCorrupt, scale)
	}
	return scale, nil
}

// packedCosine is base.Cosine(UnpackEmbedding(b), vec), to the bit,
// without unpacking b.
func packedCosine(b []byte, vec []float32) (float64, error) {
	scale, err := packedScale(b)
	if err != nil || len(b)-4 != len(vec) {
		return 0, err
	}
	var dot, na, nb float64
	for i, q := range b[4:] {
		x, y := float64(float32(int8(q))*scale), float64(vec[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0, nil
	}
	return dot / math.Sqrt(na*nb), nil
}

// visits is s's visit record (t/ uuid "v" id): NVisit and LastAccess, 8
// bytes each, big-endian. A retrieval's visit writes it alone, not the
// segment's header with its embedding (2 KB at 384 dimensions while that
// was floats, rewritten some six times an advance in a long-lived sona: a
// fifth of the bytes it wrote, issue 15).
func (s *Segment) visits() []byte {
	return binary.BigEndian.AppendUint64(base.U64(s.NVisit), uint64(s.LastAccess))
}

// addVisits takes a visit record's counts into s (takeVisits).
func (s *Segment) addVisits(v []byte) error {
	if len(v) != 16 {
		return fmt.Errorf("visit record of %d bytes, want 16", len(v))
	}
	s.takeVisits(binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:])))
	return nil
}

// takeVisits takes another reading of s's visits into s: each count the
// larger of the two, as both only grow (Visit) — the header keeps those of
// its last write, the visit record those of the last visit.
func (s *Segment) takeVisits(n uint64, lastAccess int64) {
	s.NVisit, s.LastAccess = max(s.NVisit, n), max(s.LastAccess, lastAccess)
}

// clone is a deep copy of s: a step changes its copy, never what it read.
func (s *Segment) clone() *Segment {
	c := *s
	c.Keywords, c.Weights, c.Embedding = slices.Clone(s.Keywords), slices.Clone(s.Weights), slices.Clone(s.Embedding)
	c.scoring = nil // what fscore reads of it follows its changes
	return &c
}

// Persona is the long-term personal memory (LPM) of a sona as the program
// uses it. Its stored record (t/ uuid "l") is messages.Persona:
// PersonaOf reads one at the storage edge, Record writes one back; the
// API shows it through personaView.
type Persona struct {
	User  UserPersona
	Agent AgentPersona
	// Updates counts the promotions (and excisions) applied so far: the
	// LPM's version.
	Updates uint64
}

// UserPersona is what the dialogue taught about the user.
type UserPersona struct {
	// Profile holds static attributes (name, location, occupation, …).
	Profile map[string]string
	// Knowledge is the knowledge base, oldest first (a FIFO).
	Knowledge []*Fact
	// Traits are the dimensions the dialogue has shown, in configuration
	// order.
	Traits []*Trait
}

// AgentPersona is the agent's own persona: its fixed profile (from the
// configuration, never stored) and its dynamic traits, oldest first.
type AgentPersona struct {
	Profile map[string]string
	Traits  []*Fact
}

// Fact is an entry of the user's knowledge base or one of the agent's
// traits.
type Fact struct {
	Text      string
	Embedding []float32
	// T is the Unix second it was extracted (or last confirmed).
	T int64
	// Segment is the segment it was extracted from.
	Segment uint64
	// Source is the CID of the memory that stated it, as its page names
	// it (pages keep their CIDs as strings).
	Source string
}

// Trait is one of the user's trait dimensions.
type Trait struct {
	Dimension string
	Group     string
	// Level is 0..1: how strongly the dialogue shows the trait.
	Level float64
	// Evidence is the latest statement that showed it, at UpdatedAt.
	Evidence  string
	UpdatedAt int64
}

// PersonaOf reads a stored persona record.
func PersonaOf(rec *messages.Persona) *Persona {
	p := &Persona{Updates: rec.GetUpdates()}
	u, a := rec.GetUser(), rec.GetAgent()
	p.User.Profile = maps.Clone(u.GetProfile())
	p.User.Knowledge = factsOf(u.GetKnowledge())
	for _, t := range u.GetTraits() {
		p.User.Traits = append(p.User.Traits, &Trait{Dimension: t.GetDimension(), Group: t.GetGroup(), Level: t.GetLevel(),
			Evidence: t.GetEvidence(), UpdatedAt: t.GetUpdatedAt()})
	}
	p.Agent.Profile = maps.Clone(a.GetProfile())
	p.Agent.Traits = factsOf(a.GetTraits())
	return p
}

func factsOf(recs []*messages.Fact) []*Fact {
	var out []*Fact
	for _, f := range recs {
		out = append(out, &Fact{Text: f.GetText(), Embedding: f.GetEmbedding(), T: f.GetT(), Segment: f.GetSegment(), Source: f.GetSource()})
	}
	return out
}

// Record is the stored record of p. Its user and agent are always
// present, as every persona the LPM writes has them.
func (p *Persona) Record() *messages.Persona {
	rec := &messages.Persona{User: &messages.UserPersona{Profile: maps.Clone(p.User.Profile), Knowledge: factRecords(p.User.Knowledge)},
		Agent: &messages.AgentPersona{Profile: maps.Clone(p.Agent.Profile), Traits: factRecords(p.Agent.Traits)}, Updates: p.Updates}
	rec.User.Traits = traitRecords(p.User.Traits)
	return rec
}

// traitRecords are the records of ts (as stored and as shown: a trait has
// no stored-only field).
func traitRecords(ts []*Trait) []*messages.Trait {
	var out []*messages.Trait
	for _, t := range ts {
		out = append(out, &messages.Trait{Dimension: t.Dimension, Group: t.Group, Level: t.Level, Evidence: t.Evidence, UpdatedAt: t.UpdatedAt})
	}
	return out
}

func factRecords(fs []*Fact) []*messages.Fact {
	var out []*messages.Fact
	for _, f := range fs {
		out = append(out, &messages.Fact{Text: f.Text, Embedding: f.Embedding, T: f.T, Segment: f.Segment, Source: f.Source})
	}
	return out
}

// Clone is a deep copy of p: a step or a prompt changes its copy, never
// what it read.
func (p *Persona) Clone() *Persona {
	c := &Persona{Updates: p.Updates}
	c.User.Profile, c.Agent.Profile = maps.Clone(p.User.Profile), maps.Clone(p.Agent.Profile)
	c.User.Knowledge, c.Agent.Traits = cloneFacts(p.User.Knowledge), cloneFacts(p.Agent.Traits)
	for _, t := range p.User.Traits {
		x := *t
		c.User.Traits = append(c.User.Traits, &x)
	}
	return c
}

func cloneFacts(fs []*Fact) []*Fact {
	var out []*Fact
	for _, f := range fs {
		x := *f
		x.Embedding = slices.Clone(f.Embedding)
		out = append(out, &x)
	}
	return out
}

// readPersona reads the persona of sona; a sona without one has an empty
// persona.
func (s *Store) readPersona(r store.Reader, sona string) (*Persona, error) {
	rec := &messages.Persona{}
	if _, err := s.getProto(r, personaKey(sona), rec); err != nil {
		return nil, err
	}
	return PersonaOf(rec), nil
}
