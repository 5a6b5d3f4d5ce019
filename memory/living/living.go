package living

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// keyHeartbeat holds the heartbeat's durable state (HeartbeatState).
var keyHeartbeat = []byte("x/heartbeat")

// Labels a merge puts on the memory it makes.
const (
	LabelMerged = "merged" // how many memories it merges
	LabelMerge  = "merge"  // "compression" or "cold-branch"
)

// ErrSweepConflict means two sweeps ran at once; the later one wrote nothing.
var ErrSweepConflict = errors.New("memory: another heartbeat sweep moved the cursor")

// HeartbeatState returns the heartbeat's durable state.
func (l *Living) HeartbeatState() (*messages.HeartbeatState, error) {
	var st *messages.HeartbeatState
	err := l.store.View(func(txn store.Reader) error {
		var err error
		st, err = readHeartbeat(txn)
		return err
	})
	return st, err
}

func readHeartbeat(txn store.Reader) (*messages.HeartbeatState, error) {
	st := &messages.HeartbeatState{}
	if _, err := store.GetProto(txn, keyHeartbeat, st); err != nil {
		return nil, err
	}
	if st.Pass == nil {
		st.Pass = map[string]*messages.BranchStat{}
	}
	if st.Last == nil {
		st.Last = map[string]*messages.BranchStat{}
	}
	if st.Dreamed == nil {
		st.Dreamed = map[string]int64{}
	}
	return st, nil
}

// SweepReport is what one sweep did.
type SweepReport struct {
	Swept        int64
	PassComplete bool
	Expired      int64           // memories whose TTL ran out since the previous sweep
	Pruned       int64           // associations removed
	Threshold    assoc.Threshold // the strength under which a decayed link is pruned
}

