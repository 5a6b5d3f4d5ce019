package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Living Memory's backbone and multi-agent consensus. The backbone is the
// self's permanent identity: memories that never decay, never compress and
// are visible to every sona. They live on the chain of one reserved sona,
// named "backbone", whose one writer is the consensus actor: call the
// writing methods here from one goroutine at a time.

// BackboneName is the name of the sona whose chain holds the backbone.
const BackboneName = "backbone"

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

var (
	keyBackbone     = []byte("x/backbone")
	prefixPending   = []byte("p/")
	prefixConflict  = []byte("r/")
	maxConceptKey   = 200
	maxContentBytes = 64 << 10
)

func pendingKey(concept string) []byte { return base.Join(prefixPending, []byte(concept)) }
func conflictKey(id string) []byte     { return base.Join(prefixConflict, []byte(id)) }

// BackboneSona returns the uuid of the backbone's sona, or "" when nothing
// was written to the backbone yet. It is read from x/backbone at open and
// set when the sona is made; it never changes after.
func (s *Self) BackboneSona() string {
	if id := s.backbone.Load(); id != nil {
		return *id
	}
	return ""
}

// loadBackbone reads the backbone sona's uuid at open.
func (s *Self) loadBackbone(txn Reader) error {
	item, err := txn.Item(keyBackbone)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	v, err := item.ValueCopy(nil)
	if err == nil {
		id := string(v)
		s.backbone.Store(&id)
	}
	return err
}

// IsBackbone reports whether sona is the backbone's: only the consensus
// actor writes to it.
func (s *Self) IsBackbone(sona string) bool {
	id := s.BackboneSona()
	return id != "" && id == sona
}

// ensureBackbone returns the backbone sona's uuid, creating it (and its
// record under x/backbone, in the same transaction) on first use.
func (s *Self) ensureBackbone(ctx context.Context) (string, error) {
	if id := s.BackboneSona(); id != "" {
		return id, nil
	}
	rec, err := s.createSona(ctx, BackboneName, func(tx Tx, rec *messages.Sona) {
		tx.Set(keyBackbone, []byte(rec.Uuid))
		tx.OnCommit(func() { s.backbone.Store(&rec.Uuid) })
	})
	if err != nil {
		return "", err
	}
	return rec.Uuid, nil
}

// validText checks one piece of backbone content.
func validText(field, v string, maxBytes int) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%w: %s must not be empty", ErrInvalid, field)
	case len(v) > maxBytes:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, field, maxBytes)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s must be UTF-8", ErrInvalid, field)
	}
	return nil
}

// WriteBackbone writes content by agent straight to the backbone (a
// single agent's write needs no consensus) and returns its CID; existed
// when that memory already was on the backbone.
func (s *Self) WriteBackbone(ctx context.Context, agent, content string, labels map[string]string) (cid.Cid, bool, error) {
	if err := validText("content", content, maxContentBytes); err != nil {
		return cid.Undef, false, err
	}
	if err := validText("agent_id", agent, 200); err != nil {
		return cid.Undef, false, err
	}
	if err := ValidateAgentID(agent); err != nil {
		return cid.Undef, false, err
	}
	return s.appendBackbone(ctx, agent, content, labels, nil)
}

// appendBackbone appends a backbone memory and runs also in the same
// transaction (also runs even when the memory already was there).
func (s *Self) appendBackbone(ctx context.Context, agent, content string, labels map[string]string, also Op) (cid.Cid, bool, error) {
	id, err := s.ensureBackbone(ctx)
	if err != nil {
		return cid.Undef, false, err
	}
	vecs, err := s.Embed(ctx, content)
	if err != nil {
		return cid.Undef, false, err
	}
	m := &Memory{Data: Data{Text: &TextData{Content: content}}}
	if agent != "" {
		m.Data = Data{Other: &OtherData{Name: &agent, Content: content}}
	}
	p, err := s.Prepare(m, vecs[0], &messages.MemoryMeta{Kind: "fact", AgentId: agent, Backbone: true, Labels: labels})
	if err != nil {
		return cid.Undef, false, err
	}
	res, err := s.appendPreparedBackbone(ctx, id, p, also)
	if err != nil {
		return cid.Undef, false, err
	}
	return p.CID, res.Seq == nil, nil
}

