package prompt

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
)

// Input is what a sona step shows its model.
type Input struct {
	SonaName string
	// Recalled memories in topological order (as Recall returns them).
	Recalled []*recall.Recalled
	// Tiers is what MemoryOS retrieval found (nil: none).
	Tiers *tiers.Recall
	// Input is the new input, and InputName its speaker (optional).
	Input     string
	InputName string
	MaxTokens int
	// ContextTokens is the model's context window (0: unbounded); the
	// prompt is cut to fit it with MaxTokens left for the reply.
	ContextTokens int
}

// Build assembles the model request for one step, deterministically:
//
//  1. a system message naming the sona and explaining the memories, with
//     the long-term persona (the user's profile, knowledge and traits; the
//     agent's profile and traits) and the mid-term pages retrieved for the
//     input, when the tiers gave any;
//  2. the recalled memories replayed in order, each as the turn it was:
//     the sona's own words as assistant turns, everything else as user
//     turns, each prefixed with its date;
//  3. the short-term pages (the latest dialogue), as turns, oldest first;
//  4. the input as the last user turn.
//
// A memory shows once: recalled memories that are part of a short- or
// mid-term page are shown there. When the prompt exceeds the context
// budget, the lowest-scored recalled memories go first, then the
// lowest-scored mid-term pages, then the least relevant knowledge and
// agent traits, then the oldest short-term pages; the input always stays.
//
// Memories are immutable and shown as what happened when, so the model
// sees a consistent, append-only past (seed 000, "Theory").
func Build(in Input) llm.Request {
	p := newPromptParts(in)
	if in.ContextTokens > 0 {
		return llm.Request{Messages: p.fit(in.ContextTokens - in.MaxTokens), MaxTokens: in.MaxTokens}
	}
	return llm.Request{Messages: p.messages(), MaxTokens: in.MaxTokens}
}

// promptParts are the droppable pieces of a prompt.
type promptParts struct {
	in       Input
	recalled []*recall.Recalled // topological order
	mtm      []tiers.RecalledPage
	persona  *tiers.Persona
	stm      []tiers.PageText
}

func newPromptParts(in Input) *promptParts {
	p := &promptParts{in: in, recalled: in.Recalled}
	if t := in.Tiers; t != nil {
		p.stm, p.mtm, p.persona = t.STM, t.MTM, t.Persona
		if p.persona != nil {
			// fit cuts the copy's lists, never their facts: a copy of
			// the struct, not of the facts and their embeddings (a deep
			// copy was a fiftieth of the bytes a long-lived sona's advance
			// allocated, issue 15, stop 105).
			cut := *p.persona
			p.persona = &cut
		}
		shown := map[string]bool{}
		for _, pg := range append(slices.Clone(t.STM), pageTexts(t.MTM)...) {
			shown[pg.Page.Q], shown[pg.Page.R] = true, true
		}
		p.recalled = slices.DeleteFunc(slices.Clone(in.Recalled), func(r *recall.Recalled) bool { return shown[r.CID.String()] })
	}
	return p
}

func pageTexts(rs []tiers.RecalledPage) []tiers.PageText {
	out := make([]tiers.PageText, len(rs))
	for i, r := range rs {
		out[i] = r.PageText
	}
	return out
}

// fit drops pieces, least valuable first, until the prompt's estimated
// tokens fit budget, and returns the prompt's messages. Each message is
// built and counted once, and a piece's tokens are taken off the total as
// it goes; only the system message, which the mid-term pages and the
// persona are part of, is built and counted again when one of them goes.
// (Rebuilt and counted whole for each piece dropped, a long-lived sona's
// prompt was 61 KB allocated an advance, issue 15, stop 99.)
func (p *promptParts) fit(budget int) []llm.Message {
	system, input := p.systemMessage(), p.inputMessage()
	systemTokens := messageTokens(system)
	total := systemTokens + messageTokens(input)
	recalled := make([]llm.Message, len(p.recalled))
	recalledTokens := make([]int, len(p.recalled))
	for i, r := range p.recalled {
		recalled[i] = recalledMessage(r)
		recalledTokens[i] = messageTokens(recalled[i])
		total += recalledTokens[i]
	}
	stm := make([][2]llm.Message, len(p.stm))
	stmTokens := make([]int, len(p.stm))
	for i, pg := range p.stm {
		stm[i] = stmMessages(pg)
		stmTokens[i] = messageTokens(stm[i][0]) + messageTokens(stm[i][1])
		total += stmTokens[i]
	}
	rebuild := func() { // the system message changed
		system = p.systemMessage()
		total -= systemTokens
		systemTokens = messageTokens(system)
		total += systemTokens
	}
	for total > budget && len(p.recalled) > 0 {
		worst := 0
		for i, r := range p.recalled {
			if r.Score < p.recalled[worst].Score {
				worst = i
			}
		}
		total -= recalledTokens[worst]
		p.recalled = slices.Delete(p.recalled, worst, worst+1)
		recalled = slices.Delete(recalled, worst, worst+1)
		recalledTokens = slices.Delete(recalledTokens, worst, worst+1)
	}
	for total > budget && len(p.mtm) > 0 {
		p.mtm = p.mtm[:len(p.mtm)-1] // best first
		rebuild()
	}
	for total > budget && p.persona != nil && (len(p.persona.User.Knowledge) > 0 || len(p.persona.Agent.Traits) > 0) {
		if u := &p.persona.User; len(u.Knowledge) >= len(p.persona.Agent.Traits) {
			u.Knowledge = u.Knowledge[:len(u.Knowledge)-1] // best first
		} else {
			a := &p.persona.Agent
			a.Traits = a.Traits[:len(a.Traits)-1]
		}
		rebuild()
	}
	for total > budget && len(stm) > 0 {
		total -= stmTokens[0]
		stm, stmTokens = stm[1:], stmTokens[1:]
	}
	return assemble(system, recalled, stm, input)
}

