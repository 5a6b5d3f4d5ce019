package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/model"
	memstore "github.com/memoria-ai/memoria/memory/store"
)

// badgerValues is how many distinct memories the raw Badger reference
// cycles through (encoded and embedded before the clock starts).
const badgerValues = 4096

// badger measures the insert scenario's reference: raw Badger, writers
// concurrent writers, each write one transaction fsynced on commit (the
// Badger options the server opens a new store with: SyncWrites, no
// conflict detection, its compression, block cache, memtables, level 0
// and checksums; store.BadgerOptions) that stores what is the bulk of an
// insert — the memory's DAG-CBOR block under its CID and its embedding —
// and nothing else.
func (r *run) badger(ctx context.Context, writers int) error {
	dir, err := r.scratch("badger")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := badger.Open(memstore.BadgerOptions(dir, memstore.OptionsOf(r.o.Config.Store)))
	if err != nil {
		return fmt.Errorf("bench: raw badger: %w", err)
	}
	defer db.Close()
	emb := llm.NewHashedEmbedder(r.o.Config.Embedder.Dims)
	type kv struct{ key, block, vec []byte }
	values := make([]kv, badgerValues)
	for i := range values {
		text := r.o.Corpus.Text(i)
		c, block, err := (&model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}).Encode()
		if err != nil {
			return err
		}
		v, err := emb.Embed(ctx, []string{text})
		if err != nil {
			return err
		}
		vec := make([]byte, 4*len(v[0]))
		for j, f := range v[0] {
			binary.LittleEndian.PutUint32(vec[4*j:], math.Float32bits(f))
		}
		values[i] = kv{c.Bytes(), block, vec}
	}
	var next atomic.Uint64
	req := func(ctx context.Context, _ int, _ *rand.Rand) (loadgen.Op, error) {
		n := next.Add(1) - 1
		v := values[n%badgerValues]
		// a fresh key each write: the CID with the write's number
		key := binary.BigEndian.AppendUint64(append([]byte("b/"), v.key...), n)
		txn := db.NewTransaction(true)
		defer txn.Discard()
		if err := txn.Set(key, v.block); err != nil {
			return "badger", err
		}
		if err := txn.Set(append([]byte("v/"), key[2:]...), v.vec); err != nil {
			return "badger", err
		}
		return "badger", txn.Commit()
	}
	self := func() (loadgen.ProcSample, error) { return loadgen.ReadProc(os.Getpid()) }
	rep := r.window(ctx, fmt.Sprintf("refs: raw badger, %d writers", writers),
		loadgen.Window{Clients: writers, Duration: r.o.Duration, Requests: r.o.Requests, Seed: r.o.Seed, Server: self}, req)
	res := fromLoad(Refs, rep)
	res.Name, res.Path, res.ClientCPUMsPerOp = "raw badger: 1 fsynced txn per write", "in-process", 0
	res.StoreSize = int(next.Load())
	res.Note = fmt.Sprintf("%d writers, each write one transaction of the memory's block and its embedding, committed with fsync; the insert scenario's reference", writers)
	r.add(res)
	return nil
}
