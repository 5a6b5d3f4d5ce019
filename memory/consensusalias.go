package memory

import "github.com/memoria-ai/memoria/memory/consensus"

// The consensus ledger lives in memory/consensus (Self.Consensus); these
// aliases keep package memory's callers compiling during the move
// (issue 14).
const (
	StatusCommitted = consensus.StatusCommitted
	StatusPending   = consensus.StatusPending
	StatusConflict  = consensus.StatusConflict
	LabelConcept    = consensus.LabelConcept
	LabelAgents     = consensus.LabelAgents
	LabelConflict   = consensus.LabelConflict
)
