package memory

import (
	"fmt"
	"strings"
	"time"

	"github.com/memoria-ai/memoria/llm"
)

// PromptInput is what a sona step shows its model.
type PromptInput struct {
	SonaName string
	// Recalled memories in topological order (as Recall returns them).
	Recalled []*Recalled
	// Input is the new input, and InputName its speaker (optional).
	Input     string
	InputName string
	MaxTokens int
}

// BuildPrompt assembles the model request for one step, deterministically:
//
//  1. a system message naming the sona and explaining the memories;
//  2. the recalled memories replayed in order, each as the turn it was:
//     the sona's own words as assistant turns, everything else as user
//     turns, each prefixed with its date;
//  3. the input as the last user turn.
//
// Memories are immutable and shown as what happened when, so the model
// sees a consistent, append-only past (seed 000, "Theory").
func BuildPrompt(in PromptInput) llm.Request {
	msgs := make([]llm.Message, 0, len(in.Recalled)+2)
	msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: fmt.Sprintf(
		"You are %s, one sona of a self whose memories are replayed below in the order they happened. "+
			"Memories are immutable records of the past; answer the last message in the light of them. "+
			"If you do not remember something, say so.", in.SonaName)})
	for _, r := range in.Recalled {
		role := llm.RoleUser
		if r.Memory.Data.Self != nil {
			role = llm.RoleAssistant
		}
		msgs = append(msgs, llm.Message{
			Role:    role,
			Name:    speaker(r.Memory),
			Content: "[" + time.Unix(r.Time(), 0).UTC().Format("2006-01-02 15:04") + "] " + r.Memory.Text(),
		})
	}
	msgs = append(msgs, llm.Message{Role: llm.RoleUser, Name: in.InputName, Content: in.Input})
	return llm.Request{Messages: msgs, MaxTokens: in.MaxTokens}
}

func speaker(m *Memory) string {
	switch d := m.Data; {
	case d.Self != nil:
		return d.Self.Name
	case d.Other != nil && d.Other.Name != nil:
		return *d.Other.Name
	}
	return ""
}

// said is what a memory says, without its speaker's name.
func said(m *Memory) string {
	if o := m.Data.Other; o != nil {
		return o.Content
	}
	return m.Text()
}

// TextMemory builds an input memory: `other` when the speaker is named,
// else `text`.
func TextMemory(content, name string, ts int64, edges []Edge) *Memory {
	m := &Memory{Timestamp: &ts, Edges: edges}
	if strings.TrimSpace(name) != "" {
		m.Data.Other = &OtherData{Name: &name, Content: content}
	} else {
		m.Data.Text = &TextData{Content: content}
	}
	SortEdges(m.Edges)
	return m
}

// ResponseMemory builds the sona's response memory from a model response.
func ResponseMemory(sonaName string, resp llm.Response, ts int64, edges []Edge) *Memory {
	part := Part{Content: resp.Content}
	if resp.Model != "" {
		model := resp.Model
		part.Model = &model
	}
	self := &SelfData{Name: sonaName, Parts: []Part{part}}
	if resp.StopReason != "" {
		sr := string(resp.StopReason)
		self.StopReason = &sr
	}
	m := &Memory{Data: Data{Self: self}, Timestamp: &ts, Edges: edges}
	SortEdges(m.Edges)
	return m
}
