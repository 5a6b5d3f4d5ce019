package consensus_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

func TestConsensusCommitPendingConflictResolveSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	clock := clock.NewFake(memorytest.Epoch)
	s := memorytest.Open(t, cfg, clock)
	ctx := context.Background()
	contribute := func(s *memory.Self, agent, key, content, stakes string) *messages.ContributeResult {
		t.Helper()
		r, err := s.Consensus.Contribute(ctx, &messages.Contribute{AgentId: agent, ConceptKey: key, Content: content, Stakes: stakes})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := contribute(s, "grok", "design", "Memory must self-organize.", ""); r.Status != consensus.StatusPending || r.Agents != 1 {
		t.Fatalf("one agent: %+v", r)
	}
	r := contribute(s, "kimi", "design", "Memory must self-organize.", "")
	if r.Status != consensus.StatusCommitted || r.Cid == nil || r.Signal < 0.999 {
		t.Fatalf("agreeing agents: %+v", r)
	}
	bb, _ := s.Backbone.List(0, 10)
	if len(bb.Items) != 1 || bb.Items[0].Memory.String() != *r.Cid {
		t.Fatalf("backbone %+v", bb.Items)
	}
	if meta, _ := s.Memories.Meta(bb.Items[0].Memory); !meta.Backbone || meta.Labels[consensus.LabelConcept] != "design" || meta.Labels[consensus.LabelAgents] != "grok,kimi" {
		t.Fatalf("backbone meta %+v", meta)
	}

	contribute(s, "grok", "weather", "The sky over the harbour is blue and calm today.", "high")
	r = contribute(s, "kimi", "weather", "Quarterly revenue in Europe fell by a third.", "")
	if r.Status != consensus.StatusConflict || r.ConflictId == nil || r.Threshold <= r.Lower {
		t.Fatalf("diverging agents: %+v", r)
	}
	// A conflict keeps the time it began while more versions come in.
	clock.Set(memorytest.Epoch.Add(time.Hour))
	if again := contribute(s, "qwen", "weather", "The sky is calm but revenue fell.", ""); again.Status != consensus.StatusConflict || *again.ConflictId != *r.ConflictId {
		t.Fatalf("third agent on a conflict: %+v", again)
	}
	if cs, _ := s.Consensus.Conflicts(); len(cs) != 1 || cs[0].CreatedAt != memorytest.Epoch.Unix() || len(cs[0].Versions) != 3 {
		t.Fatalf("after a third version: %d conflicts; want one created at %d with 3 versions", len(cs), memorytest.Epoch.Unix())
	}
	contribute(s, "solo", "later", "Only one agent said this.", "")
	s.Close()

	clock.Set(memorytest.Epoch)
	s = memorytest.Open(t, cfg, clock)
	defer s.Close()
	conflicts, _ := s.Consensus.Conflicts()
	pending, _ := s.Consensus.PendingConcepts()
	if len(conflicts) != 1 || conflicts[0].ID != *r.ConflictId || len(conflicts[0].Versions) != 3 || len(pending) != 2 {
		t.Fatalf("after restart: conflicts %v, pending %v", conflicts, pending)
	}
	if _, err := s.Consensus.Resolve(ctx, "no-such-conflict", "x", ""); err == nil {
		t.Fatal("resolved a conflict that does not exist")
	}
	c, err := s.Consensus.Resolve(ctx, *r.ConflictId, "Both happened: calm sky, falling revenue.", "ceo")
	if err != nil {
		t.Fatal(err)
	}
	conflicts, _ = s.Consensus.Conflicts()
	pending, _ = s.Consensus.PendingConcepts()
	bb, _ = s.Backbone.List(0, 10)
	if len(conflicts) != 0 || len(pending) != 1 || len(bb.Items) != 2 || bb.Items[1].Memory != c {
		t.Fatalf("after resolve: conflicts %v, pending %v, backbone %v", conflicts, pending, bb.Items)
	}

	// The backbone is visible to every sona, whatever its scope.
	o := memorytest.NewOwner(t, s, "other")
	o.Text("an unrelated memory")
	rs, err := memorytest.Recall(s, ctx, recall.Query{Sona: o.Sona, Text: "falling revenue and a calm sky", Scope: recall.ScopeSona, Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rs, func(x *recall.Recalled) bool { return x.CID == c }) {
		t.Fatal("a sona does not see the backbone")
	}
	// A direct write names its agent.
	if _, _, err := s.Backbone.Write(ctx, "", "Unattributed.", nil); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("backbone write without an agent: %v", err)
	}
	for _, bad := range []*messages.Contribute{
		{AgentId: "a", ConceptKey: "", Content: "x"},
		{AgentId: "a", ConceptKey: "k", Content: " "},
		{AgentId: "", ConceptKey: "k", Content: "x"},
		{AgentId: "a", ConceptKey: "k", Content: "x", Stakes: "huge"},
	} {
		if _, err := s.Consensus.Contribute(ctx, bad); err == nil {
			t.Fatalf("accepted %+v", bad)
		}
	}
}
