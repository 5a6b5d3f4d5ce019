package migrate

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Version is the layout version of the key spaces (memory/store's doc). A
// store written by a newer layout is refused.
const Version = 4

// KeyVersion holds a store's layout version.
var KeyVersion = []byte("x/version")

// Embed embeds texts in the store's space (migrating from layout 1 embeds
// the sonas' names).
type Embed func(ctx context.Context, texts ...string) ([][]float32, error)

// Check refuses a store of an unknown layout or of another embedding space
// than embedder's, migrates an older layout one step at a time, and stamps
// a new store with both.
func Check(ctx context.Context, st *store.Store, embedder string, embed Embed, log *slog.Logger) error {
	mg := &migrator{store: st, embed: embed, log: log}
	for {
		err := mg.identityOp(ctx, embedder)
		var m *migrationNeeded
		if !errors.As(err, &m) {
			return err
		}
		if err := m.migrate(mg, ctx); err != nil {
			return fmt.Errorf("memory: migrating the store from layout %d to %d: %w", m.from, m.from+1, err)
		}
	}
}

type migrator struct {
	store *store.Store
	embed Embed
	log   *slog.Logger
}

// migrationNeeded says the store is of an older layout, and how to bring
// it one layout further.
type migrationNeeded struct {
	from    int
	migrate func(mg *migrator, ctx context.Context) error
}

func (m *migrationNeeded) Error() string {
	return fmt.Sprintf("memory: store of layout %d needs migration", m.from)
}

// migrations bring a store of layout n (the key) to layout n+1.
var migrations = map[string]*migrationNeeded{
	"1": {1, (*migrator).v1},
	"2": {2, (*migrator).v2},
	"3": {3, (*migrator).v3},
}

func (mg *migrator) identityOp(ctx context.Context, embedder string) error {
	return mg.store.Update(ctx, func(tx store.Tx) error {
		v, err := tx.Get(KeyVersion)
		switch {
		case errors.Is(err, base.ErrNotFound):
			tx.Set(KeyVersion, []byte(fmt.Sprint(Version)))
		case err != nil:
			return err
		case migrations[string(v)] != nil:
			return migrations[string(v)]
		case string(v) != fmt.Sprint(Version):
			return fmt.Errorf("memory: store layout version %s, this build reads %d", v, Version)
		}
		return store.CheckEmbedder(tx, embedder)
	})
}

// v1 brings a layout-1 store to layout 2: it builds the insertion
// log (memories in the order they were stored, ties by CID), records each
// memory's log position in its metadata, and adds the log position to the
// chain entries (a layout-1 ACT gets its memory's position).
func (mg *migrator) v1(ctx context.Context) error {
	type entry struct {
		c       cid.Cid
		created int64
	}
	var mems []entry
	var entries [][2][]byte // chain entries: key, value
	err := mg.store.View(func(txn store.Reader) error {
		if err := store.Scan(txn, meta.Prefix, func(k, v []byte) error {
			m := &messages.MemoryMeta{}
			if err := proto.Unmarshal(v, m); err != nil {
				return fmt.Errorf("%w: metadata: %v", base.ErrCorrupt, err)
			}
			c, err := cid.Cast(bytes.Clone(k[len(meta.Prefix):]))
			if err != nil {
				return err
			}
			mems = append(mems, entry{c, m.CreatedAt})
			return nil
		}); err != nil {
			return err
		}
		return store.Scan(txn, chain.ChainPrefix, func(k, v []byte) error {
			entries = append(entries, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
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
		if err := mg.store.Update(ctx, func(tx store.Tx) error {
			for i, e := range part {
				seq := first + uint64(i)
				raw, err := tx.Get(meta.Key(e.c))
				if err != nil {
					return err
				}
				m := &messages.MemoryMeta{}
				if err := meta.Unmarshal(raw, m); err != nil {
					return err
				}
				if err := meta.MergeHot(tx, e.c, m); err != nil { // as meta.Write keeps it
					return err
				}
				m.Seq = seq
				if err := meta.Put(tx, e.c, m); err != nil {
					return err
				}
				tx.Set(chain.LogKey(seq), e.c.Bytes())
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
	for start := 0; start < len(entries); start += per {
		part := entries[start:min(start+per, len(entries))]
		if err := mg.store.Update(ctx, func(tx store.Tx) error {
			for _, kv := range part {
				n, act, err := cid.CidFromBytes(kv[1])
				if err != nil {
					return fmt.Errorf("%w: chain entry: %v", base.ErrCorrupt, err)
				}
				m, mem, err := cid.CidFromBytes(kv[1][n:])
				if err != nil {
					return fmt.Errorf("%w: chain entry: %v", base.ErrCorrupt, err)
				}
				if n+m == len(kv[1]) { // layout 1: no log position yet
					tx.Set(kv[0], chain.EncodeEntry(act, mem, seqOf[mem]))
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
	if err := mg.store.View(func(txn store.Reader) error {
		return store.Scan(txn, chain.SonaPrefix, func(_, v []byte) error {
			rec := &messages.Sona{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("%w: sona record: %v", base.ErrCorrupt, err)
			}
			names = append(names, rec)
			return nil
		})
	}); err != nil {
		return err
	}
	for _, rec := range names {
		vecs, err := mg.embed(ctx, rec.Name)
		if err != nil {
			return err
		}
		if err := mg.store.Update(ctx, func(tx store.Tx) error {
			tx.Set(chain.NameVecKey(rec.Uuid), meta.EncodeVector(vecs[0]))
			return nil
		}); err != nil {
			return err
		}
	}
	mg.log.Info("store migrated", "from", 1, "to", 2, "memories", len(mems), "acts", len(entries))
	return mg.setLayout(ctx, 2)
}

func (mg *migrator) setLayout(ctx context.Context, v int) error {
	return mg.store.Update(ctx, func(tx store.Tx) error {
		tx.Set(KeyVersion, []byte(fmt.Sprint(v)))
		return nil
	})
}

// v2 brings a layout-2 store to layout 3: it records, for every
// file memory of every chain, that its sona may name the file's raw
// block (f/, memory/chain).
func (mg *migrator) v2(ctx context.Context) error {
	var keys [][]byte
	err := mg.store.View(func(txn store.Reader) error {
		return chain.ScanMemories(txn, func(id string, mem cid.Cid) error {
			m, err := meta.ReadMemory(txn, mem)
			if err != nil {
				return err
			}
			if f := m.Data.File; f != nil {
				keys = append(keys, chain.FileSonaKey(f.Content, id))
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
		if err := mg.store.Update(ctx, func(tx store.Tx) error {
			for _, k := range part {
				tx.Set(k, nil)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	mg.log.Info("store migrated", "from", 2, "to", 3, "file_records", len(keys))
	return mg.setLayout(ctx, 3)
}

// packBatch is how many metadata records v3 reads a transaction (a test
// sets fewer), and packBytes about how many bytes it writes in one at
// most.
var packBatch = 2000

const packBytes = 1 << 20

// v3 brings a layout-3 store to layout 4: every metadata record's
// evaluation metrics packed (meta.Marshal), a tenth of what they took. A
// binary of layout 3 would read a packed record's evaluation without its
// metrics: it refuses the store instead. The records are rewritten a
// batch a transaction, in key order; one already packed, or whose
// metrics cannot be, is left as it is.
func (mg *migrator) v3(ctx context.Context) error {
	// part is what one transaction did: set anew by each run of its
	// operation, so that a run the committer repeats counts once.
	type part struct {
		n, rewritten, wrote int
		before, after       int64
		next                []byte
	}
	var (
		total = part{next: meta.Prefix}
		last  = time.Now()
	)
	for more := true; more; {
		var p part
		if err := mg.store.Update(ctx, func(tx store.Tx) error {
			p = part{next: total.next}
			it := tx.NewIterator(store.IterOptions{Prefix: meta.Prefix, PrefetchValues: true, PrefetchSize: 256})
			defer it.Close()
			for it.Seek(p.next); it.Valid() && p.n < packBatch && p.wrote < packBytes; it.Next() {
				k := it.Item().KeyCopy(nil)
				v, err := it.Item().ValueCopy(nil)
				if err != nil {
					return err
				}
				m := &messages.MemoryMeta{}
				if err := meta.Unmarshal(v, m); err != nil {
					return fmt.Errorf("%w: metadata of %x: %v", base.ErrCorrupt, k[len(meta.Prefix):], err)
				}
				b, err := meta.Marshal(m)
				if err != nil {
					return err
				}
				p.n++
				p.before += int64(len(v))
				if len(b) < len(v) {
					tx.Set(k, b)
					p.rewritten++
					p.wrote += len(k) + len(b)
				} else {
					b = v
				}
				p.after += int64(len(b))
				p.next = append(k, 0)
			}
			more = it.Valid()
			return nil
		}); err != nil {
			return err
		}
		total = part{n: total.n + p.n, rewritten: total.rewritten + p.rewritten,
			before: total.before + p.before, after: total.after + p.after, next: p.next}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			mg.log.Info("migrating the store: packing the metadata's evaluation metrics", "records", total.n, "rewritten", total.rewritten)
		}
	}
	mg.log.Info("store migrated", "from", 3, "to", 4, "metadata_records", total.n, "rewritten", total.rewritten,
		"bytes_before", total.before, "bytes_after", total.after)
	return mg.setLayout(ctx, 4)
}
