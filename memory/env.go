package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// The wiring of transfer, living and the tiers (issue 14) to the chains' and the
// memories' key spaces (memory/chain, memory/meta) and to the self's
// subsystems (Self.Sonas, Self.Chains, Self.Backbone, Self.Memories).

// records reads and writes the key spaces of the sonas and their chains
// (s/, n/, k/, c/, x/backbone) and of the memories' metadata and
// embeddings (m/, v/) inside a snapshot or a transaction. It keeps no
// state (transfer.Records).
type records struct{}

var (
	_ transfer.Records = records{}
)

func (records) Sonas(r store.Reader) ([]*messages.Sona, error) {
	var out []*messages.Sona
	err := store.Scan(r, chain.SonaPrefix, func(_, v []byte) error {
		rec := &messages.Sona{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("%w: sona record: %v", base.ErrCorrupt, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

func (records) SetNameVector(tx store.Tx, sona string, vec []float32) {
	tx.Set(chain.NameVecKey(sona), meta.EncodeVector(vec))
}

func (records) Backbone(r store.Reader) (string, error) {
	v, err := r.Get(chain.KeyBackbone)
	if errors.Is(err, base.ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

func (records) Chain(r store.Reader, sona string) ([]transfer.Entry, error) {
	var out []transfer.Entry
	prefix := chain.EntriesPrefix(sona)
	err := store.Scan(r, prefix, func(k, v []byte) error {
		act, mem, logSeq, err := chain.DecodeEntry(v)
		if err != nil {
			return err
		}
		out = append(out, transfer.Entry{Seq: int64(binary.BigEndian.Uint64(k[len(prefix):])), Act: act, Memory: mem, LogSeq: logSeq})
		return nil
	})
	return out, err
}

func (records) Memories(r store.Reader, f func(c cid.Cid) error) error {
	return store.Scan(r, meta.Prefix, func(k, _ []byte) error {
		c, err := cid.Cast(k[len(meta.Prefix):])
		if err != nil {
			return fmt.Errorf("%w: metadata key: %v", base.ErrCorrupt, err)
		}
		return f(c)
	})
}

func (records) Meta(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error) { return meta.Read(r, c) }

func (records) SetMeta(tx store.Tx, c cid.Cid, m *messages.MemoryMeta) error {
	return meta.Write(tx, c, m)
}

func (records) Vector(r store.Reader, c cid.Cid) ([]float32, error) {
	v, err := r.Get(meta.VectorKey(c))
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("%w: vector of %s", base.ErrNotFound, c)
	}
	if err != nil {
		return nil, err
	}
	return meta.DecodeVector(v)
}

func (records) SetVector(tx store.Tx, c cid.Cid, vec []float32) {
	tx.Set(meta.VectorKey(c), meta.EncodeVector(vec))
}

func (records) ScanMeta(r store.Reader, cursor []byte, f func(key []byte, c cid.Cid, meta *messages.MemoryMeta) (bool, error)) error {
	it := r.NewIterator(store.IterOptions{Prefix: meta.Prefix, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	seek := meta.Prefix
	if len(cursor) > 0 {
		seek = append(slices.Clone(cursor), 0)
	}
	for it.Seek(seek); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		c, err := cid.Cast(key[len(meta.Prefix):])
		if err != nil {
			return fmt.Errorf("%w: metadata key: %v", base.ErrCorrupt, err)
		}
		m := &messages.MemoryMeta{}
		if err := it.Item().Value(func(v []byte) error { return meta.Unmarshal(v, m) }); err != nil {
			return fmt.Errorf("%w: metadata of %s: %v", base.ErrCorrupt, c, err)
		}
		if err := meta.MergeHot(r, c, m); err != nil {
			return err
		}
		if more, err := f(key, c, m); err != nil || !more {
			return err
		}
	}
	return nil
}

func (records) ChainBack(r store.Reader, sona string, upto int64, f func(c cid.Cid) (bool, error)) error {
	it := r.NewIterator(store.IterOptions{Prefix: chain.EntriesPrefix(sona), Reverse: true, PrefetchValues: true})
	defer it.Close()
	for it.Seek(chain.EntryKey(sona, upto)); it.Valid(); it.Next() {
		var c cid.Cid
		err := it.Item().Value(func(v []byte) error {
			var err error
			_, c, _, err = chain.DecodeEntry(v)
			return err
		})
		if err != nil {
			return err
		}
		if more, err := f(c); err != nil || !more {
			return err
		}
	}
	return nil
}

// selfState is what the subsystems need of the self's state: the
// decoded-memory cache (Self.Memories), the embedder.
type selfState struct {
	records
	s *Self
}

// Meta is a memory's metadata as records reads it, with the recalls'
// touches not yet written when r is a view (meta.Store.WithTouches).
func (e selfState) Meta(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error) {
	m, err := e.records.Meta(r, c)
	if err != nil {
		return nil, err
	}
	return e.s.Memories.WithTouches(r, c, m), nil
}

// ScanMeta is records' ScanMeta, each record with the touches not yet
// written when r is a view (the living memory's branch statistics count
// the accesses).
func (e selfState) ScanMeta(r store.Reader, cursor []byte, f func(key []byte, c cid.Cid, meta *messages.MemoryMeta) (bool, error)) error {
	return e.records.ScanMeta(r, cursor, func(key []byte, c cid.Cid, m *messages.MemoryMeta) (bool, error) {
		return f(key, c, e.s.Memories.WithTouches(r, c, m))
	})
}

func (e selfState) Memory(r store.Reader, c cid.Cid) (*model.Memory, error) {
	return e.s.Memories.MemoryIn(r, c)
}

func (e selfState) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

// transferEnv adds the live sonas and the append's preparation
// (transfer.Env).
type transferEnv struct{ selfState }

var _ transfer.Env = transferEnv{}

func (transferEnv) ValidateSonaName(name string) error { return chain.ValidateSonaName(name) }

func (e transferEnv) SetLinks(tx store.Tx, c cid.Cid, list *messages.Associations) {
	e.s.Assoc.Replace(tx, c, list)
}

func (e transferEnv) Flush(ctx context.Context) error {
	if err := e.s.Assoc.Flush(ctx); err != nil {
		return err
	}
	return e.s.Memories.FlushTouches(ctx)
}

func (e transferEnv) PutSona(tx store.Tx, rec *messages.Sona, name []float32, backbone bool) error {
	if ok, err := tx.Has(chain.SonaKey(rec.Uuid)); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: sona %s exists", base.ErrChainConflict, rec.Uuid)
	}
	if backbone {
		if ok, err := tx.Has(chain.KeyBackbone); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: the store has a backbone", base.ErrChainConflict)
		}
	}
	if err := e.s.Sonas.Put(tx, rec, name); err != nil {
		return err
	}
	if backbone {
		e.s.Backbone.Put(tx, rec.Uuid)
	}
	return nil
}

func (e transferEnv) Prepare(m *model.Memory, c cid.Cid, block []byte, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	return e.s.Chains.Prepared(m, c, block, vec, meta)
}

// livingEnv adds the sonas' committed lengths, recall's decay and the
// append's preparation (living.Env).
type livingEnv struct{ selfState }

var _ living.Env = livingEnv{}

func (e livingEnv) Length(sona string) (int64, bool) {
	return e.s.Sonas.Activity(sona)
}

func (e livingEnv) Lengths() map[string]int64 { return e.s.Sonas.Lengths() }

func (e livingEnv) BackboneSona() string { return e.s.Backbone.Sona() }

func (e livingEnv) SimStats(sona string) (assoc.SimStats, int64, error) {
	return e.s.Chains.SimStats(sona)
}

func (e livingEnv) Decay(meta *messages.MemoryMeta, activity int64) float64 {
	return recall.DecayOf(e.s.cfg.Recall.Lambda, meta, activity)
}

func (e livingEnv) Prepare(m *model.Memory, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	return e.s.Chains.Prepare(m, vec, meta)
}

// tierEnv is what the tiers' storage needs of the self (tiers.Env).
type tierEnv struct{ s *Self }

func (e tierEnv) Memory(r store.Reader, c cid.Cid) (*model.Memory, error) {
	return e.s.Memories.MemoryIn(r, c)
}

func (e tierEnv) Vector(c cid.Cid) ([]float32, error) {
	if v, ok := e.s.index.Lookup(c.KeyString()); ok {
		return v, nil
	}
	return e.s.Memories.Vector(c)
}

func (e tierEnv) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

func (e tierEnv) Sonas(r store.Reader, c cid.Cid) ([]string, error) {
	m := &messages.MemoryMeta{}
	found, err := store.GetProto(r, meta.Key(c), m)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: memory %s", base.ErrNotFound, c)
	}
	return m.Sonas, nil
}

func (e tierEnv) CheckSona(sona string) error {
	_, err := e.s.Sonas.Get(sona)
	return err
}
