package living

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

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

// Dream mode (XmetaV): after a long idle time, each sona's recent memories
// are consolidated into insights, stored as `note` memories with edges to
// their sources and indexed under g/.

// Insight categories.
const (
	InsightPattern        = "pattern"
	InsightRecommendation = "recommendation"
	InsightSummary        = "summary"
	InsightCorrection     = "correction"
)

// keyInsight prefixes the index of the insights (g/ + log seq).
var keyInsight = []byte("g/")

// PutInsight indexes the insight memory c, created at insertion-log
// position logSeq, in tx: the append's contribution for a memory with an
// insight mark.
func PutInsight(tx store.Tx, logSeq uint64, c cid.Cid) {
	tx.Set(base.Join(keyInsight, base.U64(logSeq)), c.Bytes())
}

// DreamInput is one recent memory a dream consolidates.
type DreamInput struct {
	CID  cid.Cid
	Text string
	Kind string
	Vec  []float32 // unit length
}

// InsightDraft is an insight before it is stored.
type InsightDraft struct {
	Insight    string
	Category   string
	Confidence float64
	Sources    []cid.Cid
}

// Dream consolidates recent memories (oldest first) into insights, without
// a model: every group of memories that are similar to its first one (at
// least similar, the emergent threshold of the sona's similarity
// distribution) is a pattern, confident as the group is tight and large;
// errors make a correction, goals a recommendation; and the whole window a
// summary, trusted when it spans at least three memories. Deterministic.
func Dream(recent []DreamInput, similar float64) []InsightDraft {
	if len(recent) == 0 {
		return nil
	}
	var out []InsightDraft
	type group struct {
		members []int
		sim     float64 // sum of the members' similarity to the first
	}
	var groups []*group
	for i, in := range recent {
		joined := false
		for _, g := range groups {
			if sim := base.Dot(recent[g.members[0]].Vec, in.Vec); sim >= similar {
				g.members = append(g.members, i)
				g.sim += sim
				joined = true
				break
			}
		}
		if !joined {
			groups = append(groups, &group{members: []int{i}})
		}
	}
	for _, g := range groups {
		if len(g.members) < 2 {
			continue
		}
		var texts []string
		var srcs []cid.Cid
		for _, i := range g.members {
			texts = append(texts, recent[i].Text)
			srcs = append(srcs, recent[i].CID)
		}
		tight := g.sim / float64(len(g.members)-1)
		size := math.Min(1, float64(len(g.members))/5)
		out = append(out, InsightDraft{
			Insight:    fmt.Sprintf("Recurring theme (%s) across %d memories: %s", strings.Join(themes(texts, 3), ", "), len(g.members), summarize(texts, 1, 300)),
			Category:   InsightPattern,
			Confidence: clamp01(0.5*math.Max(0, tight) + 0.5*size),
			Sources:    srcs,
		})
	}
	for _, k := range []struct{ kind, category, lead string }{
		{"error", InsightCorrection, "Avoid repeating what went wrong"},
		{"goal", InsightRecommendation, "Keep working toward"},
	} {
		var texts []string
		var srcs []cid.Cid
		for _, in := range recent {
			if in.Kind == k.kind {
				texts = append(texts, in.Text)
				srcs = append(srcs, in.CID)
			}
		}
		if len(srcs) > 0 {
			out = append(out, InsightDraft{
				Insight:    k.lead + ": " + summarize(texts, 2, 400),
				Category:   k.category,
				Confidence: clamp01(0.5 + 0.1*float64(len(srcs)-1)),
				Sources:    srcs,
			})
		}
	}
	if len(recent) >= 2 {
		var texts []string
		var srcs []cid.Cid
		for _, in := range recent {
			texts = append(texts, in.Text)
			srcs = append(srcs, in.CID)
		}
		conf := 0.3
		if len(recent) >= 3 {
			conf = 0.5
		}
		out = append(out, InsightDraft{
			Insight:    "Summary of recent memories: " + summarize(texts, 3, 600),
			Category:   InsightSummary,
			Confidence: conf,
			Sources:    srcs,
		})
	}
	return out
}

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

func summarize(texts []string, sentences, chars int) string {
	var all []string
	for _, t := range texts {
		all = append(all, llm.Sentences(t)...)
	}
	return tiers.Summarize(all, nil, sentences, chars)
}

// themes returns the n terms most frequent across texts (stems, so that
// "lives" and "living" count as one), each shown as the word it was most
// often written as in texts (on a tie, the form written first): "lives",
// not the stem "liv".
func themes(texts []string, n int) []string {
	type form struct {
		text string
		n    int
	}
	weights := map[string]float64{}
	forms := map[string][]form{} // by stem, in the order first written
	for _, t := range texts {
		for _, w := range llm.TokenizeWords(t) {
			weights[w.Token]++
			fs := forms[w.Token]
			if i := slices.IndexFunc(fs, func(f form) bool { return f.text == w.Text }); i >= 0 {
				fs[i].n++
			} else {
				forms[w.Token] = append(fs, form{w.Text, 1})
			}
		}
	}
	top := tiers.TopTerms(weights, n)
	out := make([]string, len(top))
	for i, k := range top {
		best := form{}
		for _, f := range forms[k.Term] {
			if f.n > best.n {
				best = f
			}
		}
		out[i] = best.text
	}
	return out
}

