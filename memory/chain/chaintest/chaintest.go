// Package chaintest builds memory/chain over a store for the tests of the
// packages that follow the chains: the registry, the writer and the
// backbone wired as the composition root wires them, with the hashed
// embedder, and owners that append to a sona as its actor does.
package chaintest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
	"github.com/memoria-ai/memoria/messages"
)

// Epoch is the fake clock's start.
var Epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// Chains is memory/chain over a store.
type Chains struct {
	T        testing.TB
	Store    *store.Store
	Memories *meta.Store
	Index    *vector.Index
	Sonas    *chain.Sonas
	Writer   *chain.Writer
	Backbone *chain.Backbone
	Clock    *clock.Fake
	// Embed embeds as the writer does.
	Embed chain.Embed

	mu       sync.Mutex
	appended []*chain.Written
}

// Open opens an in-memory store and builds the chains over it; o's
// Config (default: config.Default()), Contributions and Normalize are
// used, its Embed and OnAppended are the harness's.
func Open(t testing.TB, o chain.Options) *Chains {
	t.Helper()
	if o.Config.Kinds == nil {
		o.Config = config.Default()
	}
	st, err := store.OpenMemory(store.OptionsOf(o.Config.Store))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(t, st, o)
}

// New builds the chains over st (loaded from it) and closes their vector
// index when the test ends.
func New(t testing.TB, st *store.Store, o chain.Options) *Chains {
	t.Helper()
	if o.Config.Kinds == nil {
		o.Config = config.Default()
	}
	c := &Chains{T: t, Store: st, Clock: clock.NewFake(Epoch)}
	emb := llm.NewHashedEmbedder(llm.DefaultDims)
	c.Embed = func(ctx context.Context, texts ...string) ([][]float32, error) {
		vecs, err := emb.Embed(ctx, texts)
		for _, v := range vecs {
			llm.Normalize(v)
		}
		return vecs, err
	}
	o.Embed = c.Embed
	o.OnAppended = func(w *chain.Written) {
		c.mu.Lock()
		c.appended = append(c.appended, w)
		c.mu.Unlock()
	}
	c.Memories = meta.New(st, 64, o.Config.Recall)
	c.Index = vector.New(vector.Options{Dims: emb.Dims(), Clock: c.Clock})
	t.Cleanup(c.Index.Close)
	c.Sonas = chain.NewSonas(st, o.Embed, c.Clock, emb.Dims())
	c.Writer = chain.NewWriter(st, c.Sonas, c.Memories, c.Index, o)
	c.Backbone = chain.NewBackbone(st, c.Sonas, c.Writer, o.Embed, c.Clock)
	err := st.View(func(r store.Reader) error {
		if err := store.Scan(r, meta.VectorPrefix, func(k, v []byte) error {
			vec, err := meta.DecodeVector(v)
			c.Index.Add(string(k[len(meta.VectorPrefix):]), vec)
			return err
		}); err != nil {
			return err
		}
		if err := c.Sonas.Load(r); err != nil {
			return err
		}
		if err := c.Backbone.Load(r); err != nil {
			return err
		}
		return c.Sonas.LoadMembers(r, c.Index)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Appended is what OnAppended was told so far.
func (c *Chains) Appended() []*chain.Written {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*chain.Written(nil), c.appended...)
}

// Owner plays a sona's actor: it appends memories one after the other.
type Owner struct {
	C    *Chains
	Sona string
	Head *cid.Cid
	N    int64
}

// Owner creates a sona called name and returns its owner.
func (c *Chains) Owner(name string) *Owner {
	c.T.Helper()
	rec, err := c.Sonas.Create(context.Background(), name)
	if err != nil {
		c.T.Fatal(err)
	}
	return &Owner{C: c, Sona: rec.Uuid}
}

// OwnerOf owns the existing sona id from its committed head.
func (c *Chains) OwnerOf(id string) *Owner {
	c.T.Helper()
	rec, err := c.Sonas.State(id)
	if err != nil {
		c.T.Fatal(err)
	}
	return &Owner{C: c, Sona: id, N: rec.Length, Head: rec.Head}
}

// TryAdd prepares m and appends it, waiting until it is durable.
func (o *Owner) TryAdd(m *model.Memory, md *messages.MemoryMeta) (cid.Cid, error) {
	return Append(o.C.Store, o.C.Writer, o.C.Embed, o.C.Clock.Now().Unix(), o.Sona, &o.Head, &o.N, m, md)
}

// Append prepares m and appends it through w to the chain of sona whose
// head and length are *head and *n, at unix second now, waiting until it
// is durable; it moves *head and *n past the append. It is an owner's
// append, for the tests that play a sona's actor over their own parts.
func Append(st *store.Store, w *chain.Writer, embed chain.Embed, now int64, sona string, head **cid.Cid, n *int64, m *model.Memory, md *messages.MemoryMeta) (cid.Cid, error) {
	ctx := context.Background()
	vecs, err := embed(ctx, m.Text())
	if err != nil {
		return cid.Undef, err
	}
	p, err := w.Prepare(m, vecs[0], md)
	if err != nil {
		return cid.Undef, err
	}
	plan, err := model.PlanAppend(sona, *head, *n, p, now)
	if err != nil {
		return cid.Undef, err
	}
	if err := st.Update(ctx, w.Op(plan)); err != nil {
		return cid.Undef, err
	}
	*head, *n = plan.Next()
	return p.CID, nil
}

// Text appends a text memory with edges and returns its CID.
func (o *Owner) Text(content string, edges ...model.Edge) cid.Cid {
	o.C.T.Helper()
	model.SortEdges(edges)
	c, err := o.TryAdd(TextMemory(content, edges...), nil)
	if err != nil {
		o.C.T.Fatal(err)
	}
	return c
}

// TextMemory is a text memory with edges.
func TextMemory(s string, edges ...model.Edge) *model.Memory {
	return &model.Memory{Data: model.Data{Text: &model.TextData{Content: s}}, Edges: edges}
}
