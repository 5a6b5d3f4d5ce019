package chain

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// Written is an append as the rest of memory/ sees it: what it wrote to
// the chain, handed to the contributions inside its transaction and to
// Options.OnAppended after it committed.
type Written struct {
	*model.Append
	// Meta is the memory's metadata as the append wrote it.
	Meta *messages.MemoryMeta
	// New: the memory came to exist with this append (else an existing
	// memory joined another sona).
	New bool
	// LogSeq is the memory's insertion-log position when New, else the
	// log's end.
	LogSeq uint64
	// Prev is the sona's memory before this one (nil: the chain was
	// empty).
	Prev *cid.Cid
	// ID is the memory's vector id (set once committed: OnAppended).
	ID uint64
}

// Heartbeat reports the heartbeat's own writes — a merge (it archives its
// sources) or an insight — which are not activity.
func (w *Written) Heartbeat() bool { return w.Item.Archive != nil || w.Meta.Insight != nil }

// A Contribution is another subsystem's part of an append (perkeep's
// populators): its writes, in the append's transaction, after the chain's
// own. An error fails the whole append, which then writes nothing.
type Contribution func(tx store.Tx, w *Written) error

// Options configure a Writer.
type Options struct {
	Config config.Config
	// Embed embeds texts in the store's space (PrepareInsert, the
	// backbone).
	Embed Embed
	// Normalize, when set, canonicalises a new memory's text before it is
	// compared with its nearest neighbour for dedup.
	Normalize Normalize
	// Contributions add the other subsystems' writes to every append, in
	// this order.
	Contributions []Contribution
	// OnAppended, when set, is told of every committed append, after the
	// vector index and the registry took it and before the append is
	// acknowledged, on the committer's goroutine: keep it short.
	OnAppended func(w *Written)
}

// Writer prepares memories and carries out the appends their chains'
// owners plan (model.PlanAppend): Op is an append's one transaction.
type Writer struct {
	st    *store.Store
	sonas *Sonas
	mems  *meta.Store
	index *vector.Index
	cfg   config.Config
	o     Options
	// recs are the sonas' records as the commits left them: every append
	// checks its plan against its sona's in the committer (readPlanned),
	// where a read from Badger waits for every other write.
	recs *store.Records
}

// sonaRecords is how many sonas' records the writer keeps (~150 bytes
// each).
const sonaRecords = 1 << 15

// NewWriter writes the chains of the sonas in st; mems reads memories and
// index is the vector index the appends add to.
func NewWriter(st *store.Store, sonas *Sonas, mems *meta.Store, index *vector.Index, o Options) *Writer {
	w := &Writer{st: st, sonas: sonas, mems: mems, index: index, cfg: o.Config, o: o, recs: store.NewRecords(sonaRecords, isSonaKey)}
	st.Subscribe(w.recs.Committed)
	return w
}

// CacheStats are the reads of the cache of the sonas' records.
func (w *Writer) CacheStats() store.CacheStats { return w.recs.Stats() }

// isSonaKey reports whether key is a sona's record's (SonaKey).
func isSonaKey(key string) bool { return strings.HasPrefix(key, string(SonaPrefix)) }

// Op returns the store operation that carries out a: memory block, ACT
// block, metadata, embedding, insertion log, chain entry, head, the file
// memory's f/ record and the contributions, in one transaction. It fails
// with ErrChainConflict unless the chain's head is still a.Prev (so a
// chain never forks) and when the memory already is in the sona, and with
// ErrInvalid when an edge or file points at nothing stored.
func (w *Writer) Op(a *model.Append) store.Op {
	if a.Item.Forgotten != nil {
		return w.OpForgotten(a, a.Item.Forgotten)
	}
	return func(tx store.Tx) error {
		rec, err := w.readPlanned(tx, a)
		if err != nil {
			return err
		}
		if err := w.checkLinksIn(tx, a); err != nil {
			return err
		}
		if err := recordRequest(tx, a); err != nil {
			return err
		}
		item := a.Item
		wr := &Written{Append: a}
		raw, err := tx.Get(meta.Key(item.CID))
		switch {
		case errors.Is(err, base.ErrNotFound):
			wr.New = true
			if wr.LogSeq, err = nextLogSeq(tx); err != nil {
				return err
			}
			wr.Meta = firstMeta(a, wr.LogSeq, w.cfg.Kinds[item.Meta.Kind].TTL.D())
			tx.Set(LogKey(wr.LogSeq), item.CID.Bytes())
			if err := tx.PutBlock(item.CID, item.Block); err != nil {
				return err
			}
			tx.Set(meta.VectorKey(item.CID), meta.EncodeVector(item.Vector))
		case err != nil:
			return err
		default:
			wr.Meta = &messages.MemoryMeta{}
			if err := meta.Unmarshal(raw, wr.Meta); err != nil {
				return fmt.Errorf("%w: metadata of %s: %v", base.ErrCorrupt, item.CID, err)
			}
			// The record written back holds the current hot state, as
			// meta.Write's do (the metadata cache relies on it).
			if err := meta.MergeHot(tx, item.CID, wr.Meta); err != nil {
				return err
			}
			if err := join(wr.Meta, a); err != nil {
				return err
			}
			if wr.LogSeq, err = currentLogSeq(tx); err != nil {
				return err
			}
		}
		if err := meta.Put(tx, item.CID, wr.Meta); err != nil {
			return err
		}
		if err := tx.PutBlock(a.Act, a.ActBlock); err != nil {
			return err
		}
		tx.Set(EntryKey(a.Sona, a.Seq), EncodeEntry(a.Act, item.CID, wr.LogSeq))
		if wr.Prev, err = advance(rec, a); err != nil {
			return err
		}
		if err := store.SetProto(tx, SonaKey(a.Sona), rec); err != nil {
			return err
		}
		for _, contribute := range w.o.Contributions {
			if err := contribute(tx, wr); err != nil {
				return err
			}
		}
		tx.OnCommit(func() {
			if wr.New && item.Memory != nil {
				w.mems.Stored(item.CID, item.Memory) // its block was verified by PutBlock
			}
			vid := w.index.Add(item.CID.KeyString(), item.Vector) // the existing id when not new
			w.sonas.appended(a.Sona, rec, vid, item.Vector)
			wr.ID = vid
			if w.o.OnAppended != nil {
				w.o.OnAppended(wr)
			}
		})
		return nil
	}
}

