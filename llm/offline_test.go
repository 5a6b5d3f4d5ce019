package llm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

const memories = `# Relevant memories
- I love painting sunsets.
- My sister lives in Lisbon. She visits every spring!
- The quarterly tax filing deadline is April 15.
---
Ada's favourite editor is version 1.5 of Vim.`

// mem is a recalled memory replayed as a user turn, as the prompt builder does.
func mem(content string) Message  { return Message{Role: RoleUser, Content: content} }
func sys(content string) Message  { return Message{Role: RoleSystem, Content: content} }
func user(content string) Message { return Message{Role: RoleUser, Content: content} }
func asst(content string) Message { return Message{Role: RoleAssistant, Content: content} }

func TestOfflineComplete(t *testing.T) {
	tests := []struct {
		name string
		msgs []Message
		want string
	}{
		{
			name: "picks the overlapping sentence",
			msgs: []Message{mem(memories), user("What do I like to paint?")},
			want: "[offline model] From memory: I love painting sunsets.",
		},
		{
			name: "system instructions and own answers are not quoted",
			msgs: []Message{
				sys("You are a sona. If you do not remember something, say so."),
				asst("[offline model] From memory: I remember the painting."),
				user("Do you remember the painting?"),
			},
			want: "[offline model] I don't remember anything about that.",
		},
		{
			name: "nothing overlaps",
			msgs: []Message{mem(memories), user("Which car do I drive?")},
			want: "[offline model] I don't remember anything about that.",
		},
		{
			name: "no context at all",
			msgs: []Message{user("Where does my sister live?")},
			want: "[offline model] I don't remember anything about that.",
		},
		{
			name: "input of stop words only",
			msgs: []Message{mem(memories), user("What is it?")},
			want: "[offline model] I don't remember anything about that.",
		},
		{
			name: "ranks by overlap then position, at most three",
			msgs: []Message{
				mem("Lisbon is sunny. My sister paints. My sister lives in Lisbon. Lisbon has trams. My sister sings."),
				user("Does my sister live in Lisbon?"),
			},
			want: "[offline model] From memory: My sister lives in Lisbon. Lisbon is sunny. My sister paints.",
		},
		{
			name: "does not split decimals",
			msgs: []Message{mem(memories), user("Which editor version?")},
			want: "[offline model] From memory: Ada's favourite editor is version 1.5 of Vim.",
		},
		{
			name: "skips headers and rules",
			msgs: []Message{mem("# Relevant memories\n--- memories about memories ---\nNothing else."), user("Any relevant memories?")},
			want: "[offline model] I don't remember anything about that.",
		},
		{
			name: "never quotes the input back",
			msgs: []Message{
				mem("My sister lives in Lisbon."),
				user("where does my sister live"),
				asst("She lives in Lisbon."),
				user("Where does my sister LIVE?"),
			},
			want: "[offline model] From memory: My sister lives in Lisbon.",
		},
		{
			name: "never quotes earlier questions",
			msgs: []Message{
				user("Do you know where my sister lives?"),
				asst("I don't know yet."),
				user("My sister lives in Lisbon."),
				user("Where does my sister live?"),
			},
			want: "[offline model] From memory: My sister lives in Lisbon.",
		},
		{
			name: "repeated sentences quoted once",
			msgs: []Message{mem("I love painting."), asst("I love painting!"), user("painting?")},
			want: "[offline model] From memory: I love painting.",
		},
		{
			name: "a statement with nothing related is noted",
			msgs: []Message{mem(memories), user("My cat is called Whiskers.")},
			want: "[offline model] Noted.",
		},
		{
			name: "a request without a question mark still asks",
			msgs: []Message{mem(memories), user("Remind me which car I drive")},
			want: "[offline model] I don't remember anything about that.",
		},
		{
			name: "a statement with something related quotes it",
			msgs: []Message{mem(memories), user("I went painting again today.")},
			want: "[offline model] From memory: I love painting sunsets.",
		},
		{
			name: "last user message is the input, later messages ignored",
			msgs: []Message{
				mem(memories),
				user("Tell me about taxes."),
				asst("Sunsets are nice."),
			},
			want: "[offline model] From memory: The quarterly tax filing deadline is April 15.",
		},
	}
	llm := NewOffline()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := llm.Complete(context.Background(), Request{Messages: tt.msgs})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != tt.want {
				t.Errorf("Content:\n got %q\nwant %q", resp.Content, tt.want)
			}
			if resp.Model != OfflineModel {
				t.Errorf("Model = %q, want %q", resp.Model, OfflineModel)
			}
			if resp.StopReason != StopEndTurn {
				t.Errorf("StopReason = %q, want %q", resp.StopReason, StopEndTurn)
			}
		})
	}
}

func TestOfflineErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		req  Request
		want error
	}{
		{"nil messages", context.Background(), Request{}, ErrEmptyRequest},
		{"empty messages", context.Background(), Request{Messages: []Message{}}, ErrEmptyRequest},
		{"no user message", context.Background(), Request{Messages: []Message{sys(memories), asst("hi")}}, ErrNoUserMessage},
		{"cancelled context", cancelled, Request{Messages: []Message{user("hi")}}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := NewOffline().Complete(tt.ctx, tt.req)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if resp != (Response{}) {
				t.Errorf("resp = %+v, want zero", resp)
			}
		})
	}
}

func TestOfflineDeterministic(t *testing.T) {
	req := Request{Messages: []Message{mem(memories), user("Where does my sister live, and when is the tax deadline?")}}
	first, err := NewOffline().Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := NewOffline().Complete(context.Background(), req)
		if err != nil || again != first {
			t.Fatalf("got %+v, %v; want %+v", again, err, first)
		}
	}
}

func TestOfflineMaxTokens(t *testing.T) {
	msgs := []Message{mem(memories), user("Where does my sister live and what do I love painting?")}
	full, err := NewOffline().Complete(context.Background(), Request{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		maxTokens int
		want      string
		stop      StopReason
	}{
		{0, full.Content, StopEndTurn},
		{-1, full.Content, StopEndTurn},
		{1000, full.Content, StopEndTurn},
		{1 << 62, full.Content, StopEndTurn},
		{5, "[offline model] From", StopMaxTokens}, // 20 chars: cut lands on a space
		{6, "[offline model] From", StopMaxTokens}, // 24 chars: back to a word boundary
		{2, "[offline", StopMaxTokens},             // 8 chars: cut lands mid-word, nothing fits but a prefix
		{1, "[off", StopMaxTokens},                 // first word alone too long: hard cut
		{12, "[offline model] From memory: I love painting", StopMaxTokens},
	}
	for _, tt := range tests {
		resp, err := NewOffline().Complete(context.Background(), Request{Messages: msgs, MaxTokens: tt.maxTokens})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != tt.want || resp.StopReason != tt.stop {
			t.Errorf("MaxTokens %d: got %q %q, want %q %q",
				tt.maxTokens, resp.Content, resp.StopReason, tt.want, tt.stop)
		}
		if tt.maxTokens > 0 && tt.maxTokens < 1<<20 && utf8.RuneCountInString(resp.Content) > tt.maxTokens*4 {
			t.Errorf("MaxTokens %d: reply has %d chars", tt.maxTokens, utf8.RuneCountInString(resp.Content))
		}
		if !strings.HasPrefix(full.Content, resp.Content) {
			t.Errorf("MaxTokens %d: %q is not a prefix of the full reply", tt.maxTokens, resp.Content)
		}
	}
}

func TestTruncateWordsUnicode(t *testing.T) {
	tests := []struct {
		in        string
		limit     int
		want      string
		truncated bool
	}{
		{"héllo wörld", 11, "héllo wörld", false},
		{"héllo wörld", 10, "héllo", true},
		{"héllo wörld", 6, "héllo", true},
		{"héllo wörld", 3, "hél", true},
		{"東京 大阪 京都", 5, "東京 大阪", true},
	}
	for _, tt := range tests {
		got, truncated := truncateWords(tt.in, tt.limit)
		if got != tt.want || truncated != tt.truncated {
			t.Errorf("truncateWords(%q, %d) = %q, %v; want %q, %v",
				tt.in, tt.limit, got, truncated, tt.want, tt.truncated)
		}
	}
}

func TestSplitSentences(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"One. Two! Three? Four", []string{"One.", "Two!", "Three?", "Four"}},
		{"Wait... what?! ok", []string{"Wait...", "what?!", "ok"}},
		{"v1.5 is out. See example.com.", []string{"v1.5 is out.", "See example.com."}},
		{"# Header\n--- rule\n- bullet one\n* bullet two\n\n  • bullet three  ", []string{"bullet one", "bullet two", "bullet three"}},
		{"line one\r\nline two", []string{"line one", "line two"}},
	}
	for _, tt := range tests {
		if got := splitSentences(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("splitSentences(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
