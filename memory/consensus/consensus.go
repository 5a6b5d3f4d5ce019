package consensus

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

var (
	// KeyPending is the key space of the concepts awaiting consensus:
	// p/ concept key → PendingConcept.
	KeyPending = []byte("p/")
	// KeyConflict is the key space of the open conflicts: r/ conflict
	// id → Conflict.
	KeyConflict = []byte("r/")
)

// Limits of a contribution, in bytes.
const (
	MaxConceptKey   = 200
	MaxContentBytes = 64 << 10
)

// PendingKey is the key of a concept's pending record.
func PendingKey(concept string) []byte { return base.Join(KeyPending, []byte(concept)) }

// ConflictKey is the key of an open conflict.
func ConflictKey(id string) []byte { return base.Join(KeyConflict, []byte(id)) }

// Env is what consensus needs of the rest of memory/: the backbone's
// writer and the embedder.
type Env interface {
	// Embed embeds texts in the store's embedding space (unit length).
	Embed(ctx context.Context, texts ...string) ([][]float32, error)
	// AppendBackbone appends content by agent to the backbone, with
	// labels, and runs also in the same transaction (even when the memory
	// already was on the backbone).
	AppendBackbone(ctx context.Context, agent, content string, labels map[string]string, also store.Op) (cid.Cid, error)
	// ValidateAgentID checks an agent id.
	ValidateAgentID(id string) error
	// Memories is how many memories are stored (the nodes of the
	// similarity distribution).
	Memories() int64
}

// Ledger is the consensus of the agents that write the backbone: the
// concepts awaiting agreement and the open conflicts, in the store.
type Ledger struct {
	store store.Committer
	view  store.Viewer
	env   Env
	cfg   config.Config
	clock clock.Clock
}

// NewLedger is the consensus ledger on st.
func NewLedger(st interface {
	store.Committer
	store.Viewer
}, env Env, cfg config.Config, clk clock.Clock) *Ledger {
	return &Ledger{store: st, view: st, env: env, cfg: cfg, clock: clock.Or(clk)}
}

// Consensus outcomes.
const (
	StatusCommitted = "committed"
	StatusPending   = "pending"
	StatusConflict  = "conflict"
)

// Labels of backbone memories.
const (
	LabelConcept  = "concept_key"
	LabelAgents   = "agents"
	LabelConflict = "conflict_id"
)

