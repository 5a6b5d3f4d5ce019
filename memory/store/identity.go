package store

import (
	"errors"
	"fmt"

	"github.com/memoria-ai/memoria/memory/base"
)

// KeyEmbedder holds the identity of the embedding space the store's
// vectors are in (llm.Embedder.ID).
var KeyEmbedder = []byte("x/embedder")

// CheckEmbedder, in an Op, makes sure the store's vectors are in the
// embedding space want: a new store takes it, a store of another space is
// ErrEmbedderMismatch.
func CheckEmbedder(tx Tx, want string) error {
	got, err := tx.Get(KeyEmbedder)
	switch {
	case errors.Is(err, base.ErrNotFound):
		tx.Set(KeyEmbedder, []byte(want))
	case err != nil:
		return err
	case string(got) != want:
		return fmt.Errorf("%w: the store's vectors are %q, the configured embedder is %q; run `memoria reindex` to re-embed the store with the configured embedder (or configure %q again)", base.ErrEmbedderMismatch, got, want, got)
	}
	return nil
}

// EmbedderID returns the embedding space the store was built with ("" for
// a new store).
func (s *Store) EmbedderID() (string, error) {
	var id string
	err := s.View(func(r Reader) error {
		v, err := r.Get(KeyEmbedder)
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		id = string(v)
		return err
	})
	return id, err
}
