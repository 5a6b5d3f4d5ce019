package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// migrateV1 brings a layout-1 store to layout 2: it builds the insertion
// log (memories in the order they were stored, ties by CID), records each
// memory's log position in its metadata, and adds the log position to the
// chain entries (a layout-1 ACT gets its memory's position).
func (s *Self) migrateV1(ctx context.Context) error {
	type entry struct {
		c       cid.Cid
		created int64
	}
	var mems []entry
	var chain [][2][]byte // key, value
	err := s.store.View(func(txn Reader) error {
		if err := store.Scan(txn, prefixMeta, func(k, v []byte) error {
			meta := &messages.MemoryMeta{}
			if err := proto.Unmarshal(v, meta); err != nil {
				return fmt.Errorf("%w: metadata: %v", ErrCorrupt, err)
			}
			c, err := cid.Cast(bytes.Clone(k[len(prefixMeta):]))
			if err != nil {
				return err
			}
			mems = append(mems, entry{c, meta.CreatedAt})
			return nil
		}); err != nil {
			return err
		}
		return store.Scan(txn, prefixChain, func(k, v []byte) error {
			chain = append(chain, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
	})
	if err != nil {
		return err
	}
	slices.SortFunc(mems, func(a, b entry) int {
		if c := cmp.Compare(a.created, b.created); c != 0 {
			return c
		}
		return bytes.Compare(a.c.Bytes(), b.c.Bytes())
	})
	seqOf := make(map[cid.Cid]uint64, len(mems))
	const per = 500
	for start := 0; start < len(mems); start += per {
		part := mems[start:min(start+per, len(mems))]
		first := uint64(start + 1)
		if err := s.store.Update(ctx, func(tx Tx) error {
			for i, e := range part {
				seq := first + uint64(i)
				raw, err := tx.Get(metaKey(e.c))
				if err != nil {
					return err
				}
				meta := &messages.MemoryMeta{}
				if err := proto.Unmarshal(raw, meta); err != nil {
					return err
				}
				meta.Seq = seq
				out, err := proto.Marshal(meta)
				if err != nil {
					return err
				}
				tx.Set(metaKey(e.c), out)
				tx.Set(logKey(seq), e.c.Bytes())
			}
			tx.Set(store.KeyMemSeq, base.U64(first+uint64(len(part))-1))
			return nil
		}); err != nil {
			return err
		}
		for i, e := range part {
			seqOf[e.c] = first + uint64(i)
		}
	}
	for start := 0; start < len(chain); start += per {
		part := chain[start:min(start+per, len(chain))]
		if err := s.store.Update(ctx, func(tx Tx) error {
			for _, kv := range part {
				n, act, err := cid.CidFromBytes(kv[1])
				if err != nil {
					return fmt.Errorf("%w: chain entry: %v", ErrCorrupt, err)
				}
				m, mem, err := cid.CidFromBytes(kv[1][n:])
				if err != nil {
					return fmt.Errorf("%w: chain entry: %v", ErrCorrupt, err)
				}
				if n+m == len(kv[1]) { // layout 1: no log position yet
					tx.Set(kv[0], encodeChainEntry(act, mem, seqOf[mem]))
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	// Layout 1 kept a running centroid under k/; layout 2 keeps the name's
	// embedding there and computes the centroid at start.
	var names []*messages.Sona
	if err := s.store.View(func(txn Reader) error {
		return store.Scan(txn, prefixSona, func(_, v []byte) error {
			rec := &messages.Sona{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("%w: sona record: %v", ErrCorrupt, err)
			}
			names = append(names, rec)
			return nil
		})
	}); err != nil {
		return err
	}
	for _, rec := range names {
		vecs, err := s.Embed(ctx, rec.Name)
		if err != nil {
			return err
		}
		if err := s.store.Update(ctx, func(tx Tx) error {
			tx.Set(nameVectorKey(rec.Uuid), encodeVector(vecs[0]))
			return nil
		}); err != nil {
			return err
		}
	}
	s.log.Info("store migrated", "from", 1, "to", 2, "memories", len(mems), "acts", len(chain))
	return s.setLayout(ctx, 2)
}

func (s *Self) setLayout(ctx context.Context, v int) error {
	return s.store.Update(ctx, func(tx Tx) error {
		tx.Set(keyVersion, []byte(fmt.Sprint(v)))
		return nil
	})
}

// migrateV2 brings a layout-2 store to layout 3: it records, for every
// file memory of every chain, that its sona may name the file's raw
// block (f/, memory/chain).
func (s *Self) migrateV2(ctx context.Context) error {
	var keys [][]byte
	err := s.store.View(func(txn Reader) error {
		return scanChainMemories(txn, func(id string, mem cid.Cid) error {
			m, err := readMemory(txn, mem)
			if err != nil {
				return err
			}
			if f := m.Data.File; f != nil {
				keys = append(keys, fileSonaKey(f.Content, id))
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	const per = 1000
	for start := 0; start < len(keys); start += per {
		part := keys[start:min(start+per, len(keys))]
		if err := s.store.Update(ctx, func(tx Tx) error {
			for _, k := range part {
				tx.Set(k, nil)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	s.log.Info("store migrated", "from", 2, "to", 3, "file_records", len(keys))
	return s.setLayout(ctx, 3)
}
