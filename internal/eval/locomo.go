// Package eval measures recall on LoCoMo conversations (Maharana et al.,
// ACL 2024): it reads the conversation files, and scores, for each
// question, how many of its evidence turns a recall brings back.
package eval

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Conversation is one LoCoMo conversation.
type Conversation struct {
	ID       string // the file name without extension, e.g. conv-26
	Speakers [2]string
	Sessions []Session
	QA       []QA
}

// Session is one sitting of a conversation.
type Session struct {
	N     int
	Time  time.Time
	Turns []Turn
}

// Turn is one utterance.
type Turn struct {
	Speaker string
	DiaID   string // e.g. D1:3
	Text    string
	Caption string // BLIP caption of a shared image, if any
}

// Content is the turn's text with its image caption appended.
func (t Turn) Content() string {
	if t.Caption == "" {
		return t.Text
	}
	return t.Text + " [shares an image: " + t.Caption + "]"
}

// QA is one question with the turns that answer it.
type QA struct {
	Question string
	Evidence []string // dia ids
	Category int      // 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial
}

// Load reads every *.json conversation file of dir.
func Load(dir string) ([]Conversation, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Conversation
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		c, err := Parse(strings.TrimSuffix(filepath.Base(f), ".json"), raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no conversation files (*.json) in %s", dir)
	}
	return out, nil
}

var sessionKey = regexp.MustCompile(`^session_(\d+)$`)

// Parse reads one conversation in LoCoMo's format. The "conversation"
// object of the original release may hold the sessions, or they may be at
// the top level.
func Parse(id string, raw []byte) (Conversation, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return Conversation{}, fmt.Errorf("not a JSON object: %w", err)
	}
	fields := top
	if inner, ok := top["conversation"]; ok {
		if err := json.Unmarshal(inner, &fields); err != nil {
			return Conversation{}, fmt.Errorf("conversation: %w", err)
		}
	}
	c := Conversation{ID: id}
	_ = json.Unmarshal(fields["speaker_a"], &c.Speakers[0])
	_ = json.Unmarshal(fields["speaker_b"], &c.Speakers[1])
	for k, v := range fields {
		m := sessionKey.FindStringSubmatch(k)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		var turns []struct {
			Speaker string `json:"speaker"`
			DiaID   string `json:"dia_id"`
			Text    string `json:"text"`
			Caption string `json:"blip_caption"`
		}
		if err := json.Unmarshal(v, &turns); err != nil {
			return Conversation{}, fmt.Errorf("%s: %w", k, err)
		}
		var when string
		_ = json.Unmarshal(fields[k+"_date_time"], &when)
		t, err := ParseSessionTime(when)
		if err != nil {
			return Conversation{}, fmt.Errorf("%s_date_time: %w", k, err)
		}
		s := Session{N: n, Time: t}
		for _, tr := range turns {
			s.Turns = append(s.Turns, Turn{Speaker: tr.Speaker, DiaID: tr.DiaID, Text: tr.Text, Caption: tr.Caption})
		}
		c.Sessions = append(c.Sessions, s)
	}
	slices.SortFunc(c.Sessions, func(a, b Session) int { return a.N - b.N })
	if len(c.Sessions) == 0 {
		return Conversation{}, fmt.Errorf("no session_N turns")
	}
	qaRaw := top["qa"]
	if qaRaw == nil {
		qaRaw = fields["qa"]
	}
	var qa []struct {
		Question string            `json:"question"`
		Evidence []json.RawMessage `json:"evidence"`
		Category int               `json:"category"`
	}
	if qaRaw != nil {
		if err := json.Unmarshal(qaRaw, &qa); err != nil {
			return Conversation{}, fmt.Errorf("qa: %w", err)
		}
	}
	for _, q := range qa {
		var ev []string
		for _, e := range q.Evidence {
			var s string
			if json.Unmarshal(e, &s) == nil {
				ev = append(ev, NormalizeEvidence(s)...)
			}
		}
		c.QA = append(c.QA, QA{Question: q.Question, Evidence: ev, Category: q.Category})
	}
	return c, nil
}

