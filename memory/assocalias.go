package memory

import (
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
)

// The emergent thresholds and the links live in memory/assoc
// (Self.Assoc); these aliases keep package memory's callers compiling
// during the move (issue 14).
type (
	SimStats  = assoc.SimStats
	Threshold = assoc.Threshold
	Link      = assoc.Link
)

// Association types (see memory/assoc).
const (
	AssocCausal     = assoc.Causal
	AssocSimilar    = assoc.Similar
	AssocSequential = assoc.Sequential
	AssocRelated    = assoc.Related
	AssocCoAccess   = assoc.CoAccess
)

// Functions of the thresholds (see memory/assoc) and the agent id check
// (memory/base).
var (
	EmergentThreshold = assoc.EmergentThreshold
	StatsOf           = assoc.StatsOf
	ValidateAgentID   = base.ValidateAgentID
)
