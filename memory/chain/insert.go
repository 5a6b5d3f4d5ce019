package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// Normalize canonicalises a memory's text for dedup (Living Memory's
// normalize_fn).
type Normalize func(ctx context.Context, text string) (string, error)

// Prepare validates and encodes m. vec is m's embedding.
func (w *Writer) Prepare(m *model.Memory, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	c, block, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if len(block) > w.cfg.Store.MaxBlockBytes {
		return nil, fmt.Errorf("%w: memory of %d bytes exceeds %d", base.ErrTooLarge, len(block), w.cfg.Store.MaxBlockBytes)
	}
	return w.Prepared(m, c, block, vec, meta)
}

// PrepareBlock prepares a memory given as its encoded block.
func (w *Writer) PrepareBlock(block []byte, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	m, err := model.DecodeMemory(block)
	if err != nil {
		return nil, err
	}
	c, err := model.SumCID(model.CodecDagCBOR, block)
	if err != nil {
		return nil, err
	}
	return w.Prepared(m, c, block, vec, meta)
}

// Prepared prepares m, already encoded as block with CID c: it checks the
// embedding's dimensions and the kind (the default kind when none).
func (w *Writer) Prepared(m *model.Memory, c cid.Cid, block []byte, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	if len(vec) != w.index.Dims() {
		return nil, fmt.Errorf("%w: embedding has %d dims, the store uses %d", base.ErrInvalid, len(vec), w.index.Dims())
	}
	if meta == nil {
		meta = &messages.MemoryMeta{}
	} else {
		meta = proto.Clone(meta).(*messages.MemoryMeta)
	}
	if meta.Kind == "" {
		meta.Kind = w.cfg.DefaultKind
	}
	if _, ok := w.cfg.Kinds[meta.Kind]; !ok {
		return nil, fmt.Errorf("%w: unknown kind %q", base.ErrInvalid, meta.Kind)
	}
	return &model.Prepared{Memory: m, CID: c, Block: block, Vector: vec, Meta: meta}, nil
}

// CheckLinks verifies that what m links to is stored: every edge target a
// memory, a file's content a block. inflight reports memories appended but
// not yet durable by the caller (a chain owner), which count as stored.
// Checking before planning keeps a bad link from failing inside the store,
// where the appends planned after it would fail too.
func (w *Writer) CheckLinks(m *model.Memory, inflight func(cid.Cid) bool) error {
	return w.st.View(func(r store.Reader) error {
		for _, e := range m.Edges {
			if inflight(e.Target) {
				continue
			}
			if ok, err := w.mems.Has(r, e.Target); err != nil {
				return err
			} else if !ok {
				return EdgeNotStored(e.Target)
			}
		}
		if f := m.Data.File; f != nil && !inflight(f.Content) {
			if ok, err := r.Has(store.BlockKey(f.Content)); err != nil {
				return err
			} else if !ok {
				return FileNotStored(f.Content)
			}
		}
		return nil
	})
}

// Forgotten reports whether block c was forgotten here (it has a
// tombstone).
func (w *Writer) Forgotten(c cid.Cid) bool {
	ok := false
	_ = w.st.View(func(r store.Reader) error {
		ok, _ = r.Has(store.TombstoneKey(c))
		return nil
	})
	return ok
}

// FileNotStored is the error of a file memory whose content is not stored.
func FileNotStored(c cid.Cid) error {
	return fmt.Errorf("%w: file content %s is not stored (upload it to /files first)", base.ErrInvalid, c)
}

// EdgeNotStored is the error of an edge whose target is not a stored memory.
func EdgeNotStored(c cid.Cid) error {
	return fmt.Errorf("%w: edge target %s is not a stored memory", base.ErrInvalid, c)
}

// Duplicate describes a near-duplicate found at insert.
type Duplicate struct {
	Existing   cid.Cid
	Similarity float64
	Threshold  assoc.Threshold
}