// Sweep examines the metadata and associations of up to batch memories,
// continuing where the previous sweep stopped, and:
//
//   - counts the memories whose TTL ran out since the last sweep (recall
//     hides them from the exact second their TTL ends; nothing is deleted);
//   - prunes weak associations: a link whose strength, decayed by its
//     memory's activity-relative inactivity (Decay), fell below the
//     emergent threshold of the live strength distribution of the last
//     complete pass (retrieval β; bootstrap below the minimum);
//   - counts each sona's active memories and their accesses, the branch
//     statistics compression decides on once a pass is complete.
//
// The reading runs on a snapshot; only the pruning and the new state go
// through the committer, in one transaction.
func (l *Living) Sweep(ctx context.Context, batch int) (SweepReport, error) {
	now := l.clock.Now().Unix()
	var rep SweepReport
	type prune struct {
		c       cid.Cid
		targets map[cid.Cid]float64 // target → the strength that was judged
	}
	var prunes []prune
	var st *messages.HeartbeatState
	var start []byte
	err := l.store.View(func(txn store.Reader) error {
		var err error
		if st, err = readHeartbeat(txn); err != nil {
			return err
		}
		start = slices.Clone(st.Cursor)
		last := st.LastLinks
		if last == nil {
			last = &messages.LinkStats{}
		}
		cfg := l.cfg.Threshold
		rep.Threshold = assoc.EmergentThreshold(cfg, cfg.RetrievalBeta,
			assoc.SimStats{N: last.N, Mean: last.Mean, M2: last.M2}, last.N)
		links := assoc.SimStats{}
		if pl := st.PassLinks; pl != nil {
			links = assoc.SimStats{N: pl.N, Mean: pl.Mean, M2: pl.M2}
		}
		err = l.env.ScanMeta(txn, st.Cursor, func(key []byte, c cid.Cid, meta *messages.MemoryMeta) (bool, error) {
			if rep.Swept == int64(batch) {
				return false, nil
			}
			rep.Swept++
			st.Cursor = key
			expired := meta.ExpiresAt > 0 && meta.ExpiresAt <= now
			if expired && meta.ExpiresAt > st.LastTick {
				rep.Expired++
			}
			if !meta.Backbone && !meta.Archived && !expired {
				for _, id := range meta.Sonas {
					b := st.Pass[id]
					if b == nil {
						b = &messages.BranchStat{}
						st.Pass[id] = b
					}
					b.Active++
					b.Access += meta.AccessCount
				}
			}
			ls, err := assoc.Read(txn, assoc.Key(c))
			if err != nil {
				return false, err
			}
			var activity int64
			if len(meta.Sonas) > 0 {
				activity, _ = l.env.Length(meta.Sonas[0])
			}
			decay := l.env.Decay(meta, activity)
			var p prune
			for _, link := range ls {
				links.Add(link.Strength)
				if link.Strength*decay < rep.Threshold.Value {
					if p.targets == nil {
						p = prune{c: c, targets: map[cid.Cid]float64{}}
					}
					p.targets[link.Target] = link.Strength
				}
			}
			if p.targets != nil {
				prunes = append(prunes, p)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		st.PassLinks = &messages.LinkStats{N: links.N, Mean: links.Mean, M2: links.M2}
		if rep.Swept < int64(batch) {
			rep.PassComplete = true
			st.Cursor = nil
			st.Last, st.Pass = st.Pass, map[string]*messages.BranchStat{}
			st.LastLinks, st.PassLinks = st.PassLinks, nil
			st.Passes++
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	st.LastTick = now
	raw, err := proto.Marshal(st)
	if err != nil {
		return rep, err
	}
	err = l.store.Update(ctx, func(tx store.Tx) error {
		cur := &messages.HeartbeatState{}
		if _, err := store.GetProto(tx, keyHeartbeat, cur); err != nil {
			return err
		}
		if !bytes.Equal(cur.Cursor, start) || cur.LastTick > now {
			return ErrSweepConflict
		}
		rep.Pruned = 0
		for _, p := range prunes {
			err := assoc.Update(tx, assoc.Key(p.c), now, func(list *assoc.List) {
				for t, judged := range p.targets {
					// A link strengthened since it was judged stays.
					if l := list.Find(t); l != nil && l.Strength == judged {
						list.Remove(t)
						rep.Pruned++
					}
				}
			})
			if err != nil {
				return err
			}
		}
		tx.Set(keyHeartbeat, raw)
		return nil
	})
	return rep, err
}

// OversizedBranches returns the branches Living Memory's OLS compresses:
// those with more than phi × the mean active size of the branches (those
// with any active memory) and at least minNodes, largest excess first.
func OversizedBranches(stats map[string]*messages.BranchStat, phi float64, minNodes int) []string {
	mean := meanActive(stats)
	var out []string
	for id, b := range stats {
		if b.Active >= int64(minNodes) && float64(b.Active) > phi*mean {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(stats[b].Active, stats[a].Active); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out
}

func meanActive(stats map[string]*messages.BranchStat) float64 {
	var sum, n float64
	for _, b := range stats {
		if b.Active > 0 {
			sum += float64(b.Active)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// ColdBranches returns the branches whose access ratio (accesses per
// active memory) is below ratio × the mean ratio of the branches, with at
// least minNodes active memories: Living Memory's root-level compression
// folds each into one archive memory. Coldest first.
func ColdBranches(stats map[string]*messages.BranchStat, ratio float64, minNodes int) []string {
	rate := func(b *messages.BranchStat) float64 { return float64(b.Access) / float64(b.Active) }
	var sum, n float64
	for _, b := range stats {
		if b.Active > 0 {
			sum += rate(b)
			n++
		}
	}
	if n == 0 || sum == 0 {
		return nil // nothing was ever accessed: no branch is colder than another
	}
	mean := sum / n
	var out []string
	for id, b := range stats {
		if b.Active >= int64(minNodes) && rate(b) < ratio*mean {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(rate(stats[a]), rate(stats[b])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return out
}

// Merge is a planned merge of a sona's memories into one memory whose
// edges point to every source; appending it archives the sources in the
// same transaction.
type Merge struct {
	Sona     string
	Sources  []cid.Cid
	Prepared *model.Prepared
}

// member is an active memory of a branch.
type member struct {
	c    cid.Cid
	m    *model.Memory
	meta *messages.MemoryMeta
	vec  []float32
}

// maxMergeSources bounds one merge, so the merged memory's block (an edge
// per source) stays small; the rest waits for the next merge.
const maxMergeSources = 1000

// activeMembers lists a sona's active memories (not backbone, archived or
// expired) in chain order.
func (l *Living) activeMembers(id string) ([]member, error) {
	now := l.clock.Now().Unix()
	return l.chainMembers(id, math.MaxInt64, 0, func(meta *messages.MemoryMeta) bool {
		return !meta.Backbone && !meta.Archived && (meta.ExpiresAt == 0 || meta.ExpiresAt > now)
	})
}

// chainMembers reads, with their metadata and embeddings, the memories of
// a sona's chain at seqs up to upto that keep accepts: the newest limit of
// them (0 = all), in chain order.
func (l *Living) chainMembers(id string, upto int64, limit int, keep func(*messages.MemoryMeta) bool) ([]member, error) {
	var out []member
	seen := map[cid.Cid]bool{}
	err := l.store.View(func(txn store.Reader) error {
		return l.env.ChainBack(txn, id, upto, func(c cid.Cid) (bool, error) {
			if limit > 0 && len(out) == limit {
				return false, nil
			}
			if seen[c] {
				return true, nil
			}
			seen[c] = true
			meta, err := l.env.Meta(txn, c)
			if err != nil || !keep(meta) {
				return err == nil, err
			}
			m, err := l.env.Memory(txn, c)
			if err != nil {
				return false, err
			}
			vec, err := l.env.Vector(txn, c)
			if err != nil {
				return false, err
			}
			out = append(out, member{c: c, m: m, meta: meta, vec: vec})
			return true, nil
		})
	})
	slices.Reverse(out)
	return out, err
}

// PlanCompressions plans Living Memory's OLS compression for up to max
// branches that the last complete sweep found oversized: each branch's
// least important related memories — the least important one and those
// nearest it among the 2n least important — merge into one centroid
// memory, n being what brings the branch back to the mean size (at least
// living.min_compress_nodes). A branch's size is counted afresh before it
// is planned, so a branch compressed since the sweep is not compressed
// twice.
func (l *Living) PlanCompressions(ctx context.Context, limit int) ([]*Merge, error) {
	st, err := l.HeartbeatState()
	if err != nil {
		return nil, err
	}
	lc := l.cfg.Living
	var out []*Merge
	for _, id := range OversizedBranches(st.Last, lc.Phi, lc.MinCompressNodes) {
		if len(out) == limit {
			break
		}
		if _, ok := l.env.Length(id); !ok {
			continue // a sona the sweep saw in a memory's list but that has no record
		}
		members, err := l.activeMembers(id)
		if err != nil {
			return nil, err
		}
		stats := map[string]*messages.BranchStat{}
		for k, v := range st.Last {
			stats[k] = v
		}
		stats[id] = &messages.BranchStat{Active: int64(len(members))}
		mean := meanActive(stats)
		if !slices.Contains(OversizedBranches(stats, lc.Phi, lc.MinCompressNodes), id) {
			continue
		}
		n := len(members) - int(math.Ceil(mean)) + 1
		n = min(maxMergeSources, len(members), max(n, lc.MinCompressNodes))
		srcs := leastImportantRelated(members, n)
		p, err := l.merge(ctx, srcs, "compression")
		if err != nil {
			return nil, err
		}
		out = append(out, &Merge{Sona: id, Sources: p.Archive, Prepared: p})
	}
	return out, nil
}

// PlanFolds plans Living Memory's root-level compression: each cold branch
// of the last complete sweep (see ColdBranches) folds, up to max of them,
// into one archive memory.
func (l *Living) PlanFolds(ctx context.Context, limit int) ([]*Merge, error) {
	st, err := l.HeartbeatState()
	if err != nil {
		return nil, err
	}
	lc := l.cfg.Living
	var out []*Merge
	for _, id := range ColdBranches(st.Last, lc.ColdBranchRatio, lc.MinCompressNodes) {
		if len(out) == limit {
			break
		}
		if _, ok := l.env.Length(id); !ok {
			continue
		}
		members, err := l.activeMembers(id)
		if err != nil {
			return nil, err
		}
		if len(members) < lc.MinCompressNodes {
			continue
		}
		p, err := l.merge(ctx, members[:min(len(members), maxMergeSources)], "cold-branch")
		if err != nil {
			return nil, err
		}
		out = append(out, &Merge{Sona: id, Sources: p.Archive, Prepared: p})
	}
	return out, nil
}

// leastImportantRelated picks n members: the least important (the oldest
// among equals), then the n−1 nearest to it among the 2n least important;
// returned in chain order.
func leastImportantRelated(members []member, n int) []member {
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(members[a].meta.Importance, members[b].meta.Importance)
	})
	pool := order[:min(len(order), 2*n)]
	seed := members[pool[0]]
	rest := slices.Clone(pool[1:])
	slices.SortStableFunc(rest, func(a, b int) int {
		return cmp.Compare(base.Dot(seed.vec, members[b].vec), base.Dot(seed.vec, members[a].vec))
	})
	chosen := append([]int{pool[0]}, rest[:n-1]...)
	slices.Sort(chosen)
	out := make([]member, len(chosen))
	for i, j := range chosen {
		out[i] = members[j]
	}
	return out
}

// merge builds the memory that stands for srcs: an extractive summary of
// their text, their mean embedding, an edge to each (weighted by its
// similarity to the mean), their most common kind and highest importance.
// Appending it archives srcs.
func (l *Living) merge(ctx context.Context, srcs []member, how string) (*model.Prepared, error) {
	var texts []string
	var mean base.Mean
	var centroid []float32
	kinds := map[string]int{}
	var latest int64
	importance := 0.0
	for _, src := range srcs {
		texts = append(texts, src.m.Text())
		mean, centroid = mean.Add(src.vec)
		kinds[src.meta.Kind]++
		importance = math.Max(importance, src.meta.Importance)
		when := src.meta.CreatedAt
		if src.m.Timestamp != nil {
			when = *src.m.Timestamp
		}
		latest = max(latest, when)
	}
	if !llm.Normalize(centroid) {
		return nil, fmt.Errorf("%w: the merged memories have no direction", base.ErrInvalid)
	}
	text, err := l.summary(ctx, texts)
	if err != nil {
		return nil, err
	}
	if text == "" {
		text = fmt.Sprintf("%d memories without text", len(srcs))
	}
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}, Timestamp: &latest}
	archive := make([]cid.Cid, len(srcs))
	for i, src := range srcs {
		m.Edges = append(m.Edges, model.Edge{Target: src.c, Weight: math.Max(0, base.Dot(centroid, src.vec))})
		archive[i] = src.c
	}
	model.SortEdges(m.Edges)
	kind := ""
	for k, n := range kinds {
		if kind == "" || n > kinds[kind] || n == kinds[kind] && l.cfg.KindWeight(k) > l.cfg.KindWeight(kind) {
			kind = k
		}
	}
	meta := &messages.MemoryMeta{
		Kind:       kind,
		Importance: importance,
		Labels:     map[string]string{LabelMerge: how, LabelMerged: strconv.Itoa(len(srcs))},
	}
	p, err := l.env.Prepare(m, centroid, meta)
	if err != nil {
		return nil, err
	}
	p.Archive = archive
	return p, ctx.Err()
}

// summary is the text of a merge: the configured summarizer's (an LLM
// summary), else — or when it fails — an extractive one. Only a done
// context is an error.
func (l *Living) summary(ctx context.Context, texts []string) (string, error) {
	if l.summarize != nil {
		text, err := l.summarize(ctx, texts)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if err == nil && strings.TrimSpace(text) != "" {
			return tiers.Truncate(strings.TrimSpace(text), maxSummaryChars), nil
		}
		l.log.Warn("summary failed; the merge is summarised extractively", "err", err)
	}
	var sentences []string
	for _, t := range texts {
		sentences = append(sentences, llm.Sentences(t)...)
	}
	return tiers.Summarize(sentences, nil, 5, maxSummaryChars), nil
}

// maxSummaryChars bounds a merge's text.
const maxSummaryChars = 1500

// Archive marks cs archived in tx: a merge's contribution to the append
// of its memory. Every one must be an active member of sona, or the
// append fails (a merge planned on a state that changed since).
func (l *Living) Archive(tx store.Tx, sona string, cs []cid.Cid) error {
	for _, c := range cs {
		meta, err := l.env.Meta(tx, c)
		if err != nil && !errors.Is(err, base.ErrNotFound) {
			return err
		}
		if err != nil || meta.Archived || meta.Backbone || !slices.Contains(meta.Sonas, sona) {
			return fmt.Errorf("%w: %s is no longer an active memory of sona %s", base.ErrChainConflict, c, sona)
		}
		meta = proto.Clone(meta).(*messages.MemoryMeta)
		meta.Archived = true
		if err := l.env.SetMeta(tx, c, meta); err != nil {
			return err
		}
	}
	return nil
}
