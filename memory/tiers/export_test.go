package tiers

import (
	"context"
	"encoding/binary"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// CachedSegments is what the segment cache holds of sona (nil: nothing).
func (s *Store) CachedSegments(sona string) []*Segment { return s.segs.get(sona) }

// StoredSegments are sona's segments as stored, read past the cache,
// each with the scoring the cache makes of a segment it takes: equal to a
// cached one only if that one's scoring follows its fields.
func (s *Store) StoredSegments(sona string) ([]*Segment, error) {
	var segs []*Segment
	err := s.view.View(func(txn store.Reader) error {
		var err error
		segs, err = segments(txn, sona)
		return err
	})
	for _, seg := range segs {
		seg.scoring = scoringOf(seg)
	}
	return segs, err
}

// InboxStart is where reads of sona's tier inbox begin.
func (s *Store) InboxStart(sona, tier string) uint64 { return s.starts.get(sona, tier) }

// StoredSTM is sona's STM state as stored, its pages read (stmState).
func (s *Store) StoredSTM(sona string) (*messages.StmState, error) {
	var st *messages.StmState
	err := s.view.View(func(txn store.Reader) error {
		var err error
		st, err = s.stmState(txn, sona)
		return err
	})
	return st, err
}

// SetSTM stores st as sona's STM state as a build before stop 83 did:
// its pages inline, their records deleted.
func (s *Store) SetSTM(sona string, st *messages.StmState) error {
	return s.store.Update(context.Background(), func(tx store.Tx) error {
		old, err := s.stmState(tx, sona)
		if err != nil {
			return err
		}
		for _, seq := range old.PageSeqs {
			tx.Delete(stmPageKey(sona, seq))
		}
		inline := proto.Clone(st).(*messages.StmState)
		inline.PageSeqs = nil
		return store.SetProto(tx, stmKey(sona), inline)
	})
}

// STMRecords are the keys of sona's STM state and page records as stored.
func (s *Store) STMRecords(sona string) (state *messages.StmState, pages []uint64, err error) {
	state = &messages.StmState{}
	err = s.view.View(func(txn store.Reader) error {
		if _, err := store.GetProto(txn, stmKey(sona), state); err != nil {
			return err
		}
		return store.Keys(txn, base.Join(tierPrefix(sona), []byte("S")), func(k []byte) {
			pages = append(pages, base.DecodeU64(k[len(k)-8:]))
		})
	})
	return state, pages, err
}

// PageVector is the embedding of page p (its memories' vectors).
func (s *Store) PageVector(p *messages.Page) ([]float32, error) { return s.pageVector(p) }

// DocFreqs are sona's document frequencies as stored (read past the
// cache) and as the cache holds them, by dfKey; counted, for each content
// word of sona's stored MTM pages, the pages that hold it, by dfKey.
func (s *Store) DocFreqs(sona string) (stored, cached, counted map[string]uint64, err error) {
	stored, cached, counted = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	err = s.view.View(func(txn store.Reader) error {
		prefix := dfKey(sona, "")
		err := store.Scan(txn, prefix, func(k, v []byte) error {
			stored[string(k)] = base.DecodeU64(v)
			if n, ok := s.dfs.Latest(string(k)); ok {
				cached[string(k)] = n
			}
			return nil
		})
		if err != nil {
			return err
		}
		segs, err := segments(txn, sona)
		if err != nil {
			return err
		}
		for _, seg := range segs {
			pages, err := segmentPages(txn, sona, seg.ID)
			if err != nil {
				return err
			}
			for _, p := range pages {
				pt, err := s.pageText(txn, p)
				if err != nil {
					return err
				}
				for _, t := range ContentWords(pt.Text()) {
					counted[string(dfKey(sona, t))]++
				}
			}
		}
		return nil
	})
	return stored, cached, counted, err
}

// SegmentRecords are sona's stored segment headers and visit records, by
// segment id.
func (s *Store) SegmentRecords(sona string) (headers, visits map[uint64][]byte, err error) {
	headers, visits = map[uint64][]byte{}, map[uint64][]byte{}
	err = s.view.View(func(txn store.Reader) error {
		for prefix, into := range map[string]map[uint64][]byte{string(segmentPrefix(sona)): headers, string(visitPrefix(sona)): visits} {
			err := store.Scan(txn, []byte(prefix), func(k, v []byte) error {
				into[base.DecodeU64(k[len(k)-8:])] = slices.Clone(v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return headers, visits, err
}

// TierRecords are the records of sona that the record cache keeps
// (reccache.go): as stored, read past the cache, and as the cache holds
// them (nil: cached as absent), by key; and the cache's reads so far.
func (s *Store) TierRecords(sona string) (stored, cached map[string][]byte, reads store.CacheStats, err error) {
	stored, cached = map[string][]byte{}, map[string][]byte{}
	err = s.view.View(func(txn store.Reader) error {
		return store.Scan(txn, tierPrefix(sona), func(k, v []byte) error {
			if cachedTierRecord(string(k)) {
				stored[string(k)] = slices.Clone(v)
			}
			return nil
		})
	})
	keys := [][]byte{stmKey(sona), mtmKey(sona), personaKey(sona), counterKey(sona, counterPage)}
	for _, tier := range []string{STM, MTM, LPM} {
		keys = append(keys, counterKey(sona, tier))
	}
	for k := range stored {
		keys = append(keys, []byte(k))
	}
	reads = s.recs.Stats() // before Latest counts its own
	for _, k := range keys {
		if v, ok := s.recs.Latest(string(k)); ok {
			cached[string(k)] = v
		}
	}
	return stored, cached, reads, err
}

// TierInboxes are the sequence numbers of the entries in sona's inboxes,
// by tier: as stored (read past the cache) and as the inbox cache holds
// them (a tier whose inbox it does not hold is missing).
func (s *Store) TierInboxes(sona string) (stored, cached map[string][]uint64, err error) {
	stored, cached = map[string][]uint64{}, map[string][]uint64{}
	err = s.view.View(func(txn store.Reader) error {
		for _, tier := range Names {
			stored[tier] = []uint64{}
			prefix := inboxPrefix(sona, tier)
			err := store.Scan(txn, prefix, func(k, _ []byte) error {
				stored[tier] = append(stored[tier], base.DecodeU64(k[len(prefix):]))
				return nil
			})
			if err != nil {
				return err
			}
			if in, ok := s.inboxes.Latest(string(prefix)); ok {
				cached[tier] = slices.Clone(in.seqs)
			}
		}
		return nil
	})
	return stored, cached, err
}

// MidTermPage is a mid-term page as stored and as segmentPages reads it.
type MidTermPage struct {
	Segment      uint64
	Stored, Read *messages.Page
}

// MidTerm are sona's mid-term segment records as stored (read past the
// cache) and its pages.
func (s *Store) MidTerm(sona string) (segs []*messages.Segment, pages []MidTermPage, err error) {
	err = s.view.View(func(txn store.Reader) error {
		if err := store.Scan(txn, segmentPrefix(sona), func(_, v []byte) error {
			seg := &messages.Segment{}
			segs = append(segs, seg)
			return proto.Unmarshal(v, seg)
		}); err != nil {
			return err
		}
		for _, seg := range segs {
			read, err := segmentPages(txn, sona, seg.Id)
			if err != nil {
				return err
			}
			i := 0
			if err := store.Scan(txn, PagePrefix(sona, seg.Id), func(_, v []byte) error {
				p := &messages.Page{}
				pages = append(pages, MidTermPage{seg.Id, p, read[i]})
				i++
				return proto.Unmarshal(v, p)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return segs, pages, err
}

// SetMidTermFloats stores sona's mid-term segments and pages as a build
// before stop 84 did: their embeddings as floats (those read now).
func (s *Store) SetMidTermFloats(sona string) error {
	return s.store.Update(context.Background(), func(tx store.Tx) error {
		segs, err := segments(tx, sona)
		if err != nil {
			return err
		}
		for _, seg := range segs {
			rec := seg.Record()
			rec.Embedding, rec.Embedding8 = seg.Embedding, nil
			if err := store.SetProto(tx, segmentKey(sona, seg.ID), rec); err != nil {
				return err
			}
			pages, err := segmentPages(tx, sona, seg.ID)
			if err != nil {
				return err
			}
			for _, p := range pages {
				if err := store.SetProto(tx, pageKey(sona, seg.ID, p.Seq), p); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// STMStateRecord is sona's STM state record as stored.
func (s *Store) STMStateRecord(sona string) (raw []byte, err error) {
	err = s.view.View(func(txn store.Reader) error {
		raw, err = txn.Get(stmKey(sona))
		return err
	})
	return raw, err
}

// CacheSTMState has the cache of tier records hold raw as sona's STM
// state, as a commit told before every other did: what a view reads there
// when a later commit that wrote the state is not yet told (its snapshot
// may already see it).
func (s *Store) CacheSTMState(sona string, raw []byte) {
	s.recs.Committed(store.Event{Told: 1, Keys: []string{string(stmKey(sona))}, Values: [][]byte{raw}})
}

// SetBatch sets how many pages an STM or MTM step takes at most (tierBatch).
func (s *Store) SetBatch(n int) { s.batch = n }

// MTMState is sona's MTM state as stored.
func (s *Store) MTMState(sona string) (*messages.MtmState, error) {
	st := &messages.MtmState{}
	err := s.view.View(func(txn store.Reader) error {
		_, err := s.getProto(txn, mtmKey(sona), st)
		return err
	})
	return st, err
}

// MTMPagesStored counts the mid-term pages stored of sona, by segment.
func (s *Store) MTMPagesStored(sona string) (map[uint64]int, error) {
	out := map[uint64]int{}
	prefix := base.Join(tierPrefix(sona), []byte("p"))
	err := s.view.View(func(txn store.Reader) error {
		return store.Keys(txn, prefix, func(k []byte) {
			out[binary.BigEndian.Uint64(k[len(prefix):])]++
		})
	})
	return out, err
}

// SegmentPages reads the pages of segment seg of sona, oldest first.
func (s *Store) SegmentPages(sona string, seg uint64) (ps []*messages.Page, err error) {
	err = s.view.View(func(txn store.Reader) error {
		ps, err = segmentPages(txn, sona, seg)
		return err
	})
	return ps, err
}

// SharedPersona is sona's persona as a retrieval reads it (shared: decoded
// once for the record the cache holds).
func (s *Store) SharedPersona(sona string) (p *Persona, err error) {
	err = s.view.View(func(txn store.Reader) error {
		p, err = s.sharedPersona(txn, sona)
		return err
	})
	return p, err
}

// StoredPersona is sona's persona decoded from its record.
func (s *Store) StoredPersona(sona string) (p *Persona, err error) {
	err = s.view.View(func(txn store.Reader) error {
		p, err = s.readPersona(txn, sona)
		return err
	})
	return p, err
}

// PersonaDecoded reports whether a decoded persona of sona is kept.
func (s *Store) PersonaDecoded(sona string) bool {
	e := s.personas.slot(sona).Load()
	return e != nil && e.sona == sona
}