// readPlanned reads the record of a's sona and checks that a extends its
// chain (checkPlan).
func (w *Writer) readPlanned(tx store.Tx, a *model.Append) (*messages.Sona, error) {
	raw, err := w.recs.Get(tx, SonaKey(a.Sona))
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("%w: sona %s", base.ErrNotFound, a.Sona)
	}
	if err != nil {
		return nil, err
	}
	rec := &messages.Sona{}
	if err := proto.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("%w: sona record: %v", base.ErrCorrupt, err)
	}
	return rec, checkPlan(rec, a)
}

// checkPlan checks that a extends the chain whose record is rec, at the
// seq it expected.
func checkPlan(rec *messages.Sona, a *model.Append) error {
	if a.Item.ExpectSeq != nil && *a.Item.ExpectSeq != a.Seq {
		return fmt.Errorf("%w: sona %s: append planned at seq %d, expected at %d", base.ErrChainConflict, a.Sona, a.Seq, *a.Item.ExpectSeq)
	}
	if rec.Length != a.Seq || !sameHead(rec.Head, a.Prev) {
		return fmt.Errorf("%w: sona %s is at seq %d, append expected %d", base.ErrChainConflict, a.Sona, rec.Length, a.Seq)
	}
	return nil
}

func sameHead(head *string, prev *cid.Cid) bool {
	if head == nil || *head == "" {
		return prev == nil
	}
	return prev != nil && prev.String() == *head
}

// checkLinksIn checks, in the append's transaction, that the memory's edge
// targets are stored memories and its file's content a stored block (the
// one the append carries counts), and records that the sona may name the
// file.
func (w *Writer) checkLinksIn(tx store.Tx, a *model.Append) error {
	item := a.Item
	for _, e := range item.Memory.Edges {
		if item.Replicated {
			break // checked by the chain's owner; the target may be another member's
		}
		ok, err := w.mems.Has(tx, e.Target)
		if err == nil && !ok && item.Imported {
			// An export keeps the edges to its forgotten memories.
			ok, err = tx.Has(store.TombstoneKey(e.Target))
		}
		if err != nil {
			return err
		}
		if !ok {
			return EdgeNotStored(e.Target)
		}
	}
	if f := item.Memory.Data.File; f != nil {
		if item.File != nil {
			if err := tx.PutBlock(f.Content, item.File); err != nil {
				return err
			}
		}
		ok, err := tx.Has(store.BlockKey(f.Content))
		if err != nil {
			return err
		}
		if !ok {
			return FileNotStored(f.Content)
		}
		tx.Set(FileSonaKey(f.Content, a.Sona), nil)
	}
	return nil
}

// firstMeta is the metadata of a memory that comes to exist with a, at
// insertion-log position logSeq; a kind with a time to live expires.
func firstMeta(a *model.Append, logSeq uint64, ttl time.Duration) *messages.MemoryMeta {
	m := proto.Clone(a.Item.Meta).(*messages.MemoryMeta)
	m.Seq = logSeq
	m.Sonas = []string{a.Sona}
	m.CreatedAt = a.Now
	m.LastAccessTick = a.Seq + 1
	if ttl > 0 && m.ExpiresAt == 0 {
		m.ExpiresAt = a.Now + int64(ttl.Seconds())
	}
	return m
}

