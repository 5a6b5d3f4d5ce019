package memory

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/messages"
)

// AdoptSona creates the sona rec names (its uuid, name and creation time)
// with an empty chain, unless this store has it: a cluster member that
// replicates or takes over a sona created on another member. It reports
// whether it created it.
func (s *Self) AdoptSona(ctx context.Context, rec *messages.Sona) (bool, error) {
	if u, ok := CanonicalUUID(rec.GetUuid()); !ok || u != rec.GetUuid() {
		return false, fmt.Errorf("%w: sona uuid %q", ErrInvalid, rec.GetUuid())
	}
	if _, err := s.Sona(rec.Uuid); err == nil {
		return false, nil
	} else if !errors.Is(err, ErrNotFound) {
		return false, err
	}
	if err := ValidateSonaName(rec.Name); err != nil {
		return false, err
	}
	vecs, err := s.Embed(ctx, rec.Name)
	if err != nil {
		return false, err
	}
	fresh := &messages.Sona{Uuid: rec.Uuid, Name: rec.Name, CreatedAt: rec.CreatedAt}
	raw, err := proto.Marshal(fresh)
	if err != nil {
		return false, err
	}
	created := false
	err = s.store.Update(ctx, func(tx Tx) error {
		if ok, err := tx.Has(sonaKey(fresh.Uuid)); err != nil || ok {
			return err // adopted meanwhile
		}
		tx.Set(sonaKey(fresh.Uuid), raw)
		tx.Set(nameKey(fresh.Name, fresh.Uuid), nil)
		tx.Set(nameVectorKey(fresh.Uuid), encodeVector(vecs[0]))
		tx.OnCommit(func() {
			created = true
			s.smu.Lock()
			s.sonas[fresh.Uuid] = newSonaState(fresh, vecs[0])
			s.smu.Unlock()
		})
		return nil
	})
	return created && err == nil, err
}
