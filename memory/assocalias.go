package memory

import "github.com/memoria-ai/memoria/memory/assoc"

// The emergent thresholds live in memory/assoc; these aliases keep
// package memory's callers compiling during the move (issue 14).
type (
	SimStats  = assoc.SimStats
	Threshold = assoc.Threshold
)

// Functions of the thresholds (see memory/assoc).
var (
	EmergentThreshold = assoc.EmergentThreshold
	StatsOf           = assoc.StatsOf
)