// PrepareInsert prepares m to be inserted into a sona: it embeds it, finds
// its nearest memories in the sona, and — with dedup — checks whether the
// nearest is a near-duplicate: closer than the dedup threshold drawn from
// the sona's live distribution of nearest-neighbour similarities (β 3.0;
// bootstrap below the configured size). Only a neighbour with the same
// timestamp (or none, like the new one) can be a duplicate. A memory
// already in the sona is not a duplicate of itself: appending it is a
// no-op (existed). file, when set, is the raw block a file memory's
// content names, stored with the memory (Prepared.File).
func (w *Writer) PrepareInsert(ctx context.Context, sona string, m *model.Memory, meta *messages.MemoryMeta, dedup bool, file []byte) (*model.Prepared, *Duplicate, error) {
	text := m.Text()
	vecs, err := w.o.Embed(ctx, text)
	if err != nil {
		return nil, nil, err
	}
	p, err := w.Prepare(m, vecs[0], meta)
	if err != nil {
		return nil, nil, err
	}
	if file != nil {
		if f := m.Data.File; f == nil || store.VerifyBlock(f.Content, file) != nil {
			return nil, nil, fmt.Errorf("%w: the file given with the memory is not its content", base.ErrInvalid)
		}
		p.File = file
	}
	p.Neighbors, err = w.Neighbors(p.Vector, sona, max(1, w.cfg.Recall.SimilarNeighbors), p.CID)
	if err != nil || !dedup || len(p.Neighbors) == 0 {
		return p, nil, err
	}
	// The threshold is never below the bootstrap's (below), and without
	// normalisation a duplicate is one of the neighbours at its own
	// similarity: when the nearest is below the floor there is none, and
	// nothing more to read (the common case of an insert).
	floor := assoc.EmergentThreshold(w.cfg.Threshold, w.cfg.Threshold.DedupBeta, assoc.SimStats{}, 0)
	if w.o.Normalize == nil && p.Neighbors[0].Sim < floor.Value {
		return p, nil, nil
	}
	if in, err := w.mems.InSona(p.CID, sona); err != nil || in {
		return p, nil, err
	}
	nearest, ok, err := w.sameTimeNeighbor(p)
	if err != nil || !ok {
		return p, nil, err
	}
	sim := nearest.Sim
	if w.o.Normalize != nil {
		// Compare the normalised text with the nearest memory instead.
		norm, err := w.o.Normalize(ctx, text)
		if err != nil {
			return nil, nil, fmt.Errorf("memory: normalize: %w", err)
		}
		nv, err := w.o.Embed(ctx, norm)
		if err != nil {
			return nil, nil, err
		}
		other, err := w.mems.Vector(nearest.CID)
		if err != nil {
			return nil, nil, err
		}
		sim = base.Dot(nv[0], other)
	}
	stats, length, err := w.SimStats(sona)
	if err != nil {
		return nil, nil, err
	}
	th := assoc.EmergentThreshold(w.cfg.Threshold, w.cfg.Threshold.DedupBeta, stats, length)
	// Never below the bootstrap's: in a sona whose memories are all far
	// apart (a low, narrow distribution of nearest-neighbour similarities,
	// as the hashed embedder gives unrelated texts) the live threshold
	// would call a new memory's nearest a duplicate however unlike it is.
	if th.Value < floor.Value {
		th = floor
	}
	if sim < th.Value {
		return p, nil, nil
	}
	// Only a valid memory is a duplicate: one that links to what is not
	// stored is refused, as its append would be.
	if err := w.CheckLinks(m, func(c cid.Cid) bool { return file != nil && c == m.Data.File.Content }); err != nil {
		return nil, nil, err
	}
	return p, &Duplicate{Existing: nearest.CID, Similarity: sim, Threshold: th}, nil
}

// sameTimeNeighbor is the nearest neighbour that could be a duplicate:
// memories with different timestamps record distinct events and are never
// duplicates of each other, however alike their words.
func (w *Writer) sameTimeNeighbor(p *model.Prepared) (model.Neighbor, bool, error) {
	for _, n := range p.Neighbors {
		m, _, err := w.mems.Get(n.CID)
		if err != nil {
			return model.Neighbor{}, false, err
		}
		a, b := m.Timestamp, p.Memory.Timestamp
		if (a == nil) == (b == nil) && (a == nil || *a == *b) {
			return n, true, nil
		}
	}
	return model.Neighbor{}, false, nil
}