var diaID = regexp.MustCompile(`^D(\d+):(\d+)$`)

// NormalizeEvidence reads an evidence entry, which in the release is
// sometimes several ids ("D8:6; D9:17") or misspelt ("D:11:26"); entries
// that name no turn ("D") are dropped.
func NormalizeEvidence(s string) []string {
	var out []string
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		part = strings.Replace(part, "D:", "D", 1)
		if diaID.MatchString(part) {
			out = append(out, part)
		}
	}
	return out
}

// ParseSessionTime reads LoCoMo's "1:56 pm on 8 May, 2023".
func ParseSessionTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"3:04 pm on 2 January, 2006", "3:04 PM on 2 January, 2006", "3:04 pm on 2 Jan, 2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("unreadable session time %q", s)
}

// Scored categories: 5 (adversarial, unanswerable) is left out.
func Scored(category int) bool { return category >= 1 && category <= 4 }

// Scorable reports whether q's evidence recall is measured: a scored
// category and at least one evidence turn (evidence recall of a question
// without evidence is undefined; in the release, two open-domain questions
// of conv-26 have none).
func (q QA) Scorable() bool { return Scored(q.Category) && len(q.Evidence) > 0 }

// NoEvidence counts the questions of the scored categories that are left
// out because they have no evidence turns to find.
func NoEvidence(convs []Conversation) int {
	n := 0
	for _, cv := range convs {
		for _, q := range cv.QA {
			if Scored(q.Category) && !q.Scorable() {
				n++
			}
		}
	}
	return n
}

// Accumulator sums evidence recall, overall and by category.
type Accumulator struct {
	ks    []int
	all   sums
	byCat map[int]*sums
}

type sums struct {
	n      int
	at     map[int]float64
	budget float64
}

// NewAccumulator scores recall@k for each of ks.
func NewAccumulator(ks []int) *Accumulator {
	return &Accumulator{ks: ks, all: sums{at: map[int]float64{}}, byCat: map[int]*sums{}}
}

// Add scores one question: ranked are the dia ids of the recalled hits,
// best first (before expansion); budget are the dia ids of everything
// recalled within the character budget (after expansion).
func (a *Accumulator) Add(category int, evidence, ranked, budget []string) {
	if len(evidence) == 0 {
		return
	}
	cat := a.byCat[category]
	if cat == nil {
		cat = &sums{at: map[int]float64{}}
		a.byCat[category] = cat
	}
	for _, s := range []*sums{&a.all, cat} {
		s.n++
		for _, k := range a.ks {
			s.at[k] += share(evidence, ranked[:min(k, len(ranked))])
		}
		s.budget += share(evidence, budget)
	}
}

// share is the fraction of want found in got.
func share(want, got []string) float64 {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	n := 0
	for _, w := range want {
		if have[w] {
			n++
		}
	}
	return float64(n) / float64(len(want))
}

// Report is the evaluation's result in the shape `--json` prints.
type Report map[string]any

func (s *sums) report(ks []int) Report {
	r := Report{"n": s.n}
	for _, k := range ks {
		r[fmt.Sprintf("recall@%d", k)] = ratio(s.at[k], s.n)
	}
	r["budget_recall"] = ratio(s.budget, s.n)
	return r
}

func ratio(sum float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Report returns {"n", "recall@k"…, "budget_recall", "by_category": {…}}.
func (a *Accumulator) Report() Report {
	r := a.all.report(a.ks)
	cats := Report{}
	for c, s := range a.byCat {
		cats[strconv.Itoa(c)] = s.report(a.ks)
	}
	r["by_category"] = cats
	return r
}

// Categories lists the categories seen, in order.
func (a *Accumulator) Categories() []int {
	var out []int
	for c := range a.byCat {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Row returns the figures of one category (0 = overall): n, recall@k for
// each k, budget recall.
func (a *Accumulator) Row(category int) (int, []float64, float64) {
	s := &a.all
	if category != 0 {
		s = a.byCat[category]
	}
	at := make([]float64, len(a.ks))
	for i, k := range a.ks {
		at[i] = ratio(s.at[k], s.n)
	}
	return s.n, at, ratio(s.budget, s.n)
}
