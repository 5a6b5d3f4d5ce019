package anchor

import (
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

func TestContainsPhrase(t *testing.T) {
	for _, tc := range []struct {
		text, phrase string
		want         bool
	}{
		{"the api had an outage.", "outage", true},
		{"outages happen", "outage", false}, // whole words only
		{"a blackoutage", "outage", false},
		{"it went   down at noon", "went down", true}, // any white space between words
		{"it went\ndown", "went down", true},
		{"wentdown", "went down", false},
		{"we went downstairs", "went down", false},
		{"see the post-mortem", "post-mortem", true},
		{"v2 released, v1 shipped", "shipped", true},
		{"décision prise", "décision", true},
		{"", "x", false},
		{"x", "", false},
	} {
		if got := containsPhrase(tc.text, tc.phrase); got != tc.want {
			t.Errorf("containsPhrase(%q, %q) = %v, want %v", tc.text, tc.phrase, got, tc.want)
		}
	}
}

func TestAnchorRulesMatch(t *testing.T) {
	rules := CompileRules(config.Anchoring{Rules: []config.AnchorRule{
		{Category: "milestone", Labels: map[string]string{"anchor": "milestone"}},
		{Category: "flagged", Labels: map[string]string{"flag": "*"}},
		{Category: "incident", Kinds: []string{"error"}, Words: []string{"Went Down"}},
		{Category: "incident", Data: []string{"text"}, Words: []string{"outage"}},
		{Category: "decision", Words: []string{"decided"}},
	}})
	text := func(s string) *model.Memory {
		return &model.Memory{Data: model.Data{Text: &model.TextData{Content: s}}}
	}
	self := func(s string) *model.Memory {
		return &model.Memory{Data: model.Data{Self: &model.SelfData{Name: "a", Parts: []model.Part{{Content: s}}}}}
	}
	for _, tc := range []struct {
		name string
		m    *model.Memory
		meta *messages.MemoryMeta
		want string
	}{
		{"label", text("nothing special"), &messages.MemoryMeta{Labels: map[string]string{"anchor": "Milestone"}}, "milestone"},
		{"other label value", text("nothing special"), &messages.MemoryMeta{Labels: map[string]string{"anchor": "other"}}, ""},
		{"any value", text("x"), &messages.MemoryMeta{Labels: map[string]string{"flag": "red"}}, "flagged"},
		{"kind and words", text("The API went down"), &messages.MemoryMeta{Kind: "error"}, "incident"},
		{"words without the kind", text("The API went down"), &messages.MemoryMeta{Kind: "note"}, ""},
		{"data kind", text("an OUTAGE today"), &messages.MemoryMeta{}, "incident"},
		{"not that data kind", self("an outage today"), &messages.MemoryMeta{}, ""},
		{"first match wins", text("we decided after the outage"), &messages.MemoryMeta{}, "incident"},
		{"later rule", self("I decided"), &messages.MemoryMeta{}, "decision"},
		{"nothing", text("lunch was pasta"), &messages.MemoryMeta{}, ""},
	} {
		got, ok := rules.Match(tc.m, tc.meta)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: Match = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := CompileRules(config.Anchoring{}).Match(text("outage"), &messages.MemoryMeta{}); ok {
		t.Error("no rules anchored something")
	}
}
