package memory

import (
	"encoding/binary"
	"errors"

	"fmt"
	"slices"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// Prepare validates and encodes m. vec is m's embedding (see Self.Embed).
func (s *Self) Prepare(m *Memory, vec []float32, meta *messages.MemoryMeta) (*Prepared, error) {
	c, block, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if len(block) > s.cfg.Store.MaxBlockBytes {
		return nil, fmt.Errorf("%w: memory of %d bytes exceeds %d", ErrTooLarge, len(block), s.cfg.Store.MaxBlockBytes)
	}
	return s.prepared(m, c, block, vec, meta)
}

// PrepareBlock prepares a memory given as its encoded block.
func (s *Self) PrepareBlock(block []byte, vec []float32, meta *messages.MemoryMeta) (*Prepared, error) {
	m, err := DecodeMemory(block)
	if err != nil {
		return nil, err
	}
	c, err := SumCID(CodecDagCBOR, block)
	if err != nil {
		return nil, err
	}
	return s.prepared(m, c, block, vec, meta)
}

func (s *Self) prepared(m *Memory, c cid.Cid, block []byte, vec []float32, meta *messages.MemoryMeta) (*Prepared, error) {
	if len(vec) != s.index.Dims() {
		return nil, fmt.Errorf("%w: embedding has %d dims, the store uses %d", ErrInvalid, len(vec), s.index.Dims())
	}
	if meta == nil {
		meta = &messages.MemoryMeta{}
	} else {
		meta = proto.Clone(meta).(*messages.MemoryMeta)
	}
	if meta.Kind == "" {
		meta.Kind = s.cfg.DefaultKind
	}
	if _, ok := s.cfg.Kinds[meta.Kind]; !ok {
		return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalid, meta.Kind)
	}
	return &Prepared{Memory: m, CID: c, Block: block, Vector: vec, Meta: meta}, nil
}

// CheckLinks verifies that what m links to is stored: every edge target a
// memory, a file's content a block. inflight reports memories appended but
// not yet durable by the caller (a chain owner), which count as stored.
// Checking before planning keeps a bad link from failing inside the store,
// where the appends planned after it would fail too.
func (s *Self) CheckLinks(m *Memory, inflight func(cid.Cid) bool) error {
	return s.store.View(func(txn Reader) error {
		for _, e := range m.Edges {
			if inflight(e.Target) {
				continue
			}
			if _, err := txn.Item(metaKey(e.Target)); errors.Is(err, ErrNotFound) {
				return EdgeNotStored(e.Target)
			} else if err != nil {
				return err
			}
		}
		if f := m.Data.File; f != nil && !inflight(f.Content) {
			if _, err := txn.Item(store.BlockKey(f.Content)); errors.Is(err, ErrNotFound) {
				return FileNotStored(f.Content)
			} else if err != nil {
				return err
			}
		}
		return nil
	})
}

// FileNotStored is the error of a file memory whose content is not stored.
func FileNotStored(c cid.Cid) error {
	return fmt.Errorf("%w: file content %s is not stored (upload it to /files first)", ErrInvalid, c)
}

// EdgeNotStored is the error of an edge whose target is not a stored memory.
func EdgeNotStored(c cid.Cid) error {
	return fmt.Errorf("%w: edge target %s is not a stored memory", ErrInvalid, c)
}

// InSona reports whether memory c is (durably) in sona id.
func (s *Self) InSona(c cid.Cid, id string) (bool, error) {
	meta, err := s.Meta(c)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.Contains(meta.Sonas, id), nil
}

