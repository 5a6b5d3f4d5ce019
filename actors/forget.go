package actors

import (
	"context"

	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/messages"
)

// Forget excises memories (memory/forget) while no heartbeat tick runs —
// a tick that merged or dreamed over a memory being forgotten would write
// a summary the forget's plan did not see — and no import: it waits for a
// running one to end, and ticks meanwhile are skipped. Chain appends go on:
// a forgotten memory cannot be stored again, and the tiers' steps retry
// on the state the forget leaves.
func (s *System) Forget(ctx context.Context, req forget.Request) (forget.Report, error) {
	if err := ctx.Err(); err != nil {
		return forget.Report{}, err
	}
	s.upkeep.Lock()
	defer s.upkeep.Unlock()
	return s.self.Forget.Forget(ctx, req)
}

// ForgetApply forgets what tombs name, as another cluster member forgot it
// (forget.Forgetter.Apply), under the same exclusion as Forget.
func (s *System) ForgetApply(ctx context.Context, tombs []*messages.Tombstone) (forget.Report, error) {
	if err := ctx.Err(); err != nil {
		return forget.Report{}, err
	}
	s.upkeep.Lock()
	defer s.upkeep.Unlock()
	return s.self.Forget.Apply(ctx, tombs)
}
