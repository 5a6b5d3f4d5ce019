package consensus

import (
	"slices"

	"github.com/memoria-ai/memoria/messages"
)

// Conflict is a concept on which agents diverged, as the program uses it.
// Its stored record (r/) is messages.Conflict: ConflictOf reads one at
// the storage edge, Record writes one back; the API shows it through its
// own view (messages.ConflictView, versions without their embeddings).
type Conflict struct {
	ID         string
	ConceptKey string
	// Versions are the agents' latest versions, one per agent, in the
	// order agents first contributed.
	Versions []Version
	// Signal is the versions' mean pairwise cosine when the conflict was
	// last contributed to; Threshold the consensus bound it fell short of.
	Signal    float64
	Threshold float64
	// CreatedAt is when the conflict began, in Unix seconds.
	CreatedAt int64
}

// Version is one agent's version of a concept.
type Version struct {
	AgentID string
	Content string
	// At is when the agent contributed it, in Unix seconds.
	At        int64
	Embedding []float32
}

// ConflictOf reads a stored conflict record.
func ConflictOf(rec *messages.Conflict) Conflict {
	return Conflict{ID: rec.GetConflictId(), ConceptKey: rec.GetConceptKey(), Versions: versionsOf(rec.GetVersions()),
		Signal: rec.GetSignal(), Threshold: rec.GetThreshold(), CreatedAt: rec.GetCreatedAt()}
}

// versionsOf reads stored versions (of a conflict or a pending concept).
func versionsOf(recs []*messages.Version) []Version {
	var out []Version
	for _, v := range recs {
		out = append(out, Version{AgentID: v.GetAgentId(), Content: v.GetContent(), At: v.GetAt(),
			Embedding: slices.Clone(v.GetEmbedding())})
	}
	return out
}

// Record is the stored record of c.
func (c Conflict) Record() *messages.Conflict {
	rec := &messages.Conflict{ConflictId: c.ID, ConceptKey: c.ConceptKey, Signal: c.Signal, Threshold: c.Threshold,
		CreatedAt: c.CreatedAt}
	for _, v := range c.Versions {
		rec.Versions = append(rec.Versions, &messages.Version{AgentId: v.AgentID, Content: v.Content, At: v.At,
			Embedding: slices.Clone(v.Embedding)})
	}
	return rec
}
