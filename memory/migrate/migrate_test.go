package migrate_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/migrate"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// TestMigrateFromLayout1 writes a store, rewrites it into layout 1 (no
// insertion log, chain entries without log positions), and checks that
// opening it migrates everything back.
func TestMigrateFromLayout1(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clock)
	o := memorytest.NewOwner(t, s, "old")
	var mems []cid.Cid
	for i, txt := range []string{"first memory", "second memory", "third memory"} {
		clock.Set(memorytest.Epoch.Add(time.Duration(i) * time.Hour))
		mems = append(mems, o.Text(txt))
	}
	err := s.Store().WriteBehind(func(txn *badger.Txn) error {
		if _, err := rewriteMeta(txn, mems, func(_ cid.Cid, m *messages.MemoryMeta) { m.Seq = 0 }); err != nil {
			return err
		}
		for seq := int64(0); seq < 3; seq++ {
			item, err := txn.Get(chain.EntryKey(o.Sona, seq))
			if err != nil {
				return err
			}
			v, _ := item.ValueCopy(nil)
			act, mem, _, err := chain.DecodeEntry(v)
			if err != nil {
				return err
			}
			if err := txn.Set(chain.EntryKey(o.Sona, seq), base.Join(act.Bytes(), mem.Bytes())); err != nil {
				return err
			}
		}
		for seq := uint64(1); seq <= 3; seq++ {
			if err := txn.Delete(chain.LogKey(seq)); err != nil {
				return err
			}
		}
		if err := txn.Delete(store.KeyMemSeq); err != nil {
			return err
		}
		return txn.Set(migrate.KeyVersion, []byte("1"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	for i, c := range mems {
		meta, err := s.Memories.Meta(c)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Seq != uint64(i+1) {
			t.Fatalf("memory %d has log seq %d, want %d", i, meta.Seq, i+1)
		}
	}
	page, err := s.Sonas.Chain(o.Sona, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range page.Items {
		if e.Memory != mems[i] || e.LogSeq != uint64(i+1) {
			t.Fatalf("chain entry %d: %+v", i, e)
		}
	}
	err = s.Store().View(func(txn store.Reader) error {
		v, err := txn.Item(migrate.KeyVersion)
		if err != nil {
			return err
		}
		b, _ := v.ValueCopy(nil)
		if !bytes.Equal(b, []byte(fmt.Sprint(migrate.Version))) {
			t.Fatalf("layout %s after migration", b)
		}
		end, err := chain.LogEnd(txn)
		if end != 3 {
			t.Fatalf("insertion log ends at %d", end)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The migrated store keeps working.
	o2 := &memorytest.Owner{T: t, S: s, Sona: o.Sona, Head: o.Head, N: o.N}
	c := o2.Text("fourth memory")
	if meta, _ := s.Memories.Meta(c); meta.Seq != 4 {
		t.Fatalf("new memory after migration has log seq %d", meta.Seq)
	}
	if _, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "memory"}); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateFromLayout2 rewrites a store into layout 2 (no file records)
// and checks that opening it records each file memory's block as a file
// of its sonas again.
func TestMigrateFromLayout2(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clock)
	a, b := memorytest.NewOwner(t, s, "a"), memorytest.NewOwner(t, s, "b")
	ctx := context.Background()
	file, err := s.Chains.PutFile(ctx, []byte("the file's bytes"), "")
	if err != nil {
		t.Fatal(err)
	}
	name := "notes.txt"
	fm := &model.Memory{Data: model.Data{File: &model.FileData{Name: &name, Content: file}}}
	a.Add(fm, nil)
	b.Text("no file here")
	mine := func(id string) func(string) bool { return func(s string) bool { return s == id } }
	err = s.Store().WriteBehind(func(txn *badger.Txn) error {
		if err := txn.Delete(chain.FileSonaKey(file, a.Sona)); err != nil {
			return err
		}
		return txn.Set(migrate.KeyVersion, []byte("2"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Chains.FileInSonas(file, mine(a.Sona)); ok {
		t.Fatal("the file record was not removed")
	}
	s.Close()
	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	for id, want := range map[string]bool{a.Sona: true, b.Sona: false} {
		if ok, err := s.Chains.FileInSonas(file, mine(id)); err != nil || ok != want {
			t.Fatalf("file of sona %s: %v %v, want %v", id, ok, err, want)
		}
	}
}

// TestMigrateFromLayout3 rewrites a store into layout 3 (every metadata
// record's evaluation metrics as a map of names) and checks that opening
// it packs them (meta.Marshal), a few records a transaction, and leaves
// a record whose metrics cannot be packed as it was.
func TestMigrateFromLayout3(t *testing.T) {
	defer migrate.SetPackBatch(2)()
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clock)
	o := memorytest.NewOwner(t, s, "old")
	var mems []cid.Cid
	for _, txt := range []string{"first memory", "second memory", "third memory", "fourth memory", "fifth memory"} {
		mems = append(mems, o.Text(txt))
	}
	odd := mems[2] // a metric no number names: not packed
	want := map[cid.Cid]*messages.MemoryMeta{}
	var old map[cid.Cid][]byte
	err := s.Store().WriteBehind(func(txn *badger.Txn) (err error) {
		old, err = rewriteMeta(txn, mems, func(c cid.Cid, m *messages.MemoryMeta) {
			m.Evaluation = &messages.EvalSummary{Metrics: map[string]float64{}, Priority: &messages.Priority{DecayRate: 0.5}}
			for j, name := range meta.PackedMetrics {
				m.Evaluation.Metrics[name] = float64((len(want)*7+j)%1000) / 1000
			}
			if c == odd {
				m.Evaluation.Metrics["custom_metric"] = 0.5
			}
			want[c] = m
		})
		if err != nil {
			return err
		}
		return txn.Set(migrate.KeyVersion, []byte("3"))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	err = s.Store().View(func(txn store.Reader) error {
		for _, c := range mems {
			raw, err := txn.Get(meta.Key(c))
			if err != nil {
				return err
			}
			packed, _ := meta.Marshal(want[c])
			switch {
			case c == odd && !bytes.Equal(raw, old[c]):
				t.Errorf("%s: a record that cannot be packed was rewritten", c)
			case c != odd && (!bytes.Equal(raw, packed) || len(raw) >= len(old[c])/2):
				t.Errorf("%s: %d bytes after the migration, %d before: not packed", c, len(raw), len(old[c]))
			}
			got := &messages.MemoryMeta{}
			if err := meta.Unmarshal(raw, got); err != nil || !proto.Equal(got, want[c]) {
				t.Errorf("%s: read back %v (%v), want %v", c, got, err, want[c])
			}
		}
		v, err := txn.Get(migrate.KeyVersion)
		if err == nil && string(v) != fmt.Sprint(migrate.Version) {
			t.Errorf("layout %s after migration", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.Memories.Meta(mems[0]); err != nil || !proto.Equal(m.Evaluation, want[mems[0]].Evaluation) {
		t.Fatalf("through the cache: %v (%v)", m, err)
	}
}

// rewriteMeta rewrites the metadata record of each of mems behind the
// store's back as change leaves it, encoded as layouts before 4 wrote
// records (proto.Marshal), and returns what it wrote.
func rewriteMeta(txn *badger.Txn, mems []cid.Cid, change func(c cid.Cid, m *messages.MemoryMeta)) (map[cid.Cid][]byte, error) {
	wrote := map[cid.Cid][]byte{}
	for _, c := range mems {
		item, err := txn.Get(meta.Key(c))
		if err != nil {
			return nil, err
		}
		m := &messages.MemoryMeta{}
		if err := item.Value(func(v []byte) error { return meta.Unmarshal(v, m) }); err != nil {
			return nil, err
		}
		change(c, m)
		if wrote[c], err = proto.Marshal(m); err != nil {
			return nil, err
		}
		if err := txn.Set(meta.Key(c), wrote[c]); err != nil {
			return nil, err
		}
	}
	return wrote, nil
}
