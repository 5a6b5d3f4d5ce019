package memory

import (
	"errors"
	"os"
	"path/filepath"
)

// BodySnapshotPath is the body snapshot's file in data directory dir
// (recall.Recaller.WriteBodies).
func BodySnapshotPath(dir string) string { return filepath.Join(dir, "bodies.snap") }

// loadBodies reads what recall knew of the memories' bodies at the last
// close (recall.Recaller.LoadBodies), in the background: until then a
// recall reads the bodies it does not know, as it did before.
func (s *Self) loadBodies() {
	defer s.bgWG.Done()
	start := s.clock.Now()
	took, dropped, err := s.Recaller.LoadBodies(s.bodiesPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.log.Info("bodies: no snapshot; recall reads the bodies it does not know")
	case err != nil:
		s.log.Warn("bodies: the snapshot not used; recall reads the bodies it does not know", "err", err)
	default:
		s.log.Info("bodies: known from the snapshot", "bodies", took, "dropped", dropped, "took", s.clock.Now().Sub(start))
	}
}

// writeBodies writes what recall knows of the memories' bodies
// (recall.Recaller.WriteBodies), and logs how it went.
func (s *Self) writeBodies() {
	start := s.clock.Now()
	n, err := s.Recaller.WriteBodies(s.bodiesPath)
	if err != nil {
		s.log.Warn("bodies: snapshot not written", "err", err)
		return
	}
	s.log.Info("bodies: snapshot written", "bodies", n, "took", s.clock.Now().Sub(start))
}