// DreamPlan is one sona's dream: the insight memories to append and the
// chain length it covers.
type DreamPlan struct {
	Sona     string
	Length   int64
	Insights []*model.Prepared
}

// PlanDream plans a dream for every sona whose chain grew since it last
// dreamed: Dream over its latest heartbeat.dream_recent memories (not
// insights, merges or archived), each insight embedded and prepared as a
// `note` memory with edges to its sources.
func (l *Living) PlanDream(ctx context.Context) ([]*DreamPlan, error) {
	st, err := l.HeartbeatState()
	if err != nil {
		return nil, err
	}
	lengths := l.env.Lengths()
	backbone := l.env.BackboneSona()
	ids := make([]string, 0, len(lengths))
	for id, n := range lengths {
		if n > st.Dreamed[id] && id != backbone {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []*DreamPlan
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		recent, err := l.recentForDream(id, lengths[id])
		if err != nil {
			return nil, err
		}
		stats, n, err := l.env.SimStats(id)
		if err != nil {
			return nil, err
		}
		similar := assoc.EmergentThreshold(l.cfg.Threshold, l.cfg.Threshold.RetrievalBeta, stats, n).Value
		plan := &DreamPlan{Sona: id, Length: lengths[id]}
		now := l.clock.Now().Unix()
		for _, d := range Dream(recent, similar) {
			p, err := l.prepareInsight(ctx, d, now)
			if err != nil {
				return nil, err
			}
			plan.Insights = append(plan.Insights, p)
		}
		out = append(out, plan)
	}
	return out, nil
}

// recentForDream reads the sona's latest memories that a dream considers
// (not insights, merges or archived), oldest first.
func (l *Living) recentForDream(id string, length int64) ([]DreamInput, error) {
	members, err := l.chainMembers(id, length, l.cfg.Heartbeat.DreamRecent, func(meta *messages.MemoryMeta) bool {
		return meta.Insight == nil && !meta.Archived && meta.Labels[LabelMerge] == ""
	})
	out := make([]DreamInput, len(members))
	for i, m := range members {
		out[i] = DreamInput{CID: m.c, Text: m.m.Text(), Kind: m.meta.Kind, Vec: m.vec}
	}
	return out, err
}

func (l *Living) prepareInsight(ctx context.Context, d InsightDraft, now int64) (*model.Prepared, error) {
	vecs, err := l.env.Embed(ctx, d.Insight)
	if err != nil {
		return nil, err
	}
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: d.Insight}}, Timestamp: &now}
	for _, c := range d.Sources {
		m.Edges = append(m.Edges, model.Edge{Target: c, Weight: d.Confidence})
	}
	model.SortEdges(m.Edges)
	return l.env.Prepare(m, vecs[0], &messages.MemoryMeta{
		Kind:    "note",
		Insight: &messages.InsightMark{Category: d.Category, Confidence: d.Confidence},
	})
}

// NoteDream records that the sonas of plans dreamed (up to the chain
// length each plan covered, and its insights), at now.
func (l *Living) NoteDream(ctx context.Context, plans []*DreamPlan, now time.Time) error {
	return l.store.Update(ctx, func(tx store.Tx) error {
		st := &messages.HeartbeatState{}
		if _, err := store.GetProto(tx, keyHeartbeat, st); err != nil {
			return err
		}
		if st.Dreamed == nil {
			st.Dreamed = map[string]int64{}
		}
		for _, p := range plans {
			// The insights themselves lengthen the chain: not news for the next dream.
			st.Dreamed[p.Sona] = max(st.Dreamed[p.Sona], p.Length+int64(len(p.Insights)))
		}
		st.LastDream = now.Unix()
		raw, err := proto.Marshal(st)
		if err != nil {
			return err
		}
		tx.Set(keyHeartbeat, raw)
		return nil
	})
}

// Insights lists stored insights, newest first, up to limit.
func (l *Living) Insights(limit int) ([]Insight, error) {
	var out []Insight
	err := l.store.View(func(txn store.Reader) error {
		it := txn.NewIterator(store.IterOptions{Prefix: keyInsight, Reverse: true})
		defer it.Close()
		for it.Seek(append(slices.Clone(keyInsight), 0xff)); it.Valid() && len(out) < limit; it.Next() {
			var c cid.Cid
			err := it.Item().Value(func(v []byte) error {
				var err error
				c, err = cid.Cast(v)
				return err
			})
			if err != nil {
				return fmt.Errorf("%w: insight index: %v", base.ErrCorrupt, err)
			}
			meta, err := l.env.Meta(txn, c)
			if errors.Is(err, base.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			m, err := l.env.Memory(txn, c)
			if err != nil {
				return err
			}
			var sona string
			if len(meta.Sonas) > 0 {
				sona = meta.Sonas[0]
			}
			out = append(out, InsightOf(c, m, meta.Insight, sona, meta.CreatedAt))
		}
		return nil
	})
	return out, err
}

// DeleteInsight takes the insight c, created at insertion-log position
// logSeq, out of the index (it was forgotten), in tx.
func DeleteInsight(tx store.Tx, logSeq uint64, c cid.Cid) {
	key := base.Join(keyInsight, base.U64(logSeq))
	if v, err := tx.Get(key); err == nil && bytes.Equal(v, c.Bytes()) {
		tx.Delete(key)
	}
}
