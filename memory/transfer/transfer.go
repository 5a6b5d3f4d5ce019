package transfer

import (
	"context"
	"sync/atomic"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Store is what transfer needs of the store: snapshots, writes, and
// verified blocks.
type Store interface {
	store.Committer
	store.Viewer
	// Block returns a verified block.
	Block(c cid.Cid) ([]byte, error)
}

// Records are the records of other packages that transfer reads and
// writes inside a snapshot or a transaction: the sonas and their chains
// (s/, k/, c/, x/backbone) and the memories' metadata and embeddings (m/,
// v/). They keep no state, so Reembed, which runs on a closed self, needs
// only these.
type Records interface {
	// Sonas reads every sona record, in uuid order.
	Sonas(r store.Reader) ([]*messages.Sona, error)
	// SetNameVector writes the embedding of a sona's name.
	SetNameVector(tx store.Tx, sona string, vec []float32)
	// Backbone reads the uuid of the backbone's sona; "" when there is none.
	Backbone(r store.Reader) (string, error)
	// Chain reads a sona's whole chain, in seq order.
	Chain(r store.Reader, sona string) ([]Entry, error)
	// Memories calls f with the CID of every stored memory, in CID order.
	Memories(r store.Reader, f func(c cid.Cid) error) error
	// Meta reads a memory's metadata; base.ErrNotFound when it is not
	// stored.
	Meta(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error)
	// SetMeta writes a memory's metadata.
	SetMeta(tx store.Tx, c cid.Cid, meta *messages.MemoryMeta) error
	// Vector reads a memory's embedding.
	Vector(r store.Reader, c cid.Cid) ([]float32, error)
	// SetVector writes a memory's embedding.
	SetVector(tx store.Tx, c cid.Cid, vec []float32)
}

// Env is what export and import need of the rest of memory/: the records,
// and what keeps state beside them — the decoded-memory cache, the
// embedder, the live sonas, the append path's preparation.
type Env interface {
	Records
	// Memory loads memory c (through the decoded-memory cache); the
	// result is shared: do not modify it.
	Memory(r store.Reader, c cid.Cid) (*model.Memory, error)
	// Embed embeds texts in the store's embedding space (unit length).
	Embed(ctx context.Context, texts ...string) ([][]float32, error)
	// ValidateSonaName checks a sona's name.
	ValidateSonaName(name string) error
	// PutSona writes, in tx, a new sona with its record and the
	// embedding of its name, made the backbone when backbone is set;
	// base.ErrChainConflict when the sona exists or, for a backbone,
	// when the store has one. Once tx commits, the sona is live.
	PutSona(tx store.Tx, rec *messages.Sona, name []float32, backbone bool) error
	// Prepare checks memory m (CID c, encoded as block) with its
	// embedding and metadata as an append's item.
	Prepare(m *model.Memory, c cid.Cid, block []byte, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error)
	// SetLinks writes, in tx, the typed links of memory c whole (none:
	// deleted), in place of every link back held for it.
	SetLinks(tx store.Tx, c cid.Cid, list *messages.Associations)
	// Flush writes what the self learned and keeps in memory for a while
	// (the recalls' co-access strengthening, and their touches of the
	// memories they returned), and waits until it is durable.
	Flush(ctx context.Context) error
}

// Entry is one ACT of a sona's chain.
type Entry struct {
	Seq    int64
	Act    cid.Cid
	Memory cid.Cid
	// LogSeq is the insertion-log position of the store when the ACT was
	// appended.
	LogSeq uint64
}

// Options configure a Transfer.
type Options struct {
	// Config bounds what an import accepts (store.max_block_bytes,
	// kinds).
	Config config.Config
	// EmbedderID and Dims name the store's embedding space: an export
	// carries them, an import keeps the vectors of the same space.
	EmbedderID string
	Dims       int
	Clock      clock.Clock
}

// Transfer exports the self and imports exports.
type Transfer struct {
	store Store
	env   Env
	o     Options
	// backbone is the cluster's backbone sona (ExpectBackbone); nil on a
	// single node.
	backbone atomic.Pointer[string]
}

// New is the transfer of the self kept in st.
func New(st Store, env Env, o Options) *Transfer {
	o.Clock = clock.Or(o.Clock)
	return &Transfer{store: st, env: env, o: o}
}

// ExpectBackbone makes uuid the backbone an import may bring: the
// cluster's, which a member's store records only once the member first
// holds it. An import whose backbone is another sona is then
// ErrChainConflict at planning, as when the store has a backbone of its
// own.
func (t *Transfer) ExpectBackbone(uuid string) { t.backbone.Store(&uuid) }