// EstimateTokens estimates a request's prompt tokens: a token per four
// characters and four per message.
func EstimateTokens(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += messageTokens(m)
	}
	return n
}

// messageTokens is one message's share of EstimateTokens.
func messageTokens(m llm.Message) int {
	return 4 + (utf8.RuneCountInString(m.Content)+utf8.RuneCountInString(m.Name)+3)/4
}

func (p *promptParts) messages() []llm.Message {
	recalled := make([]llm.Message, len(p.recalled))
	for i, r := range p.recalled {
		recalled[i] = recalledMessage(r)
	}
	stm := make([][2]llm.Message, len(p.stm))
	for i, pg := range p.stm {
		stm[i] = stmMessages(pg)
	}
	return assemble(p.systemMessage(), recalled, stm, p.inputMessage())
}

// assemble puts a prompt's messages in their order: the system message,
// the recalled memories, the short-term pages' turns, the input.
func assemble(system llm.Message, recalled []llm.Message, stm [][2]llm.Message, input llm.Message) []llm.Message {
	msgs := make([]llm.Message, 0, len(recalled)+2*len(stm)+2)
	msgs = append(append(msgs, system), recalled...)
	for _, turns := range stm {
		msgs = append(msgs, turns[0], turns[1])
	}
	return append(msgs, input)
}

func (p *promptParts) systemMessage() llm.Message {
	return llm.Message{Role: llm.RoleSystem, Content: p.system()}
}

// recalledMessage is a recalled memory as the turn it was.
func recalledMessage(r *recall.Recalled) llm.Message {
	role := llm.RoleUser
	if r.Memory.Data.Self != nil {
		role = llm.RoleAssistant
	}
	return llm.Message{Role: role, Name: model.Speaker(r.Memory), Content: stamp(r.Time()) + r.Memory.Text()}
}

// stmMessages are a short-term page as its two turns.
func stmMessages(pg tiers.PageText) [2]llm.Message {
	role := llm.RoleUser
	if pg.RSelf {
		role = llm.RoleAssistant
	}
	return [2]llm.Message{{Role: llm.RoleUser, Name: pg.QName, Content: stamp(pg.Page.T) + pg.Q},
		{Role: role, Name: pg.RName, Content: stamp(pg.Page.T) + pg.R}}
}

func (p *promptParts) inputMessage() llm.Message {
	return llm.Message{Role: llm.RoleUser, Name: p.in.InputName, Content: p.in.Input}
}

func stamp(unix int64) string {
	return "[" + time.Unix(unix, 0).UTC().Format("2006-01-02 15:04") + "] "
}

// system is the system message: who the sona is, its persona and the
// mid-term pages.
func (p *promptParts) system() string {
	var b strings.Builder
	fmt.Fprintf(&b, "You are %s, one sona of a self whose memories are replayed below in the order they happened. "+
		"Memories are immutable records of the past; answer the last message in the light of them. "+
		"If you do not remember something, say so.", p.in.SonaName)
	var persona tiers.Persona
	if p.persona != nil {
		persona = *p.persona
	}
	if u := persona.User; len(u.Profile) > 0 || len(u.Knowledge) > 0 || len(u.Traits) > 0 {
		b.WriteString("\n\nWhat you know about the user (long-term memory):")
		writeProfile(&b, u.Profile)
		for _, f := range u.Knowledge {
			b.WriteString("\n- " + f.Text)
		}
		if len(u.Traits) > 0 {
			b.WriteString("\nTraits:")
			for i, t := range u.Traits {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, " %s %.2f", t.Dimension, t.Level)
			}
		}
	}
	if a := persona.Agent; len(a.Profile) > 0 || len(a.Traits) > 0 {
		b.WriteString("\n\nYour own persona:")
		writeProfile(&b, a.Profile)
		for _, f := range a.Traits {
			b.WriteString("\n- " + f.Text)
		}
	}
	if len(p.mtm) > 0 {
		b.WriteString("\n\nEarlier conversations that bear on this (mid-term memory):")
		for _, pg := range p.mtm {
			b.WriteString("\n" + stamp(pg.Page.T))
			b.WriteString(strings.Join(pg.Lines(), " / "))
		}
	}
	return b.String()
}

func writeProfile(b *strings.Builder, profile map[string]string) {
	if len(profile) == 0 {
		return
	}
	b.WriteString("\nProfile:")
	for i, k := range slices.Sorted(maps.Keys(profile)) {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(b, " %s: %s", k, profile[k])
	}
}

// TextMemory builds an input memory: `other` when the speaker is named,
// else `text`.
func TextMemory(content, name string, ts int64, edges []model.Edge) *model.Memory {
	m := &model.Memory{Timestamp: &ts, Edges: edges}
	if strings.TrimSpace(name) != "" {
		m.Data.Other = &model.OtherData{Name: &name, Content: content}
	} else {
		m.Data.Text = &model.TextData{Content: content}
	}
	model.SortEdges(m.Edges)
	return m
}

// ResponseMemory builds the sona's response memory from a model response.
func ResponseMemory(sonaName string, resp llm.Response, ts int64, edges []model.Edge) *model.Memory {
	part := model.Part{Content: resp.Content}
	if resp.Model != "" {
		name := resp.Model
		part.Model = &name
	}
	self := &model.SelfData{Name: sonaName, Parts: []model.Part{part}}
	if resp.StopReason != "" {
		sr := string(resp.StopReason)
		self.StopReason = &sr
	}
	m := &model.Memory{Data: model.Data{Self: self}, Timestamp: &ts, Edges: edges}
	model.SortEdges(m.Edges)
	return m
}
