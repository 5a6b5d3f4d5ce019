package memory

import (
	"fmt"

	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/index"
)

// The chains and the sona registry live in memory/chain (Self.Sonas,
// Self.Chains, Self.Backbone); these names keep package memory's callers
// and the files still to move out (recall, migrate) compiling unchanged
// during the move (issue 14).
type (
	ChainEntry = chain.Entry
	Duplicate  = chain.Duplicate
)

// The sona names' limits and the backbone's sona (see memory/chain).
const (
	MaxSonaName  = chain.MaxSonaName
	BackboneName = chain.BackboneName
)

// Functions of the chains (see memory/chain).
var (
	ValidateSonaName  = chain.ValidateSonaName
	ValidateSpeaker   = chain.ValidateSpeaker
	ValidateRequestID = chain.ValidateRequestID
	CanonicalUUID     = chain.CanonicalUUID
	FileNotStored     = chain.FileNotStored
	EdgeNotStored     = chain.EdgeNotStored
)

var (
	prefixSona        = chain.SonaPrefix
	prefixChain       = chain.ChainPrefix
	prefixLog         = chain.LogPrefix
	nameVectorKey     = chain.NameVecKey
	chainKey          = chain.EntryKey
	logKey            = chain.LogKey
	fileSonaKey       = chain.FileSonaKey
	encodeChainEntry  = chain.EncodeEntry
	decodeChainEntry  = chain.DecodeEntry
	scanChainMemories = chain.ScanMemories
	logEntry          = chain.LogEntry
	logEnd            = chain.LogEnd
)

// errTextUnavailable: the full-text index is being rebuilt (see
// memory/index).
var errTextUnavailable = index.ErrUnavailable

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
