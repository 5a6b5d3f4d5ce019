package living

import (
	"context"
	"log/slog"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Store is what Living Memory needs of the store.
type Store interface {
	store.Committer
	store.Viewer
}

// Env is what Living Memory needs of the rest of memory/: the memories'
// metadata and embeddings (m/, v/) and the decoded-memory cache, the
// sonas' chains (c/) and their committed lengths, recall's decay, the
// embedder and the append path's preparation.
type Env interface {
	// Meta reads a memory's metadata; base.ErrNotFound when it is not
	// stored. The result may be shared: do not modify it.
	Meta(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error)
	// SetMeta writes a memory's metadata.
	SetMeta(tx store.Tx, c cid.Cid, meta *messages.MemoryMeta) error
	// ScanMeta calls f with the metadata of the stored memories in CID
	// order, starting after cursor (nil: from the first), until f says
	// stop. Each call's key is the cursor to resume after that memory.
	ScanMeta(r store.Reader, cursor []byte, f func(key []byte, c cid.Cid, meta *messages.MemoryMeta) (more bool, err error)) error
	// Memory loads memory c (through the decoded-memory cache); the
	// result is shared: do not modify it.
	Memory(r store.Reader, c cid.Cid) (*model.Memory, error)
	// Vector reads a memory's embedding.
	Vector(r store.Reader, c cid.Cid) ([]float32, error)
	// ChainBack calls f with the memory of each ACT of a sona's chain at
	// seq upto and below, newest first, until f says stop.
	ChainBack(r store.Reader, sona string, upto int64, f func(c cid.Cid) (more bool, err error)) error
	// Length is a sona's committed chain length, and whether it exists.
	Length(sona string) (int64, bool)
	// Lengths are the committed chain lengths of every sona.
	Lengths() map[string]int64
	// BackboneSona is the uuid of the backbone's sona; "" when there is
	// none.
	BackboneSona() string
	// Decay is recall's activity-relative decay factor of a memory in a
	// sona whose chain is activity long.
	Decay(meta *messages.MemoryMeta, activity int64) float64
	// Embed embeds texts in the store's embedding space (unit length).
	Embed(ctx context.Context, texts ...string) ([][]float32, error)
	// Prepare validates and encodes m as an append's item.
	Prepare(m *model.Memory, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error)
}

// Options configure Living Memory.
type Options struct {
	// Config: living.*, heartbeat.dream_recent, thresholds.*, kinds.
	Config config.Config
	Clock  clock.Clock
	Logger *slog.Logger
	// Summarize, when set, writes the text of a merge from its sources'
	// texts (an LLM summary); when unset or when it fails, an extractive
	// summary is used.
	Summarize func(ctx context.Context, texts []string) (string, error)
}

// Living is Living Memory's upkeep of the self: the heartbeat's sweep,
// the compressions and folds it plans, and dream mode.
type Living struct {
	store     Store
	env       Env
	cfg       config.Config
	clock     clock.Clock
	log       *slog.Logger
	summarize func(ctx context.Context, texts []string) (string, error)
}

// New is Living Memory on the self kept in st.
func New(st Store, env Env, o Options) *Living {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Living{store: st, env: env, cfg: o.Config, clock: clock.Or(o.Clock), log: o.Logger, summarize: o.Summarize}
}
