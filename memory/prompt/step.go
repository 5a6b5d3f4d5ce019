package prompt

import (
	"fmt"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/recall"
)

// ValidateStep checks what a step of a sona (an advance) is given besides
// its content, so that nothing is stored for a step that cannot run: the
// speaker name, the agent id and the recall scope.
func ValidateStep(name, agentID, scope string) error {
	if err := chain.ValidateSpeaker(name); err != nil {
		return err
	}
	if err := base.ValidateAgentID(agentID); err != nil {
		return err
	}
	switch scope {
	case "", recall.ScopeSelf, recall.ScopeSona:
		return nil
	}
	return fmt.Errorf("%w: scope must be %q or %q", base.ErrInvalid, recall.ScopeSelf, recall.ScopeSona)
}