// Neighbors returns up to k memories of sona nearest to vec, best first,
// leaving out self and the archived: exactly among the sona's own up to
// recall.exact_scan_max of them (cheaper than the graph, and exact),
// through the graph beyond when that finds them (vector.Index.SearchIn).
// It asks the index for k and neighbourMargin more, and again for four
// times as many while those it left out took the room of k.
func (w *Writer) Neighbors(vec []float32, sona string, k int, self cid.Cid) ([]model.Neighbor, error) {
	runs := w.sonas.Runs(sona, "", false)
	for ask := k + neighbourMargin; ; ask *= 4 {
		hits := w.index.SearchIn(vec, runs, ask, w.cfg.Recall.ExactScanMax)
		out, err := w.kept(hits, sona, k, self)
		if err != nil || len(out) == k || len(hits) < ask {
			return out, err
		}
	}
}

// neighbourMargin is how many more than k neighbours Neighbors asks the
// index for at first: room for self and an archived memory or so. The
// exact search scores the float32 vector of each id that may be among
// those asked (read from a file past index.heap_vectors_mb): asking for
// sixteen where three were wanted, those reads were 13–17% of the exact
// scans' CPU in a store of 1M; at three and two more, 10% (issue 15,
// stop 110).
const neighbourMargin = 2

// kept returns the first k of hits that are sona's memories, not archived
// and not self.
func (w *Writer) kept(hits []vector.Hit, sona string, k int, self cid.Cid) ([]model.Neighbor, error) {
	var out []model.Neighbor
	err := w.st.View(func(r store.Reader) error {
		for _, h := range hits {
			c, err := base.CID(h.Key)
			if err != nil {
				return fmt.Errorf("%w: index key: %v", base.ErrCorrupt, err)
			}
			if c == self {
				continue
			}
			meta, err := w.mems.MetaIn(r, c)
			if errors.Is(err, base.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if meta.Archived || !slices.Contains(meta.Sonas, sona) {
				continue
			}
			out = append(out, model.Neighbor{CID: c, Sim: float64(h.Similarity)})
			if len(out) == k {
				break
			}
		}
		return nil
	})
	return out, err
}

// SimStats returns a sona's nearest-neighbour similarity distribution
// and its length.
func (w *Writer) SimStats(sona string) (assoc.SimStats, int64, error) {
	rec, err := w.sonas.Get(sona)
	if err != nil {
		return assoc.SimStats{}, 0, err
	}
	var stats assoc.SimStats
	err = w.st.View(func(r store.Reader) error {
		item, err := r.Item(assoc.SimStatsKey(sona))
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			stats, err = assoc.DecodeStats(v)
			return err
		})
	})
	return stats, rec.Length, err
}

// PutFile stores data as one raw block and returns its CID. With a sona,
// the block is recorded as that sona's file (see FileInSonas); the sona
// must exist.
//
// Files are raw blocks (codec raw), addressed like every block by their
// multihash. A raw block is not a memory and belongs to no chain; which
// sonas may name it as a file memory's content is recorded beside it (f/):
// the sonas it was uploaded for, and those that hold a file memory of it.
// Sona-scoped principals may only name files of their sonas, so that
// naming a CID never tells them whether another sona stored it.
func (w *Writer) PutFile(ctx context.Context, data []byte, sona string) (cid.Cid, error) {
	c, err := model.SumCID(model.CodecRaw, data)
	if err != nil {
		return cid.Undef, err
	}
	err = w.st.Update(ctx, func(tx store.Tx) error {
		if sona != "" {
			if ok, err := tx.Has(SonaKey(sona)); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("%w: sona %s", base.ErrNotFound, sona)
			}
			tx.Set(FileSonaKey(c, sona), nil)
		}
		return tx.PutBlock(c, data)
	})
	return c, err
}

// FileInSonas reports whether the raw block c is a file of a sona that
// allowed accepts: uploaded for it, or the content of one of its file
// memories.
func (w *Writer) FileInSonas(c cid.Cid, allowed func(sona string) bool) (bool, error) {
	prefix := base.Join(FileSonaPrefix, c.Hash(), []byte{0})
	found := false
	err := w.st.View(func(r store.Reader) error {
		it := r.NewIterator(store.IterOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if sona := bytes.TrimPrefix(it.Item().Key(), prefix); allowed(string(sona)) {
				found = true
				return nil
			}
		}
		return nil
	})
	return found, err
}