// AppendOp returns the store operation that carries out a: memory block,
// ACT block, metadata, embedding, chain index, head and associations, in
// one transaction. It fails with ErrChainConflict unless the chain's head is
// still a.Prev, so a chain never forks, and with ErrInvalid when an edge
// or file points at nothing stored.
func (s *Self) AppendOp(a *Append) Op {
	return func(tx Tx) error {
		raw, err := tx.Get(sonaKey(a.Sona))
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: sona %s", ErrNotFound, a.Sona)
		}
		if err != nil {
			return err
		}
		rec := &messages.Sona{}
		if err := proto.Unmarshal(raw, rec); err != nil {
			return fmt.Errorf("%w: sona record: %v", ErrCorrupt, err)
		}
		if a.Item.ExpectSeq != nil && *a.Item.ExpectSeq != a.Seq {
			return fmt.Errorf("%w: sona %s: append planned at seq %d, expected at %d", ErrChainConflict, a.Sona, a.Seq, *a.Item.ExpectSeq)
		}
		if rec.Length != a.Seq || !sameHead(rec.Head, a.Prev) {
			return fmt.Errorf("%w: sona %s is at seq %d, append expected %d", ErrChainConflict, a.Sona, rec.Length, a.Seq)
		}
		item := a.Item
		for _, e := range item.Memory.Edges {
			if item.Replicated {
				break // checked by the chain's owner; the target may be another member's
			}
			ok, err := tx.Has(metaKey(e.Target))
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
			tx.Set(fileSonaKey(f.Content, a.Sona), nil)
		}

		meta := &messages.MemoryMeta{}
		raw, err = tx.Get(metaKey(item.CID))
		isNew := errors.Is(err, ErrNotFound)
		var logSeq uint64
		switch {
		case isNew:
			meta = proto.Clone(item.Meta).(*messages.MemoryMeta)
			if logSeq, err = nextLogSeq(tx); err != nil {
				return err
			}
			tx.Set(logKey(logSeq), item.CID.Bytes())
			meta.Seq = logSeq
			meta.Sonas = []string{a.Sona}
			meta.CreatedAt = a.Now
			meta.LastAccessTick = a.Seq + 1
			if ttl := s.cfg.Kinds[meta.Kind].TTL.D(); ttl > 0 && meta.ExpiresAt == 0 {
				meta.ExpiresAt = a.Now + int64(ttl.Seconds())
			}
			if err := tx.PutBlock(item.CID, item.Block); err != nil {
				return err
			}
			tx.Set(vectorKey(item.CID), encodeVector(item.Vector))
			if meta.Insight != nil {
				tx.Set(insightKey(logSeq), item.CID.Bytes())
			}
			if category, ok := s.Anchors.Judge(item, meta); ok {
				err := anchor.Put(tx, logSeq, &messages.Anchor{Cid: item.CID.String(), Category: category, Time: a.Now, Sona: a.Sona})
				if err != nil {
					return err
				}
			}
		case err != nil:
			return err
		default:
			if err := proto.Unmarshal(raw, meta); err != nil {
				return fmt.Errorf("%w: metadata of %s: %v", ErrCorrupt, item.CID, err)
			}
			if slices.Contains(meta.Sonas, a.Sona) {
				return fmt.Errorf("%w: %s is already in sona %s", ErrChainConflict, item.CID, a.Sona)
			}
			meta.Sonas = append(meta.Sonas, a.Sona)
			meta.Joins = append(meta.Joins, &messages.SonaJoin{Sona: a.Sona, AgentId: item.Meta.AgentId,
				Kind: item.Meta.Kind, Labels: item.Meta.Labels, JoinedAt: a.Now})
		}
		metaRaw, err := proto.Marshal(meta)
		if err != nil {
			return err
		}
		tx.Set(metaKey(item.CID), metaRaw)
		if err := tx.PutBlock(a.Act, a.ActBlock); err != nil {
			return err
		}
		if !isNew {
			if logSeq, err = currentLogSeq(tx); err != nil {
				return err
			}
		}
		tx.Set(chainKey(a.Sona, a.Seq), encodeChainEntry(a.Act, item.CID, logSeq))

		prevMemory := rec.LastMemory
		rec.Head = proto.String(a.Act.String())
		rec.Length = a.Seq + 1
		rec.LastMemory = proto.String(item.CID.String())
		recRaw, err := proto.Marshal(rec)
		if err != nil {
			return err
		}
		tx.Set(sonaKey(a.Sona), recRaw)

		if err := s.appendAssociations(tx, a, prevMemory); err != nil {
			return err
		}
		if err := archiveIn(tx, a.Sona, item.Archive); err != nil {
			return err
		}
		if item.PageOf != nil {
			if err := tiers.EnqueuePage(tx, a.Sona, *item.PageOf, item.CID, a.Now); err != nil {
				return err
			}
		}

		tx.OnCommit(func() {
			if item.Archive == nil && meta.Insight == nil {
				s.lastActivity.Store(a.Now) // the heartbeat's own writes are not activity
			}
			doc := s.docOf(item.CID, item.Memory, meta.Sonas)
			var textPos uint64
			vid := s.index.Add(item.CID.KeyString(), item.Vector) // the existing id when not new
			if isNew {
				s.memories.Add(1)
				textPos = s.text.enqueue(logSeq, doc)
			} else {
				textPos = s.text.enqueue(0, doc)
			}
			s.smu.Lock()
			st := &sonaState{rec: rec, textPos: textPos}
			if old := s.sonas[a.Sona]; old != nil {
				st.members, st.mean = old.members, old.mean
			}
			st.mean, st.centroid = st.mean.add(item.Vector)
			st.members = append(st.members, vid)
			s.sonas[a.Sona] = st
			s.smu.Unlock()
		})
		return nil
	}
}

