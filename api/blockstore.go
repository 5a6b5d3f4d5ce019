package api

import (
	"context"
	"errors"
	"fmt"

	blockstore "github.com/ipfs/boxo/blockstore"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/memory"
)

// Blockstore is boxo's blockstore.Blockstore over Memoria's Badger store:
// the gateway reads the blocks where the store keeps them (keyed by
// multihash, so a block is found under any CID of its hash), through the
// store's one door, which re-hashes every block it reads and writes. No
// block is ever deleted: memories are immutable.
type Blockstore struct{ store *memory.Store }

var _ blockstore.Blockstore = (*Blockstore)(nil)

// ErrImmutable refuses DeleteBlock.
var ErrImmutable = errors.New("api: blocks are immutable and never deleted")

// NewBlockstore returns the blockstore of store.
func NewBlockstore(store *memory.Store) *Blockstore { return &Blockstore{store: store} }

// notFound turns the store's not-found into the one boxo recognises (404).
func notFound(c cid.Cid, err error) error {
	if errors.Is(err, memory.ErrNotFound) {
		return ipld.ErrNotFound{Cid: c}
	}
	return err
}

// Has reports whether the block is stored.
func (b *Blockstore) Has(_ context.Context, c cid.Cid) (bool, error) {
	return b.store.HasBlock(c)
}

// Get returns the block after the store verified it against c.
func (b *Blockstore) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	data, err := b.store.Block(c)
	if err != nil {
		return nil, notFound(c, err)
	}
	return blocks.NewBlockWithCid(data, c)
}

// GetSize returns the block's size.
func (b *Blockstore) GetSize(_ context.Context, c cid.Cid) (int, error) {
	n, err := b.store.BlockSize(c)
	return n, notFound(c, err)
}

// Put stores a block through the store's one door (verified, durable).
func (b *Blockstore) Put(ctx context.Context, blk blocks.Block) error {
	return b.PutMany(ctx, []blocks.Block{blk})
}

// PutMany stores blocks in one durable write.
func (b *Blockstore) PutMany(ctx context.Context, bs []blocks.Block) error {
	return b.store.Update(ctx, func(tx *memory.Tx) error {
		for _, blk := range bs {
			if err := tx.PutBlock(blk.Cid(), blk.RawData()); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteBlock refuses: blocks are never deleted.
func (b *Blockstore) DeleteBlock(_ context.Context, c cid.Cid) error {
	return fmt.Errorf("%w: %s", ErrImmutable, c)
}

// AllKeysChan lists every block as a raw CID of its multihash (the codec
// is not kept, as boxo's multihash-keyed blockstores do).
func (b *Blockstore) AllKeysChan(ctx context.Context) (<-chan cid.Cid, error) {
	out := make(chan cid.Cid, 64)
	go func() {
		defer close(out)
		_ = b.store.BlockHashes(ctx, func(mh multihash.Multihash) error {
			select {
			case out <- cid.NewCidV1(cid.Raw, mh):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return out, nil
}
