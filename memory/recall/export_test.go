package recall

import "context"

// HoldWorker takes one of s's workers (recall.workers) until release, as a
// recall computing would.
func (s *Recaller) HoldWorker(ctx context.Context) (release func(), err error) {
	if err := s.workers.enter(ctx); err != nil {
		return nil, err
	}
	return s.workers.leave, nil
}
