package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

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

var _ transfer.Records = records{}

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

// selfEnv is what the subsystems need of the self's state: the
// decoded-memory cache, the embedder, the live sonas, the append path.
type selfEnv struct {
	records
	s *Self
}

var _ transfer.Env = selfEnv{}

func (e selfEnv) Memory(r Reader, c cid.Cid) (*model.Memory, error) { return e.s.loadMemory(r, c) }

func (e selfEnv) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	return e.s.Embed(ctx, texts...)
}

func (selfEnv) ValidateSonaName(name string) error { return ValidateSonaName(name) }

func (e selfEnv) PutSona(tx Tx, rec *messages.Sona, name []float32, backbone bool) error {
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

func (e selfEnv) Prepare(m *model.Memory, c cid.Cid, block []byte, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	return e.s.prepared(m, c, block, vec, meta)
}