// AppendBackbone appends a prepared memory to the backbone's chain: how
// an import replays the backbone's exported chain (the backbone sona must
// exist). Only the consensus actor calls it.
func (s *Self) AppendBackbone(ctx context.Context, p *Prepared) (*messages.Appended, error) {
	id := s.BackboneSona()
	if id == "" {
		return nil, fmt.Errorf("%w: no backbone yet", ErrNotFound)
	}
	return s.appendPreparedBackbone(ctx, id, p, nil)
}

// appendPreparedBackbone appends p to the backbone sona id and runs also
// in the same transaction (also runs even when p already was there).
func (s *Self) appendPreparedBackbone(ctx context.Context, id string, p *Prepared, also Op) (*messages.Appended, error) {
	rec, err := s.Sona(id)
	if err != nil {
		return nil, err
	}
	if p.ExpectSeq != nil && *p.ExpectSeq != rec.Length {
		return nil, fmt.Errorf("%w: the backbone is at seq %d, append expected at %d", ErrChainConflict, rec.Length, *p.ExpectSeq)
	}
	existed, err := s.InSona(p.CID, id)
	if err != nil {
		return nil, err
	}
	res := &messages.Appended{Cid: p.CID.String(), Existed: existed}
	op := also
	if !existed {
		var head *cid.Cid
		if rec.Head != nil {
			h, err := cid.Decode(*rec.Head)
			if err != nil {
				return nil, fmt.Errorf("%w: backbone head: %v", ErrCorrupt, err)
			}
			head = &h
		}
		plan, err := PlanAppend(id, head, rec.Length, p, s.clock.Now().Unix())
		if err != nil {
			return nil, err
		}
		res.Seq, res.Act = proto.Int64(plan.Seq), plan.Act.String()
		appendOp := s.AppendOp(plan)
		op = func(tx Tx) error {
			if err := appendOp(tx); err != nil {
				return err
			}
			if also != nil {
				return also(tx)
			}
			return nil
		}
	}
	if op != nil {
		if err := s.store.Update(ctx, op); err != nil {
			return nil, err
		}
	}
	return res, nil
}

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

// ConsensusBounds returns the emergent consensus threshold — mean +
// log(β)·std of the live similarity distribution of every sona (β =
// thresholds.consensus_beta, times living.stakes_high for high stakes) —
// and the lower bound under which agents diverge, mean − log(β)·std.
func (s *Self) ConsensusBounds(highStakes bool) (upper, lower float64, err error) {
	live, err := s.liveSimStats()
	if err != nil {
		return 0, 0, err
	}
	_, nodes := s.Counts()
	t := s.cfg.Threshold
	upper = EmergentThreshold(t, t.ConsensusBeta, live, nodes).Value
	if highStakes {
		upper *= s.cfg.Living.StakesHigh
	}
	lower = EmergentThreshold(t, 1/t.ConsensusBeta, live, nodes).Value
	return upper, lower, nil
}

// liveSimStats merges every sona's nearest-neighbour similarity
// distribution (Chan et al.'s parallel update).
func (s *Self) liveSimStats() (SimStats, error) {
	var all SimStats
	err := s.store.View(func(txn Reader) error {
		return store.Scan(txn, prefixSimStats, func(_, v []byte) error {
			st, err := assoc.DecodeStats(v)
			if err != nil {
				return err
			}
			all = mergeStats(all, st)
			return nil
		})
	})
	return all, err
}

func mergeStats(a, b SimStats) SimStats {
	if a.N == 0 {
		return b
	}
	if b.N == 0 {
		return a
	}
	n := a.N + b.N
	d := b.Mean - a.Mean
	return SimStats{
		N:    n,
		Mean: a.Mean + d*float64(b.N)/float64(n),
		M2:   a.M2 + b.M2 + d*d*float64(a.N)*float64(b.N)/float64(n),
	}
}

