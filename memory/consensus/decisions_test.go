package consensus_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory/consensus"

	"github.com/cockroachdb/datadriven"
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/chain/chaintest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// TestDecisionsGolden drives a ledger over a real (in-memory) store and
// backbone from testdata/decisions: agents contribute versions of
// concepts, each with the embedding the file gives it; the output is
// each decision (status, signal, bounds), what reached the backbone and
// the pending concepts and conflicts left.
// Regenerate with `go test ./memory/consensus -run TestDecisionsGolden -rewrite`.
func TestDecisionsGolden(t *testing.T) {
	testutil.Golden(t, "testdata/decisions", func(t *testing.T) func(*testing.T, *datadriven.TestData) string {
		c := chaintest.Open(t, chain.Options{})
		g := &ledgerGolden{c: c, vecs: map[string][]float32{}, names: map[string]string{}}
		g.l = consensus.NewLedger(c.Store, g, config.Default(), c.Clock)
		return g.run
	})
}

// ledgerGolden is the ledger's Env: the backbone is chaintest's, the
// embedding of a version is the one the test file gave its content.
type ledgerGolden struct {
	c     *chaintest.Chains
	l     *consensus.Ledger
	vecs  map[string][]float32 // content → embedding
	names map[string]string    // conflict id → C1, C2, … in order of appearance
}

func (g *ledgerGolden) Embed(ctx context.Context, texts ...string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, text := range texts {
		v, ok := g.vecs[text]
		if !ok {
			return nil, fmt.Errorf("no embedding for %q in the test file", text)
		}
		out[i] = slices.Clone(v)
	}
	return out, nil
}

func (g *ledgerGolden) AppendBackbone(ctx context.Context, agent, content string, labels map[string]string, also store.Op) (cid.Cid, error) {
	c, _, err := g.c.Backbone.AppendContent(ctx, agent, content, labels, also)
	return c, err
}

func (g *ledgerGolden) ValidateAgentID(id string) error { return base.ValidateAgentID(id) }
func (g *ledgerGolden) Memories() int64                 { return int64(len(g.c.Appended())) }

func (g *ledgerGolden) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	var out strings.Builder
	switch d.Cmd {
	case "contribute":
		var concept, agent, content string
		d.ScanArgs(t, "concept", &concept)
		d.ScanArgs(t, "agent", &agent)
		d.ScanArgs(t, "content", &content)
		g.vecs[content] = testutil.UnitVector(t, d, "vec")
		req := &messages.Contribute{ConceptKey: concept, AgentId: agent, Content: content}
		if d.HasArg("stakes") {
			d.ScanArgs(t, "stakes", &req.Stakes)
		}
		g.c.Clock.Advance(time.Second)
		res, err := g.l.Contribute(ctx, req)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		fmt.Fprintf(&out, "%s: signal %.4f, %d agents, commit at ≥ %.4f, conflict below %.4f\n", res.Status, res.Signal, res.Agents, res.Threshold, res.Lower)
		if res.ConflictId != nil {
			fmt.Fprintf(&out, "conflict %s\n", g.name(*res.ConflictId))
		}
		if res.Cid != nil {
			g.backbone(t, &out, *res.Cid)
		}
	case "resolve":
		var conflict, agent, content string
		d.ScanArgs(t, "conflict", &conflict)
		d.ScanArgs(t, "agent", &agent)
		d.ScanArgs(t, "content", &content)
		id := conflict
		for real, name := range g.names {
			if name == conflict {
				id = real
			}
		}
		c, err := g.l.Resolve(ctx, id, content, agent)
		if err != nil {
			return "error: " + strings.ReplaceAll(err.Error(), id, conflict) + "\n"
		}
		g.backbone(t, &out, c.String())
	case "ledger":
		pending, err := g.l.PendingConcepts()
		if err != nil {
			t.Fatal(err)
		}
		for _, pc := range pending {
			fmt.Fprintf(&out, "pending %s: %s", pc.ConceptKey, versions(pc.Versions))
			if pc.HighStakes {
				out.WriteString(" high stakes")
			}
			if pc.ConflictId != "" {
				fmt.Fprintf(&out, " in conflict %s", g.name(pc.ConflictId))
			}
			out.WriteString("\n")
		}
		conflicts, err := g.l.Conflicts()
		if err != nil {
			t.Fatal(err)
		}
		for _, cf := range conflicts {
			fmt.Fprintf(&out, "conflict %s on %s: %s signal %.4f threshold %.4f\n", g.name(cf.ID), cf.ConceptKey, versions(cf.Record().Versions), cf.Signal, cf.Threshold)
		}
		if out.Len() == 0 {
			out.WriteString("empty\n")
		}
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

// backbone prints the backbone memory c: its author, text and labels.
func (g *ledgerGolden) backbone(t *testing.T, out *strings.Builder, c string) {
	page, err := g.c.Backbone.List(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Items {
		if e.Memory.String() != c {
			continue
		}
		err := g.c.Store.View(func(r store.Reader) error {
			m, err := meta.ReadMemory(r, e.Memory)
			if err != nil {
				return err
			}
			md, err := meta.Read(r, e.Memory)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "backbone %d: %q by %s", e.Seq, m.Text(), md.AgentId)
			for _, k := range slices.Sorted(maps.Keys(md.Labels)) {
				v := md.Labels[k]
				if k == consensus.LabelConflict {
					v = g.name(v)
				}
				fmt.Fprintf(out, " %s=%s", k, v)
			}
			out.WriteString("\n")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is not on the backbone", c)
}

func (g *ledgerGolden) name(id string) string {
	if n, ok := g.names[id]; ok {
		return n
	}
	n := "C" + strconv.Itoa(len(g.names)+1)
	g.names[id] = n
	return n
}

func versions(vs []*messages.Version) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%s %q", v.AgentId, v.Content)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
