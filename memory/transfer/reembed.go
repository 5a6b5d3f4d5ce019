package transfer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// ReembedReport says what Reembed rewrote.
type ReembedReport struct {
	From, To string // embedder identities
	Memories int    // v/: memory embeddings, from their blocks' text
	Sonas    int    // k/: sona name embeddings
	Tiers    int    // tier records (pages, segments, persona, inboxes)
	Versions int    // consensus versions (p/, r/)
}

// ReembedStore is the store Reembed rewrites.
type ReembedStore interface {
	Store
	// EmbedderID is the identity of the store's embedding space.
	EmbedderID() (string, error)
}

// Reembed moves the store st into emb's embedding space: every
// memory is embedded again from its block in the DAG, and so are the sona
// names, the consensus versions and the MemoryOS tiers' statements; page
// embeddings are recomputed from their memories' and segment embeddings
// from their pages'. The store's embedder identity is set last, so an
// interrupted run leaves a store that is still refused and can be run
// again. progress hears the memories done. Nothing else may use the
// store meanwhile: its derived state (the vector index, the sonas'
// centroids) is rebuilt when it is opened next.
func Reembed(ctx context.Context, st ReembedStore, records Records, emb llm.Embedder, progress func(done, total int)) (ReembedReport, error) {
	rep := ReembedReport{To: emb.ID()}
	var err error
	if rep.From, err = st.EmbedderID(); err != nil {
		return rep, err
	}
	embed := func(texts []string) ([][]float32, error) {
		vecs, err := emb.Embed(ctx, texts)
		if err != nil {
			return nil, err
		}
		if len(vecs) != len(texts) {
			return nil, fmt.Errorf("memory: embedder returned %d vectors for %d texts", len(vecs), len(texts))
		}
		for _, v := range vecs {
			if len(v) != emb.Dims() || !llm.Normalize(v) {
				return nil, fmt.Errorf("memory: embedder returned a vector of %d dims (want %d) or a zero one", len(v), emb.Dims())
			}
		}
		return vecs, nil
	}

	// Memories: every memory with metadata, from its block.
	var mems []cid.Cid
	if err := st.View(func(txn store.Reader) error {
		return records.Memories(txn, func(c cid.Cid) error {
			mems = append(mems, c)
			return nil
		})
	}); err != nil {
		return rep, err
	}
	vectors := make(map[cid.Cid][]float32, len(mems))
	const batch = 128
	for start := 0; start < len(mems); start += batch {
		part := mems[start:min(start+batch, len(mems))]
		texts := make([]string, len(part))
		for i, c := range part {
			block, err := st.Block(c)
			if err != nil {
				return rep, err
			}
			m, err := model.DecodeMemory(block)
			if err != nil {
				return rep, fmt.Errorf("%w: memory %s: %v", base.ErrCorrupt, c, err)
			}
			texts[i] = m.Text()
		}
		vecs, err := embed(texts)
		if err != nil {
			return rep, err
		}
		if err := st.Update(ctx, func(tx store.Tx) error {
			for i, c := range part {
				records.SetVector(tx, c, vecs[i])
				vectors[c] = vecs[i]
			}
			return nil
		}); err != nil {
			return rep, err
		}
		rep.Memories += len(part)
		if progress != nil {
			progress(rep.Memories, len(mems))
		}
	}

	// Sona names.
	var sonas []*messages.Sona
	if err := st.View(func(txn store.Reader) error {
		sonas, err = records.Sonas(txn)
		return err
	}); err != nil {
		return rep, err
	}
	for _, rec := range sonas {
		vecs, err := embed([]string{rec.Name})
		if err != nil {
			return rep, err
		}
		if err := st.Update(ctx, func(tx store.Tx) error { records.SetNameVector(tx, rec.Uuid, vecs[0]); return nil }); err != nil {
			return rep, err
		}
		rep.Sonas++
	}

	// Records holding embeddings: consensus (p/, r/) and tiers (t/). Pages
	// first (segments are the mean of theirs), then the rest.
	type record struct {
		key []byte
		msg proto.Message
	}
	var pages, others []record
	readAll := func(prefix []byte, newMsg func(k []byte) proto.Message, into *[]record, filter func(k []byte) bool) error {
		return st.View(func(txn store.Reader) error {
			return store.Scan(txn, prefix, func(k, v []byte) error {
				if filter != nil && !filter(k) {
					return nil
				}
				m := newMsg(k)
				if m == nil {
					return nil
				}
				if err := proto.Unmarshal(v, m); err != nil {
					return fmt.Errorf("%w: %q: %v", base.ErrCorrupt, k, err)
				}
				*into = append(*into, record{bytes.Clone(k), m})
				return nil
			})
		})
	}
	tierKind := func(k []byte) byte {
		_, rest, ok := bytes.Cut(k[len(tiers.KeyPrefix):], []byte{0})
		if !ok || len(rest) == 0 {
			return 0
		}
		return rest[0]
	}
	tierMsg := func(k []byte) proto.Message {
		switch tierKind(k) {
		case 's':
			return &messages.StmState{}
		case 'p':
			return &messages.Page{}
		case 'g':
			return &messages.Segment{}
		case 'l':
			return &messages.Persona{}
		case 'i':
			return &messages.TierWork{}
		}
		return nil
	}
	if err := errors.Join(
		readAll(tiers.KeyPrefix, tierMsg, &pages, func(k []byte) bool { return tierKind(k) == 'p' }),
		readAll(tiers.KeyPrefix, tierMsg, &others, func(k []byte) bool { return tierKind(k) != 'p' }),
		readAll(consensus.KeyPending, func([]byte) proto.Message { return &messages.PendingConcept{} }, &others, nil),
		readAll(consensus.KeyConflict, func([]byte) proto.Message { return &messages.Conflict{} }, &others, nil),
	); err != nil {
		return rep, err
	}
	// Segment sums of the re-embedded pages, by sona and segment id.
	type segKey struct {
		sona string
		id   uint64
	}
	sums := map[segKey][]float32{}
	counts := map[segKey]int{}
	pageVec := func(p *messages.Page) []float32 {
		v := make([]float32, emb.Dims())
		for _, ref := range []string{p.Q, p.R} {
			if c, err := cid.Decode(ref); err == nil {
				for i, f := range vectors[c] {
					v[i] += f
				}
			}
		}
		if !llm.Normalize(v) {
			v[0] = 1
		}
		return v
	}
	var rewrite func(m protoreflect.Message, sona string) error
	rewrite = func(m protoreflect.Message, sona string) error {
		switch x := m.Interface().(type) {
		case *messages.Page: // a mid-term page: its embedding kept as floats until written
			if len(x.Embedding) > 0 || len(x.Embedding8) > 0 {
				x.Embedding, x.Embedding8 = pageVec(x), nil
			}
		case *messages.Fact:
			if len(x.Embedding) > 0 {
				vecs, err := embed([]string{x.Text})
				if err != nil {
					return err
				}
				x.Embedding = vecs[0]
			}
		case *messages.Version:
			if len(x.Embedding) > 0 {
				vecs, err := embed([]string{x.Content})
				if err != nil {
					return err
				}
				x.Embedding = vecs[0]
				rep.Versions++
			}
		case *messages.Segment:
			if len(x.Embedding) == 0 && len(x.Embedding8) == 0 {
				break
			}
			mean := make([]float32, emb.Dims())
			if sum, ok := sums[segKey{sona, x.Id}]; ok {
				for i, f := range sum {
					mean[i] = f / float32(counts[segKey{sona, x.Id}])
				}
			}
			x.Embedding, x.Embedding8 = nil, tiers.PackEmbedding(mean)
		}
		var err error
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.Kind() != protoreflect.MessageKind:
			case fd.IsList():
				for i := 0; i < v.List().Len() && err == nil; i++ {
					err = rewrite(v.List().Get(i).Message(), sona)
				}
			case !fd.IsMap():
				err = rewrite(v.Message(), sona)
			}
			return err == nil
		})
		return err
	}
	sonaOf := func(k []byte) string {
		if !bytes.HasPrefix(k, tiers.KeyPrefix) {
			return ""
		}
		id, _, _ := bytes.Cut(k[len(tiers.KeyPrefix):], []byte{0})
		return string(id)
	}
	for _, r := range pages {
		if err := rewrite(r.msg.ProtoReflect(), sonaOf(r.key)); err != nil {
			return rep, err
		}
		p := r.msg.(*messages.Page)
		sona := sonaOf(r.key)
		seg := binary.BigEndian.Uint64(r.key[len(tiers.PagePrefix(sona, 0))-8:])
		k := segKey{sona, seg}
		if sums[k] == nil {
			sums[k] = make([]float32, emb.Dims())
		}
		for i, f := range p.Embedding {
			sums[k][i] += f
		}
		counts[k]++
		if len(p.Embedding) > 0 {
			p.Embedding, p.Embedding8 = nil, tiers.PackEmbedding(p.Embedding)
		}
	}
	for _, r := range others {
		if err := rewrite(r.msg.ProtoReflect(), sonaOf(r.key)); err != nil {
			return rep, err
		}
	}
	all := append(pages, others...)
	for start := 0; start < len(all); start += batch {
		part := all[start:min(start+batch, len(all))]
		if err := st.Update(ctx, func(tx store.Tx) error {
			for _, r := range part {
				raw, err := proto.Marshal(r.msg)
				if err != nil {
					return err
				}
				tx.Set(r.key, raw)
			}
			return nil
		}); err != nil {
			return rep, err
		}
	}
	for _, r := range all {
		if bytes.HasPrefix(r.key, tiers.KeyPrefix) {
			rep.Tiers++
		}
	}
	// Similarity statistics were cosines in the old space: start afresh
	// (the emergent thresholds bootstrap until they fill again).
	var stats [][]byte
	if err := st.View(func(txn store.Reader) error {
		return store.Keys(txn, assoc.KeySimStats, func(k []byte) { stats = append(stats, bytes.Clone(k)) })
	}); err != nil {
		return rep, err
	}
	return rep, st.Update(ctx, func(tx store.Tx) error {
		for _, k := range stats {
			tx.Delete(k)
		}
		tx.Set(store.KeyEmbedder, []byte(emb.ID()))
		return nil
	})
}