// Contribute records an agent's version of a concept and decides: the
// concept commits to the backbone (the version closest to the others,
// labelled with the concept and its agents), stays pending, or becomes —
// or stays — a conflict. Each outcome is one transaction.
func (s *Self) Contribute(ctx context.Context, c *messages.Contribute) (*messages.ContributeResult, error) {
	if err := validText("concept_key", c.ConceptKey, maxConceptKey); err != nil {
		return nil, err
	}
	if err := validText("content", c.Content, maxContentBytes); err != nil {
		return nil, err
	}
	if err := validText("agent_id", c.AgentId, 200); err != nil {
		return nil, err
	}
	if err := ValidateAgentID(c.AgentId); err != nil {
		return nil, err
	}
	if c.Stakes != "" && c.Stakes != "normal" && c.Stakes != "high" {
		return nil, fmt.Errorf("%w: stakes must be \"normal\" or \"high\", got %q", ErrInvalid, c.Stakes)
	}
	vecs, err := s.Embed(ctx, c.Content)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now().Unix()
	pc := &messages.PendingConcept{}
	prev := &messages.Conflict{} // the concept's open conflict, if any
	err = s.store.View(func(txn Reader) error {
		if _, err := store.GetProto(txn, pendingKey(c.ConceptKey), pc); err != nil || pc.ConflictId == "" {
			return err
		}
		_, err := store.GetProto(txn, conflictKey(pc.ConflictId), prev)
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
	if res.Threshold, res.Lower, err = s.ConsensusBounds(pc.HighStakes); err != nil {
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
		id, _, err := s.appendBackbone(ctx, best.AgentId, best.Content, labels, func(tx Tx) error {
			tx.Delete(pendingKey(c.ConceptKey))
			if conflict != "" {
				tx.Delete(conflictKey(conflict))
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
		cf := &messages.Conflict{ConflictId: pc.ConflictId, ConceptKey: c.ConceptKey, Versions: pc.Versions,
			Signal: res.Signal, Threshold: res.Threshold, CreatedAt: created}
		if err := s.putProtos(ctx, pendingKey(c.ConceptKey), pc, conflictKey(pc.ConflictId), cf); err != nil {
			return nil, err
		}
	default:
		if err := s.putProtos(ctx, pendingKey(c.ConceptKey), pc); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// putProtos writes key, message pairs in one transaction.
func (s *Self) putProtos(ctx context.Context, kv ...any) error {
	raws := make([][]byte, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		raw, err := proto.Marshal(kv[i+1].(proto.Message))
		if err != nil {
			return err
		}
		raws[i/2] = raw
	}
	return s.store.Update(ctx, func(tx Tx) error {
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
func (s *Self) Resolve(ctx context.Context, conflictID, content, agent string) (cid.Cid, error) {
	if err := validText("content", content, maxContentBytes); err != nil {
		return cid.Undef, err
	}
	if err := ValidateAgentID(agent); err != nil {
		return cid.Undef, err
	}
	cf := &messages.Conflict{}
	var ok bool
	err := s.store.View(func(txn Reader) error {
		var err error
		ok, err = store.GetProto(txn, conflictKey(conflictID), cf)
		return err
	})
	if err != nil {
		return cid.Undef, err
	}
	if !ok {
		return cid.Undef, fmt.Errorf("%w: conflict %q", ErrNotFound, conflictID)
	}
	labels := map[string]string{LabelConcept: cf.ConceptKey, LabelConflict: conflictID}
	id, _, err := s.appendBackbone(ctx, agent, content, labels, func(tx Tx) error {
		if ok, err := tx.Has(conflictKey(conflictID)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: conflict %q", ErrNotFound, conflictID)
		}
		tx.Delete(conflictKey(conflictID))
		tx.Delete(pendingKey(cf.ConceptKey))
		return nil
	})
	return id, err
}

// Conflicts lists the open conflicts, by id.
func (s *Self) Conflicts() ([]*messages.Conflict, error) {
	return listProtos(s, prefixConflict, func() *messages.Conflict { return &messages.Conflict{} })
}

// PendingConcepts lists the concepts waiting for consensus (including
// those in conflict), by key.
func (s *Self) PendingConcepts() ([]*messages.PendingConcept, error) {
	return listProtos(s, prefixPending, func() *messages.PendingConcept { return &messages.PendingConcept{} })
}

func listProtos[T proto.Message](s *Self, prefix []byte, mk func() T) ([]T, error) {
	var out []T
	err := s.store.View(func(txn Reader) error {
		var err error
		out, err = readAll(txn, prefix, mk)
		return err
	})
	return out, err
}

// Backbone lists the backbone's memories in the order they were written.
func (s *Self) Backbone(from int64, limit int) (Page[ChainEntry], error) {
	id := s.BackboneSona()
	if id == "" {
		return Page[ChainEntry]{}, nil
	}
	return s.Chain(id, from, limit)
}