func sameHead(head *string, prev *cid.Cid) bool {
	if head == nil || *head == "" {
		return prev == nil
	}
	return prev != nil && prev.String() == *head
}

// currentLogSeq is the last position of the insertion log.
func currentLogSeq(tx Tx) (uint64, error) {
	v, err := tx.Get(store.KeyMemSeq)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: insertion log counter", ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// nextLogSeq takes the next insertion-log position.
func nextLogSeq(tx Tx) (uint64, error) {
	n, err := currentLogSeq(tx)
	if err != nil {
		return 0, err
	}
	tx.Set(store.KeyMemSeq, base.U64(n+1))
	return n + 1, nil
}

// appendAssociations records the associations a new member of a chain
// brings: sequential to the sona's previous memory, its edges (causal or
// related, strength relative to its strongest edge), and similar to its
// strong neighbours — those at least as close as the sona's typical
// nearest neighbour — whose distribution it then joins.
func (s *Self) appendAssociations(tx Tx, a *Append, prevMemory *string) error {
	item := a.Item
	var links []Link
	if prevMemory != nil {
		prev, err := cid.Decode(*prevMemory)
		if err != nil {
			return fmt.Errorf("%w: last memory of %s: %v", ErrCorrupt, a.Sona, err)
		}
		links = append(links, Link{Target: prev, Type: AssocSequential, Strength: 1})
	}
	edgeType := item.EdgeType
	if edgeType == "" {
		edgeType = AssocRelated
	}
	best := 0.0
	for _, e := range item.Memory.Edges {
		best = max(best, e.Weight)
	}
	for _, e := range item.Memory.Edges {
		strength := 1.0
		if best > 0 {
			strength = e.Weight / best
		}
		links = append(links, Link{Target: e.Target, Type: edgeType, Strength: strength})
	}
	if len(item.Neighbors) > 0 {
		stats := SimStats{}
		if raw, err := tx.Get(assoc.SimStatsKey(a.Sona)); err == nil {
			if stats, err = assoc.DecodeStats(raw); err != nil {
				return err
			}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		strong := EmergentThreshold(s.cfg.Threshold, 1, stats, a.Seq)
		for i, n := range item.Neighbors {
			if i == s.cfg.Recall.SimilarNeighbors || n.Sim < strong.Value {
				break
			}
			links = append(links, Link{Target: n.CID, Type: AssocSimilar, Strength: n.Sim})
		}
		stats.Add(item.Neighbors[0].Sim)
		tx.Set(assoc.SimStatsKey(a.Sona), assoc.EncodeStats(stats))
	}
	return assoc.Put(tx, item.CID, links, a.Now)
}
