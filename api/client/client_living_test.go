package client_test

import (
	"context"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/messages"
)

// TestClientLiving drives the upkeep routes through the client: heartbeat
// and dream, insights, compact, the backbone and its consensus.
func TestClientLiving(t *testing.T) {
	transports(t, func(t *testing.T, c *client.Client, a *app.App) {
		ctx := context.Background()
		s, err := c.CreateSona(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{
			"I planted tomatoes and basil in my garden this spring.",
			"My garden tomatoes need more water in the summer heat.",
			"The tomatoes in my garden are finally turning red.",
		} {
			if _, err := c.Chat(ctx, s.Uuid, &messages.ChatRequest{Content: line}); err != nil {
				t.Fatal(err)
			}
		}

		// A plain tick does not dream (alice was just active); a forced one does.
		rep, err := c.Heartbeat(ctx, false)
		if err != nil || rep.Dreamed || rep.Swept != 6 || !rep.PassComplete {
			t.Fatalf("Heartbeat(false) = %v, %v", rep, err)
		}
		rep, err = c.Heartbeat(ctx, true)
		if err != nil || !rep.Dreamed || len(rep.Insights) == 0 {
			t.Fatalf("Heartbeat(true) = %v, %v", rep, err)
		}
		var dreamt []string
		for _, in := range rep.Insights {
			if in.Sona != s.Uuid || in.Cid == "" || len(in.Sources) == 0 {
				t.Fatalf("insight %v", in)
			}
			dreamt = append(dreamt, in.Cid)
		}
		slices.Reverse(dreamt) // the list is newest first
		ins, err := c.Insights(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, in := range ins.Items {
			listed = append(listed, in.Cid)
		}
		if !slices.Equal(listed, dreamt) {
			t.Fatalf("Insights = %v, want %v", listed, dreamt)
		}
		if one, err := c.Insights(ctx, 1); err != nil || len(one.Items) != 1 || one.Items[0].Cid != dreamt[0] {
			t.Fatalf("Insights(1) = %v, %v", one, err)
		}
		if rep, err := c.Compact(ctx); err != nil || !rep.PassComplete || rep.Dreamed {
			t.Fatalf("Compact = %v, %v", rep, err)
		}

		// The backbone: a direct write, then consensus.
		w, err := c.WriteBackbone(ctx, &messages.WriteBackbone{AgentId: "grok", Content: "The user's name is Demos.", ConceptKey: "name"})
		if err != nil || w.Existed || w.Cid == "" {
			t.Fatalf("WriteBackbone = %v, %v", w, err)
		}
		if again, err := c.WriteBackbone(ctx, &messages.WriteBackbone{AgentId: "grok", Content: "The user's name is Demos.", ConceptKey: "name"}); err != nil || !again.Existed || again.Cid != w.Cid {
			t.Fatalf("WriteBackbone again = %v, %v", again, err)
		}
		contribute := func(agent, content string) *messages.ContributeResult {
			t.Helper()
			r, err := c.Contribute(ctx, &messages.Contribute{AgentId: agent, ConceptKey: "weather", Content: content})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if r := contribute("grok", "The sky over the harbour is blue and calm today."); r.Status != "pending" || r.Agents != 1 || r.ConflictId != nil || r.Cid != nil {
			t.Fatalf("first contribution %v", r)
		}
		r := contribute("kimi", "Quarterly revenue in Europe fell by a third.")
		if r.Status != "conflict" || r.ConflictId == nil || r.Signal >= r.Lower {
			t.Fatalf("diverging contribution %v", r)
		}
		p, err := c.Pending(ctx)
		if err != nil || len(p.Items) != 1 || p.Items[0].GetConflictId() != *r.ConflictId || len(p.Items[0].Versions) != 2 {
			t.Fatalf("Pending = %v, %v", p, err)
		}
		cs, err := c.Conflicts(ctx)
		if err != nil || len(cs.Items) != 1 || cs.Items[0].ConflictId != *r.ConflictId || cs.Items[0].ConceptKey != "weather" ||
			cs.Items[0].Versions[1].AgentId != "kimi" {
			t.Fatalf("Conflicts = %v, %v", cs, err)
		}
		res, err := c.ResolveConflict(ctx, *r.ConflictId, "A calm sky and falling revenue.", "ceo")
		if err != nil || res.Cid == "" {
			t.Fatalf("ResolveConflict = %v, %v", res, err)
		}
		if cs, err := c.Conflicts(ctx); err != nil || len(cs.Items) != 0 {
			t.Fatalf("Conflicts after resolve = %v, %v", cs, err)
		}
		if p, err := c.Pending(ctx); err != nil || len(p.Items) != 0 {
			t.Fatalf("Pending after resolve = %v, %v", p, err)
		}
		var backbone []string
		cursor := ""
		for {
			page, err := c.Backbone(ctx, cursor, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page.Items {
				backbone = append(backbone, m.Cid)
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		if want := []string{w.Cid, res.Cid}; !slices.Equal(backbone, want) {
			t.Fatalf("Backbone = %v, want %v", backbone, want)
		}
	})
}

func TestClientLivingErrors(t *testing.T) {
	transports(t, func(t *testing.T, c *client.Client, a *app.App) {
		ctx := context.Background()
		_, err := c.Insights(ctx, 100000)
		wantAPIError(t, err, 400, "invalid_limit")
		_, err = c.Backbone(ctx, "x", 0)
		wantAPIError(t, err, 400, "invalid_cursor")
		_, err = c.WriteBackbone(ctx, &messages.WriteBackbone{Content: "Unattributed."})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.WriteBackbone(ctx, &messages.WriteBackbone{AgentId: "a"})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.Contribute(ctx, &messages.Contribute{AgentId: "a", ConceptKey: "k", Content: "x", Stakes: "huge"})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.ResolveConflict(ctx, "no-such-conflict", "x", "")
		wantAPIError(t, err, 404, "not_found")
		_, err = c.ResolveConflict(ctx, "no-such-conflict", "", "")
		wantAPIError(t, err, 400, "invalid")
		if h, err := c.Health(ctx); err != nil || h.Memories != 0 || h.Sonas != 0 {
			t.Fatalf("refused requests wrote: %v, %v", h, err)
		}
	})
}
