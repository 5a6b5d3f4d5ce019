package memory

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/memory/base"
)

// Files are raw blocks (codec raw), addressed like every block by their
// multihash. A raw block is not a memory and belongs to no chain; which
// sonas may name it as a file memory's content is recorded beside it (f/):
// the sonas it was uploaded for, and those that hold a file memory of it.
// Sona-scoped principals may only name files of their sonas, so that
// naming a CID never tells them whether another sona stored it.

var prefixFileSona = []byte("f/")

// fileSonaKey records that sona may name the raw block c.
func fileSonaKey(c cid.Cid, sona string) []byte {
	return base.Join(prefixFileSona, c.Hash(), []byte{0}, []byte(sona))
}

// PutFile stores data as one raw block and returns its CID. With a sona,
// the block is recorded as that sona's file (see FileInSonas); the sona
// must exist.
func (s *Self) PutFile(ctx context.Context, data []byte, sona string) (cid.Cid, error) {
	c, err := SumCID(CodecRaw, data)
	if err != nil {
		return cid.Undef, err
	}
	err = s.store.Update(ctx, func(tx Tx) error {
		if sona != "" {
			if ok, err := tx.Has(sonaKey(sona)); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: sona %s", ErrNotFound, sona)
			}
			tx.Set(fileSonaKey(c, sona), nil)
		}
		return tx.PutBlock(c, data)
	})
	return c, err
}

// FileInSonas reports whether the raw block c is a file of a sona that
// allowed accepts: uploaded for it, or the content of one of its file
// memories.
func (s *Self) FileInSonas(c cid.Cid, allowed func(sona string) bool) (bool, error) {
	prefix := base.Join(prefixFileSona, c.Hash(), []byte{0})
	found := false
	err := s.store.View(func(txn Reader) error {
		it := txn.NewIterator(IterOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if sona := bytes.TrimPrefix(it.Item().Key(), prefix); allowed(string(sona)) {
				found = true
				return nil
			}
		}
		return nil
	})
	return found, err
}
