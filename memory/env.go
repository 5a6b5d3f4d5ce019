package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// The wiring of the subsystems that moved out of package memory to the
// key spaces and the state that are still here (issue 14): when the
// chains and the metadata move to their packages, these adapters call
// those instead.

// records reads and writes the key spaces of the sonas and their chains
// (s/, n/, k/, c/, x/backbone) and of the memories' metadata and
// embeddings (m/, v/) inside a snapshot or a transaction. It keeps no
// state (transfer.Records).
type records struct{}

var (
	_ transfer.Records = records{}
)

func (records) Sonas(r Reader) ([]*messages.Sona, error) {
	var out []*messages.Sona
	err := store.Scan(r, prefixSona, func(_, v []byte) error {
		rec := &messages.Sona{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("%w: sona record: %v", ErrCorrupt, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

func (records) SetNameVector(tx Tx, sona string, vec []float32) {
	tx.Set(nameVectorKey(sona), encodeVector(vec))
}

func (records) Backbone(r Reader) (string, error) {
	v, err := r.Get(keyBackbone)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	return string(v), err
}

func (records) Chain(r Reader, sona string) ([]transfer.Entry, error) {
	var out []transfer.Entry
	prefix := chainPrefix(sona)
	err := store.Scan(r, prefix, func(k, v []byte) error {
		act, mem, logSeq, err := decodeChainEntry(v)
		if err != nil {
			return err
		}
		out = append(out, transfer.Entry{Seq: int64(binary.BigEndian.Uint64(k[len(prefix):])), Act: act, Memory: mem, LogSeq: logSeq})
		return nil
	})
	return out, err
}

func (records) Memories(r Reader, f func(c cid.Cid) error) error {
	return store.Scan(r, prefixMeta, func(k, _ []byte) error {
		c, err := cid.Cast(k[len(prefixMeta):])
		if err != nil {
			return fmt.Errorf("%w: metadata key: %v", ErrCorrupt, err)
		}
		return f(c)
	})
}

func (records) Meta(r Reader, c cid.Cid) (*messages.MemoryMeta, error) { return getMeta(r, c) }

func (records) SetMeta(tx Tx, c cid.Cid, meta *messages.MemoryMeta) error {
	return store.SetProto(tx, metaKey(c), meta)
}

func (records) Vector(r Reader, c cid.Cid) ([]float32, error) {
	v, err := r.Get(vectorKey(c))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: vector of %s", ErrNotFound, c)
	}
	if err != nil {
		return nil, err
	}
	return decodeVector(v)
}

func (records) SetVector(tx Tx, c cid.Cid, vec []float32) {
	tx.Set(vectorKey(c), encodeVector(vec))
}

func (records) ScanMeta(r Reader, cursor []byte, f func(key []byte, c cid.Cid, meta *messages.MemoryMeta) (bool, error)) error {
	it := r.NewIterator(IterOptions{Prefix: prefixMeta, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	seek := prefixMeta
	if len(cursor) > 0 {
		seek = append(slices.Clone(cursor), 0)
	}
	for it.Seek(seek); it.Valid(); it.Next() {
		key := it.Item().KeyCopy(nil)
		c, err := cid.Cast(key[len(prefixMeta):])
		if err != nil {
			return fmt.Errorf("%w: metadata key: %v", ErrCorrupt, err)
		}
		meta := &messages.MemoryMeta{}
		if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, meta) }); err != nil {
			return fmt.Errorf("%w: metadata of %s: %v", ErrCorrupt, c, err)
		}
		if more, err := f(key, c, meta); err != nil || !more {
			return err
		}
	}
	return nil
}

func (records) ChainBack(r Reader, sona string, upto int64, f func(c cid.Cid) (bool, error)) error {
	it := r.NewIterator(IterOptions{Prefix: chainPrefix(sona), Reverse: true, PrefetchValues: true})
	defer it.Close()
	for it.Seek(chainKey(sona, upto)); it.Valid(); it.Next() {
		var c cid.Cid
		err := it.Item().Value(func(v []byte) error {
			var err error
			_, c, _, err = decodeChainEntry(v)
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
// decoded-memory cache, the embedder.
type selfState struct {
	records
	s *Self
}

func (e selfState) Memory(r Reader, c cid.Cid) (*model.Memory, error) { return e.s.loadMemory(r, c) }

func (e selfState) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

// transferEnv adds the live sonas and the append's preparation
// (transfer.Env).
type transferEnv struct{ selfState }

var _ transfer.Env = transferEnv{}

func (transferEnv) ValidateSonaName(name string) error { return ValidateSonaName(name) }

func (e transferEnv) PutSona(tx Tx, rec *messages.Sona, name []float32, backbone bool) error {
	if ok, err := tx.Has(sonaKey(rec.Uuid)); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: sona %s exists", ErrChainConflict, rec.Uuid)
	}
	if backbone {
		if ok, err := tx.Has(keyBackbone); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: the store has a backbone", ErrChainConflict)
		}
		tx.Set(keyBackbone, []byte(rec.Uuid))
	}
	if err := store.SetProto(tx, sonaKey(rec.Uuid), rec); err != nil {
		return err
	}
	tx.Set(nameKey(rec.Name, rec.Uuid), nil)
	tx.Set(nameVectorKey(rec.Uuid), encodeVector(name))
	rec = proto.Clone(rec).(*messages.Sona)
	tx.OnCommit(func() {
		e.s.smu.Lock()
		e.s.sonas[rec.Uuid] = newSonaState(rec, name)
		e.s.smu.Unlock()
		if backbone {
			id := rec.Uuid
			e.s.backbone.Store(&id)
		}
	})
	return nil
}

func (e transferEnv) Prepare(m *model.Memory, c cid.Cid, block []byte, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	return e.s.prepared(m, c, block, vec, meta)
}

// livingEnv adds the sonas' committed lengths, recall's decay and the
// append's preparation (living.Env).
type livingEnv struct{ selfState }

var _ living.Env = livingEnv{}

func (e livingEnv) Length(sona string) (int64, bool) {
	_, n, ok := e.s.sonaSnapshot(sona)
	return n, ok
}

func (e livingEnv) Lengths() map[string]int64 {
	e.s.smu.RLock()
	defer e.s.smu.RUnlock()
	out := make(map[string]int64, len(e.s.sonas))
	for id, st := range e.s.sonas {
		out[id] = st.rec.Length
	}
	return out
}

func (e livingEnv) BackboneSona() string { return e.s.BackboneSona() }

func (e livingEnv) Decay(meta *messages.MemoryMeta, activity int64) float64 {
	return e.s.decay(meta, activity)
}

func (e livingEnv) Prepare(m *model.Memory, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	return e.s.Prepare(m, vec, meta)
}
