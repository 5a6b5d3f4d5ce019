package tiers

import (
	"slices"

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
}

// Keyword is a weighted term.
type Keyword struct {
	Term   string
	Weight float64
}

// SegmentOf reads a stored segment record.
func SegmentOf(rec *messages.Segment) *Segment {
	s := &Segment{ID: rec.GetId(), Summary: rec.GetSummary(), Keywords: rec.GetKeywords(), Embedding: rec.GetEmbedding(),
		NVisit: rec.GetNVisit(), LInteraction: rec.GetLInteraction(), LastAccess: rec.GetLastAccess(), CreatedAt: rec.GetCreatedAt(),
		PageCount: rec.GetPageCount(), PromotedThrough: rec.GetPromotedThrough(), Promotions: rec.GetPromotions()}
	for _, k := range rec.GetWeights() {
		s.Weights = append(s.Weights, Keyword{Term: k.GetTerm(), Weight: k.GetWeight()})
	}
	return s
}

// Record is the stored record of s. The API-only fields (pages, heat)
// stay unset.
func (s *Segment) Record() *messages.Segment {
	rec := &messages.Segment{Id: s.ID, Summary: s.Summary, Keywords: s.Keywords, Embedding: s.Embedding,
		NVisit: s.NVisit, LInteraction: s.LInteraction, LastAccess: s.LastAccess, CreatedAt: s.CreatedAt,
		PageCount: s.PageCount, PromotedThrough: s.PromotedThrough, Promotions: s.Promotions}
	for _, k := range s.Weights {
		rec.Weights = append(rec.Weights, &messages.Keyword{Term: k.Term, Weight: k.Weight})
	}
	return rec
}

// clone is a deep copy of s: a step changes its copy, never what it read.
func (s *Segment) clone() *Segment {
	c := *s
	c.Keywords, c.Weights, c.Embedding = slices.Clone(s.Keywords), slices.Clone(s.Weights), slices.Clone(s.Embedding)
	return &c
}
