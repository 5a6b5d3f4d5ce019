package actors

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// errImportRunning refuses a heartbeat tick while an import (or a
// forget) runs.
var errImportRunning = fmt.Errorf("%w: an import or a forget is running", ErrUnavailable)

// importWindow is how many appends of one run are in flight at once.
const importWindow = 256

// Import imports an export (transfer.ExportFormat). The whole document is
// checked first (memory/transfer's PlanImport), so a bad one writes nothing; then
// the file blocks and the sona records are written, the chains are
// replayed in the plan's order — every append by its chain's one writer
// (the sona's actor, the consensus actor for the backbone), each at the
// seq the export gives it, so a chain that moved meanwhile fails the
// import instead of forking from the export — and the metadata,
// associations, anchors and consensus records are restored. One import
// runs at a time, and no heartbeat tick runs during it.
func (s *System) Import(ctx context.Context, doc *messages.Export) (*messages.ImportResult, error) {
	if !s.importing.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("%w: another import is running", ErrUnavailable)
	}
	defer s.importing.Store(false)
	s.upkeep.Lock()
	defer s.upkeep.Unlock()

	plan, err := s.self.Transfer.PlanImport(ctx, doc)
	if err != nil {
		return nil, err
	}
	if err := s.self.Transfer.ImportBlocks(ctx, plan); err != nil {
		return nil, err
	}
	if err := s.self.Transfer.ImportSonas(ctx, plan); err != nil {
		return nil, err
	}
	for _, run := range plan.Runs() {
		for i := 0; i < len(run); i += importWindow {
			if err := s.appendSteps(ctx, run[i:min(i+importWindow, len(run))]); err != nil {
				return nil, err
			}
		}
	}
	if err := s.self.Transfer.FinishImport(ctx, plan); err != nil {
		return nil, err
	}
	s.log.Info("import done", "sonas", len(plan.Result().Sonas), "appended", len(plan.Steps()))
	return plan.Result(), nil
}

// appendSteps sends consecutive appends to one chain's writer, which
// pipelines them, and waits until all are durable.
func (s *System) appendSteps(ctx context.Context, steps []transfer.ImportStep) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pid := s.sonas
	if steps[0].Backbone {
		pid = s.consensus
	}
	timeout := 2 * s.cfg.Actors.AskTimeout.D()
	futures := make([]actor.Future, len(steps))
	for i, st := range steps {
		futures[i] = s.as.Root.RequestFuture(pid, appendMessage(st.Sona, st.Item), timeout)
	}
	var errs []error
	for i, f := range futures {
		st := steps[i]
		r, err := reply[*messages.Appended](f.Result())
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("import: sona %s, seq %d: %w", st.Sona, *st.Item.ExpectSeq, err))
		case r.Seq == nil || *r.Seq != *st.Item.ExpectSeq:
			errs = append(errs, fmt.Errorf("%w: import: memory %s is already in sona %s, not at seq %d", base.ErrChainConflict, st.Item.CID, st.Sona, *st.Item.ExpectSeq))
		}
	}
	if len(errs) > 0 {
		return errs[0] // the first failure; the later appends fail with it
	}
	return nil
}
