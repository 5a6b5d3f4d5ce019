package tiers

import (
	"context"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// CachedSegments is what the segment cache holds of sona (nil: nothing).
func (s *Store) CachedSegments(sona string) []*Segment { return s.segs.get(sona) }

// StoredSegments are sona's segments as stored, read past the cache.
func (s *Store) StoredSegments(sona string) ([]*Segment, error) {
	var segs []*Segment
	err := s.view.View(func(txn store.Reader) error {
		var err error
		segs, err = segments(txn, sona)
		return err
	})
	return segs, err
}

// InboxStart is where reads of sona's tier inbox begin.
func (s *Store) InboxStart(sona, tier string) uint64 { return s.starts.get(sona, tier) }

// StoredSTM is sona's STM state as stored.
func (s *Store) StoredSTM(sona string) (*messages.StmState, error) {
	st := &messages.StmState{}
	err := s.view.View(func(txn store.Reader) error {
		_, err := store.GetProto(txn, stmKey(sona), st)
		return err
	})
	return st, err
}

// SetSTM stores st as sona's STM state.
func (s *Store) SetSTM(sona string, st *messages.StmState) error {
	return s.store.Update(context.Background(), func(tx store.Tx) error { return store.SetProto(tx, stmKey(sona), st) })
}

// PageVector is the embedding of page p (its memories' vectors).
func (s *Store) PageVector(p *messages.Page) ([]float32, error) { return s.pageVector(p) }
