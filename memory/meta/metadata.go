package meta

import (
	"maps"
	"slices"

	"github.com/memoria-ai/memoria/messages"
)

// Metadata is a memory's mutable metadata as the program hands it to its
// views. Its stored record (m/) is messages.MemoryMeta, which Of reads.
// What a principal sees of it is built from a Metadata field by field
// (View, and api's metaView for a sona-scoped principal) rather than the
// stored record rendered as it is: a field added to the record stays out
// of the answers until a view names it.
type Metadata struct {
	// Sonas the memory belongs to, in the order it joined them.
	Sonas []string
	// AgentID, Kind, Labels, CreatedAt, ExpiresAt and Insight are the
	// provenance of its first sona's write; Joins that of each later one.
	AgentID string
	Kind    string
	Labels  map[string]string
	// CreatedAt is in Unix seconds; ExpiresAt too, 0 for never.
	CreatedAt int64
	ExpiresAt int64
	// Insight is set on a dream insight.
	Insight *InsightMark
	Joins   []Join
	// Backbone and Archived are its standing.
	Backbone bool
	Archived bool
	// Importance, AccessCount and LastAccessTick are what the self
	// learnt from its use; Seq its insertion-log position.
	Importance     float64
	AccessCount    int64
	LastAccessTick int64
	Seq            uint64
	// Evaluation is the aggregate of its EUMAS evaluation; nil until
	// evaluated.
	Evaluation *Evaluation
}

// InsightMark is a dream insight's category and confidence (0..1).
type InsightMark struct {
	Category   string
	Confidence float64
}

// Join is the provenance of a memory's append to a sona after its first.
type Join struct {
	Sona    string
	AgentID string
	Kind    string
	Labels  map[string]string
	// JoinedAt is the Unix second of the append.
	JoinedAt int64
}

// Evaluation is the aggregate of a memory's EUMAS evaluation.
type Evaluation struct {
	Metrics map[string]float64
	// Priority is nil when no archetype gave one.
	Priority *Priority
	// Failed: every archetype failed, no metrics.
	Failed bool
}

// Priority is how much a memory matters (Score, 0..1, and its Factors)
// and how fast it should fade (DecayRate, 0..1).
type Priority struct {
	Score     float64
	Factors   []string
	DecayRate float64
}

// Of reads a stored metadata record.
func Of(rec *messages.MemoryMeta) Metadata {
	m := Metadata{Sonas: slices.Clone(rec.GetSonas()), AgentID: rec.GetAgentId(), Kind: rec.GetKind(), Labels: maps.Clone(rec.GetLabels()),
		CreatedAt: rec.GetCreatedAt(), ExpiresAt: rec.GetExpiresAt(), Backbone: rec.GetBackbone(), Archived: rec.GetArchived(),
		Importance: rec.GetImportance(), AccessCount: rec.GetAccessCount(), LastAccessTick: rec.GetLastAccessTick(), Seq: rec.GetSeq()}
	if in := rec.GetInsight(); in != nil {
		m.Insight = &InsightMark{Category: in.GetCategory(), Confidence: in.GetConfidence()}
	}
	for _, j := range rec.GetJoins() {
		m.Joins = append(m.Joins, Join{Sona: j.GetSona(), AgentID: j.GetAgentId(), Kind: j.GetKind(), Labels: maps.Clone(j.GetLabels()),
			JoinedAt: j.GetJoinedAt()})
	}
	if e := rec.GetEvaluation(); e != nil {
		m.Evaluation = &Evaluation{Metrics: maps.Clone(e.GetMetrics()), Failed: e.GetFailed()}
		if p := e.GetPriority(); p != nil {
			m.Evaluation.Priority = &Priority{Score: p.GetScore(), Factors: slices.Clone(p.GetFactors()), DecayRate: p.GetDecayRate()}
		}
	}
	return m
}

// View is the metadata as the API shows it to a principal that may see
// all of it (a memory, a recalled memory): every field, by name. The API
// payload is the record's message, so the view of a record read by Of is
// that record. It shares m's slices and maps (Of copied them from the
// record; a second copy was half of what rendering a recall's metadata
// allocated).
func (m Metadata) View() *messages.MemoryMeta {
	rec := &messages.MemoryMeta{Sonas: m.Sonas, AgentId: m.AgentID, Kind: m.Kind, Labels: m.Labels,
		CreatedAt: m.CreatedAt, ExpiresAt: m.ExpiresAt, Backbone: m.Backbone, Archived: m.Archived,
		Importance: m.Importance, AccessCount: m.AccessCount, LastAccessTick: m.LastAccessTick, Seq: m.Seq}
	if m.Insight != nil {
		rec.Insight = &messages.InsightMark{Category: m.Insight.Category, Confidence: m.Insight.Confidence}
	}
	for _, j := range m.Joins {
		rec.Joins = append(rec.Joins, &messages.SonaJoin{Sona: j.Sona, AgentId: j.AgentID, Kind: j.Kind, Labels: j.Labels,
			JoinedAt: j.JoinedAt})
	}
	if e := m.Evaluation; e != nil {
		rec.Evaluation = &messages.EvalSummary{Metrics: e.Metrics, Failed: e.Failed}
		if p := e.Priority; p != nil {
			rec.Evaluation.Priority = &messages.Priority{Score: p.Score, Factors: p.Factors, DecayRate: p.DecayRate}
		}
	}
	return rec
}