// Signal is Living Memory's consensus signal: the mean pairwise cosine of
// the versions' embeddings (unit length); 0 with fewer than two.
func Signal(versions []*messages.Version) float64 {
	var sum float64
	var n int
	for i := range versions {
		for j := i + 1; j < len(versions); j++ {
			sum += base.Cosine(versions[i].Embedding, versions[j].Embedding)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Decide is the consensus rule: with two or more agents, a signal at or
// above upper commits and one below lower is a conflict; anything else
// (including a single agent) stays pending.
func Decide(signal float64, agents int, upper, lower float64) string {
	switch {
	case agents >= 2 && signal >= upper:
		return StatusCommitted
	case agents >= 2 && signal < lower:
		return StatusConflict
	}
	return StatusPending
}

// Bounds returns the emergent consensus threshold — mean +
// log(β)·std of the live similarity distribution of every sona (β =
// thresholds.consensus_beta, times living.stakes_high for high stakes) —
// and the lower bound under which agents diverge, mean − log(β)·std.
func (l *Ledger) Bounds(highStakes bool) (upper, lower float64, err error) {
	var live assoc.SimStats
	if err := l.view.View(func(r store.Reader) error {
		var err error
		live, err = assoc.LiveStats(r)
		return err
	}); err != nil {
		return 0, 0, err
	}
	nodes := l.env.Memories()
	t := l.cfg.Threshold
	upper = assoc.EmergentThreshold(t, t.ConsensusBeta, live, nodes).Value
	if highStakes {
		upper *= l.cfg.Living.StakesHigh
	}
	lower = assoc.EmergentThreshold(t, 1/t.ConsensusBeta, live, nodes).Value
	return upper, lower, nil
}

// Contribute records an agent's version of a concept and decides: the
// concept commits to the backbone (the version closest to the others,
// labelled with the concept and its agents), stays pending, or becomes —
// or stays — a conflict. Each outcome is one transaction.
func (l *Ledger) Contribute(ctx context.Context, c *messages.Contribute) (*messages.ContributeResult, error) {
	if err := base.ValidText("concept_key", c.ConceptKey, MaxConceptKey); err != nil {
		return nil, err
	}
	if err := base.ValidText("content", c.Content, MaxContentBytes); err != nil {
		return nil, err
	}
	if err := base.ValidText("agent_id", c.AgentId, 200); err != nil {
		return nil, err
	}
	if err := l.env.ValidateAgentID(c.AgentId); err != nil {
		return nil, err
	}
	if c.Stakes != "" && c.Stakes != "normal" && c.Stakes != "high" {
		return nil, fmt.Errorf("%w: stakes must be \"normal\" or \"high\", got %q", base.ErrInvalid, c.Stakes)
	}
	vecs, err := l.env.Embed(ctx, c.Content)
	if err != nil {
		return nil, err
	}
	now := l.clock.Now().Unix()
	pc := &messages.PendingConcept{}
	prev := &messages.Conflict{} // the concept's open conflict, if any
	err = l.view.View(func(txn store.Reader) error {
		if _, err := store.GetProto(txn, PendingKey(c.ConceptKey), pc); err != nil || pc.ConflictId == "" {
			return err
		}
		_, err := store.GetProto(txn, ConflictKey(pc.ConflictId), prev)
		return err
	})
	if err != nil {
		return nil, err
	}
	if pc.ConceptKey == "" {
		pc = &messages.PendingConcept{ConceptKey: c.ConceptKey, CreatedAt: now}
	}
	pc.HighStakes = pc.HighStakes || c.Stakes == "high"
	v := &messages.Version{AgentId: c.AgentId, Content: c.Content, At: now, Embedding: vecs[0]}
	if i := slices.IndexFunc(pc.Versions, func(x *messages.Version) bool { return x.AgentId == c.AgentId }); i >= 0 {
		pc.Versions[i] = v
	} else {
		pc.Versions = append(pc.Versions, v)
	}

	res := &messages.ContributeResult{Signal: Signal(pc.Versions), Agents: int64(len(pc.Versions))}
	if res.Threshold, res.Lower, err = l.Bounds(pc.HighStakes); err != nil {
		return nil, err
	}
	res.Status = Decide(res.Signal, len(pc.Versions), res.Threshold, res.Lower)
	if pc.ConflictId != "" && res.Status != StatusCommitted {
		res.Status = StatusConflict // a conflict stays one until it converges or is resolved
	}

	switch res.Status {
	case StatusCommitted:
		best := medoid(pc.Versions)
		agents := make([]string, len(pc.Versions))
		for i, v := range pc.Versions {
			agents[i] = v.AgentId
		}
		labels := map[string]string{LabelConcept: c.ConceptKey, LabelAgents: strings.Join(agents, ",")}
		conflict := pc.ConflictId
		id, err := l.env.AppendBackbone(ctx, best.AgentId, best.Content, labels, func(tx store.Tx) error {
			tx.Delete(PendingKey(c.ConceptKey))
			if conflict != "" {
				tx.Delete(ConflictKey(conflict))
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		res.Cid = proto.String(id.String())
	case StatusConflict:
		if pc.ConflictId == "" {
			pc.ConflictId = uuid.NewString()
		}
		res.ConflictId = proto.String(pc.ConflictId)
		created := now
		if prev.CreatedAt != 0 {
			created = prev.CreatedAt // the conflict keeps the time it began
		}
		cf := Conflict{ID: pc.ConflictId, ConceptKey: c.ConceptKey, Versions: versionsOf(pc.Versions),
			Signal: res.Signal, Threshold: res.Threshold, CreatedAt: created}
		if err := l.putProtos(ctx, PendingKey(c.ConceptKey), pc, ConflictKey(pc.ConflictId), cf.Record()); err != nil {
			return nil, err
		}
	default:
		if err := l.putProtos(ctx, PendingKey(c.ConceptKey), pc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// putProtos writes key, message pairs in one transaction.
func (l *Ledger) putProtos(ctx context.Context, kv ...any) error {
	raws := make([][]byte, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		raw, err := proto.Marshal(kv[i+1].(proto.Message))
		if err != nil {
			return err
		}
		raws[i/2] = raw
	}
	return l.store.Update(ctx, func(tx store.Tx) error {
		for i := 0; i < len(kv); i += 2 {
			tx.Set(kv[i].([]byte), raws[i/2])
		}
		return nil
	})
}

// medoid is the version most similar to the others (the earliest among equals).
func medoid(vs []*messages.Version) *messages.Version {
	best, bestSum := vs[0], math.Inf(-1)
	for i, a := range vs {
		sum := 0.0
		for j, b := range vs {
			if i != j {
				sum += base.Cosine(a.Embedding, b.Embedding)
			}
		}
		if sum > bestSum {
			best, bestSum = a, sum
		}
	}
	return best
}

// Resolve settles a conflict: content goes to the backbone, and the
// conflict and its pending concept are gone, in one transaction.
func (l *Ledger) Resolve(ctx context.Context, conflictID, content, agent string) (cid.Cid, error) {
	if err := base.ValidText("content", content, MaxContentBytes); err != nil {
		return cid.Undef, err
	}
	if err := l.env.ValidateAgentID(agent); err != nil {
		return cid.Undef, err
	}
	rec := &messages.Conflict{}
	var ok bool
	err := l.view.View(func(txn store.Reader) error {
		var err error
		ok, err = store.GetProto(txn, ConflictKey(conflictID), rec)
		return err
	})
	if err != nil {
		return cid.Undef, err
	}
	if !ok {
		return cid.Undef, fmt.Errorf("%w: conflict %q", base.ErrNotFound, conflictID)
	}
	cf := ConflictOf(rec)
	labels := map[string]string{LabelConcept: cf.ConceptKey, LabelConflict: conflictID}
	id, err := l.env.AppendBackbone(ctx, agent, content, labels, func(tx store.Tx) error {
		if ok, err := tx.Has(ConflictKey(conflictID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: conflict %q", base.ErrNotFound, conflictID)
		}
		tx.Delete(ConflictKey(conflictID))
		tx.Delete(PendingKey(cf.ConceptKey))
		return nil
	})
	return id, err
}

// Conflicts lists the open conflicts, by id.
func (l *Ledger) Conflicts() ([]Conflict, error) {
	recs, err := listProtos(l, KeyConflict, func() *messages.Conflict { return &messages.Conflict{} })
	if err != nil {
		return nil, err
	}
	out := make([]Conflict, len(recs))
	for i, rec := range recs {
		out[i] = ConflictOf(rec)
	}
	return out, nil
}

// PendingConcepts lists the concepts waiting for consensus (including
// those in conflict), by key.
func (l *Ledger) PendingConcepts() ([]*messages.PendingConcept, error) {
	return listProtos(l, KeyPending, func() *messages.PendingConcept { return &messages.PendingConcept{} })
}

func listProtos[T proto.Message](l *Ledger, prefix []byte, mk func() T) ([]T, error) {
	var out []T
	err := l.view.View(func(txn store.Reader) error {
		var err error
		out, err = store.ReadAll(txn, prefix, mk)
		return err
	})
	return out, err
}
