package memory

import "github.com/memoria-ai/memoria/memory/anchor"

// The anchor list lives in memory/anchor (Self.Anchors); these aliases
// keep package memory's callers compiling during the move (issue 14).
type (
	Anchor      = anchor.Anchor
	AnchorSink  = anchor.Sink
	AnchorRules = anchor.Rules
)

// CompileAnchorRules prepares the rules of a validated configuration
// (anchor.CompileRules).
var CompileAnchorRules = anchor.CompileRules