// join adds a's sona to the metadata m of a stored memory, with how it
// joined.
func join(m *messages.MemoryMeta, a *model.Append) error {
	if slices.Contains(m.Sonas, a.Sona) {
		return fmt.Errorf("%w: %s is already in sona %s", base.ErrChainConflict, a.Item.CID, a.Sona)
	}
	in := a.Item.Meta
	m.Sonas = append(m.Sonas, a.Sona)
	m.Joins = append(m.Joins, &messages.SonaJoin{Sona: a.Sona, AgentId: in.AgentId,
		Kind: in.Kind, Labels: in.Labels, JoinedAt: a.Now})
	return nil
}

// advance moves the sona's record rec past a, and returns its memory
// before a.
func advance(rec *messages.Sona, a *model.Append) (*cid.Cid, error) {
	var prev *cid.Cid
	if rec.LastMemory != nil {
		c, err := cid.Decode(*rec.LastMemory)
		if err != nil {
			return nil, fmt.Errorf("%w: last memory of %s: %v", base.ErrCorrupt, a.Sona, err)
		}
		prev = &c
	}
	rec.Head = proto.String(a.Act.String())
	rec.Length = a.Seq + 1
	rec.LastMemory = proto.String(a.Item.CID.String())
	return prev, nil
}

// OpForgotten returns the store operation that appends a whose memory was
// forgotten (its content is gone; a.Item carries only its CID): the ACT
// block, the chain entry and the head, and — when this store lacks it —
// the memory's tombstone t and an insertion-log position; no block,
// metadata or embedding. A copy of a
// chain (a cluster replica catching up, an import) holds a forgotten
// memory's place in the chain exactly as a store that forgot it after the
// append does. The ACT block must hash to a.Act and name a's sona, seq,
// previous ACT and memory; the store must not hold the memory's metadata
// (forget it first).
func (w *Writer) OpForgotten(a *model.Append, t *messages.Tombstone) store.Op {
	return func(tx store.Tx) error {
		if err := CheckForgottenAct(a); err != nil {
			return err
		}
		rec, err := w.readPlanned(tx, a)
		if err != nil {
			return err
		}
		mem := a.Item.CID
		if ok, err := tx.Has(meta.Key(mem)); err != nil {
			return err
		} else if ok {
			return fmt.Errorf("%w: %s is stored here: forget it before appending it as forgotten", base.ErrChainConflict, mem)
		}
		known, err := tx.Has(store.TombstoneKey(mem))
		if err != nil {
			return err
		}
		var logSeq uint64
		if known {
			logSeq, err = currentLogSeq(tx)
		} else {
			// New here: it takes its insertion-log position, as the
			// memory did where it was stored (a forget keeps the log's
			// entry), so an import's log matches its export's.
			if t == nil || t.Cid != mem.String() {
				return fmt.Errorf("%w: %s is not forgotten here and comes without its tombstone", base.ErrInvalid, mem)
			}
			if err = store.SetProto(tx, store.TombstoneKey(mem), t); err != nil {
				return err
			}
			if logSeq, err = nextLogSeq(tx); err == nil {
				tx.Set(LogKey(logSeq), mem.Bytes())
			}
		}
		if err != nil {
			return err
		}
		if err := tx.PutBlock(a.Act, a.ActBlock); err != nil {
			return err
		}
		tx.Set(EntryKey(a.Sona, a.Seq), EncodeEntry(a.Act, mem, logSeq))
		if _, err := advance(rec, a); err != nil {
			return err
		}
		if err := store.SetProto(tx, SonaKey(a.Sona), rec); err != nil {
			return err
		}
		tx.OnCommit(func() { w.sonas.advanced(a.Sona, rec) })
		return nil
	}
}

// CheckForgottenAct checks that a's ACT block is the ACT a names: it
// hashes to a.Act and holds a's sona, memory, previous ACT and seq.
func CheckForgottenAct(a *model.Append) error {
	got, err := a.Act.Prefix().Sum(a.ActBlock)
	if err != nil {
		return fmt.Errorf("%w: ACT %s: %v", base.ErrInvalid, a.Act, err)
	}
	if !got.Equals(a.Act) {
		return fmt.Errorf("%w: the block of ACT %s hashes to %s", base.ErrCorrupt, a.Act, got)
	}
	act, err := model.DecodeAct(a.ActBlock)
	if err != nil {
		return err
	}
	if act.Sona != a.Sona || act.Seq != a.Seq || !act.Memory.Equals(a.Item.CID) || !sameCID(act.Prev, a.Prev) {
		return fmt.Errorf("%w: ACT %s is not seq %d of sona %s naming %s", base.ErrInvalid, a.Act, a.Seq, a.Sona, a.Item.CID)
	}
	return nil
}

func sameCID(a, b *cid.Cid) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equals(*b)
}
