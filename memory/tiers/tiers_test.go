package tiers

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

func params() config.Tiers { return config.Default().Tiers }

func unit(xs ...float32) []float32 { v := slices.Clone(xs); llm.Normalize(v); return v }

func page(seq uint64, vec []float32, keywords ...string) *messages.Page {
	return &messages.Page{Seq: seq, Q: fmt.Sprintf("q%d", seq), R: fmt.Sprintf("r%d", seq), Embedding: vec, Keywords: keywords}
}

func weights(terms ...string) []Keyword {
	out := make([]Keyword, len(terms))
	for i, t := range terms {
		out[i] = Keyword{Term: t, Weight: 1}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 } // embeddings are float32

func TestPushSTMMovesExactlyOnePagePastCapacity(t *testing.T) {
	stm := &messages.StmState{}
	for i := uint64(1); i <= 7; i++ {
		if out := PushSTM(stm, page(i, nil), 7); len(out) != 0 {
			t.Fatalf("page %d: %d pages moved before the STM was full", i, len(out))
		}
	}
	for i := uint64(8); i <= 20; i++ {
		out := PushSTM(stm, page(i, nil), 7)
		if len(out) != 1 || out[0].Seq != i-7 {
			t.Fatalf("page %d: moved %v, want exactly page %d", i, out, i-7)
		}
		if len(stm.Pages) != 7 || stm.Pages[0].Seq != i-6 || stm.Pages[6].Seq != i {
			t.Fatalf("page %d: STM holds %d pages from %d", i, len(stm.Pages), stm.Pages[0].Seq)
		}
	}
}

func TestFscoreAndPlace(t *testing.T) {
	garden := unit(1, 0, 0)
	trains := unit(0, 1, 0)
	segs := []*Segment{
		NewSegment(1, page(1, garden, "tomato", "basil"), weights("tomato", "basil"), 0),
		NewSegment(2, page(2, trains, "train", "lisbon"), weights("train", "lisbon"), 0),
	}
	cases := []struct {
		name     string
		vec      []float32
		keywords []string
		want     int
		fscore   float64
	}{
		// cos 1 + Jaccard 1/3 = 1.333: joins the garden segment.
		{"same topic", garden, []string{"tomato", "soil"}, 0, 1 + 1.0/3},
		// cos ≈ 0.707, Jaccard 0: above θ = 0.6, joins the closer segment.
		{"between", unit(1, 1, 0), nil, 0, math.Sqrt(0.5)},
		// cos 0.5 + Jaccard 0 = 0.5 < θ: a new segment.
		{"new topic", unit(1, 0, float32(math.Sqrt(3))), []string{"violin"}, -1, 0.5},
		// keywords alone: cos 0 + Jaccard 1 = 1 > θ.
		{"keywords only", unit(0, 0, 1), []string{"train", "lisbon"}, 1, 1},
	}
	for _, c := range cases {
		got, f := Place(segs, c.vec, c.keywords, params().Theta)
		if got != c.want || !near(f, c.fscore) {
			t.Errorf("%s: placed in %d with Fscore %.4f, want %d with %.4f", c.name, got, f, c.want, c.fscore)
		}
	}
}

func TestJoinAveragesEmbeddingAndCountsInteractions(t *testing.T) {
	seg := NewSegment(1, page(1, unit(1, 0)), weights("a", "b"), 100)
	Join(seg, page(2, unit(0, 1)), weights("b", "c"))
	if seg.PageCount != 2 || seg.LInteraction != 2 {
		t.Fatalf("pages %d, L %d", seg.PageCount, seg.LInteraction)
	}
	if !near(float64(seg.Embedding[0]), 0.5) || !near(float64(seg.Embedding[1]), 0.5) {
		t.Fatalf("embedding %v, want the mean", seg.Embedding)
	}
	if !slices.Equal(seg.Keywords, []string{"b", "a", "c"}) {
		t.Fatalf("keywords %v, want b (weight 2) then a, c", seg.Keywords)
	}
}

func TestHeat(t *testing.T) {
	p := params()
	mu := p.Mu.D().Seconds()
	cases := []struct {
		n, l uint64
		dt   float64
		want float64
	}{
		{0, 1, 0, 2},
		{2, 3, mu, 5 + math.Exp(-1)},
		{0, 0, 10 * mu, math.Exp(-10)},
		{4, 1, 0, 6},
	}
	for _, c := range cases {
		seg := &Segment{NVisit: c.n, LInteraction: c.l, LastAccess: 1_000}
		if got := Heat(seg, 1_000+int64(c.dt), p); !near(got, c.want) {
			t.Errorf("N %d L %d Δt %.0f: heat %.6f, want %.6f", c.n, c.l, c.dt, got, c.want)
		}
	}
	// Access in the future (clock skew) counts as now.
	if got := Heat(&Segment{LastAccess: 2_000}, 1_000, p); !near(got, 1) {
		t.Errorf("future access: heat %v, want 1", got)
	}
}

func TestHeatCrossingTauPromotesAndResetsInteraction(t *testing.T) {
	p := params()
	const now = 1_000_000
	seg := NewSegment(1, page(1, unit(1)), nil, now)
	for i := uint64(2); i <= 4; i++ {
		Join(seg, page(i, unit(1)), nil)
	}
	// N 0 + L 4 + recency 1 = 5: not above τ.
	if got := Promotable([]*Segment{seg}, now, p); len(got) != 0 {
		t.Fatalf("heat %.3f promoted", Heat(seg, now, p))
	}
	Visit(seg, now)
	if got := Promotable([]*Segment{seg}, now, p); !slices.Equal(got, []int{0}) {
		t.Fatalf("heat %.3f not promoted", Heat(seg, now, p))
	}
	Promote(seg, 4)
	if seg.LInteraction != 0 || seg.PromotedThrough != 4 || seg.Promotions != 1 {
		t.Fatalf("after promotion: L %d through %d promotions %d", seg.LInteraction, seg.PromotedThrough, seg.Promotions)
	}
	// Visits alone keep the heat above τ, but nothing new is left to promote.
	for range 5 {
		Visit(seg, now)
	}
	if got := Promotable([]*Segment{seg}, now, p); len(got) != 0 {
		t.Fatalf("promoted again with no new page (heat %.3f)", Heat(seg, now, p))
	}
	Join(seg, page(5, unit(1)), nil)
	if got := Promotable([]*Segment{seg}, now, p); len(got) != 1 {
		t.Fatal("a new page on a hot segment is not promoted")
	}
}

func TestColdest(t *testing.T) {
	p := params()
	const now = 50_000_000
	segs := []*Segment{
		{ID: 1, NVisit: 1, LastAccess: now},            // 1 + 1
		{ID: 2, LInteraction: 1, LastAccess: 0},        // 1 + e^-5
		{ID: 3, LInteraction: 1, LastAccess: 0},        // same heat, younger id
		{ID: 4, LInteraction: 1, LastAccess: now - 10}, // 1 + ~1
	}
	if got := Coldest(segs, now, p); got != 1 {
		t.Fatalf("coldest %d, want index 1 (segment 2)", got)
	}
	if Coldest(nil, now, p) != -1 {
		t.Fatal("coldest of nothing")
	}
}

func TestTopSegmentsAndPages(t *testing.T) {
	segs := []*Segment{
		{ID: 1, Embedding: unit(1, 0), Keywords: []string{"x"}},
		{ID: 2, Embedding: unit(0, 1)},
		{ID: 3, Embedding: unit(1, 1)},
		{ID: 4, Embedding: unit(-1, 0)},
	}
	got := TopSegments(segs, unit(1, 0), []string{"x"}, 5)
	var ids []uint64
	for _, r := range got {
		ids = append(ids, segs[r.Index].ID)
	}
	// Segment 1: cos 1 + Jaccard 1; segment 3: cos 0.707; 2 and 4 score ≤ 0.
	if !slices.Equal(ids, []uint64{1, 3}) {
		t.Fatalf("top segments %v", ids)
	}
	pages := []*messages.Page{page(1, unit(0, 1)), page(2, unit(1, 0)), page(3, unit(1, 0)), page(4, unit(1, 1))}
	var seqs []uint64
	for _, r := range TopPages(pages, unit(1, 0), 3) {
		seqs = append(seqs, pages[r.Index].Seq)
	}
	if !slices.Equal(seqs, []uint64{2, 3, 4}) {
		t.Fatalf("top pages %v (ties to the older page)", seqs)
	}
}

func TestKeywordsTFIDF(t *testing.T) {
	df := map[string]uint64{"garden": 9, "tomato": 0}
	got := Keywords("garden garden tomato", func(t string) uint64 { return df[t] }, 9, 8)
	// tomato: 1·(ln(10/1)+1) = 3.30; garden: 2·(ln(10/10)+1) = 2.
	if len(got) != 2 || got[0].Term != "tomato" || !near(got[0].Weight, math.Log(10)+1) || !near(got[1].Weight, 2) {
		t.Fatalf("keywords %v", got)
	}
}

func TestSummarizeIsExtractiveAndBounded(t *testing.T) {
	sentences := []string{
		"Caroline: I went to the support group yesterday.",
		"Melanie: That sounds great.",
		"Caroline: The support group helped me a lot.",
		"Melanie: I painted a lake.",
		"Caroline: The support group meets every week.",
	}
	got := Summarize(sentences, []string{"support"}, 2, 500)
	want := "Caroline: I went to the support group yesterday. Caroline: The support group helped me a lot."
	if got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
	if s := Summarize(sentences, nil, 3, 40); len(s) > 40+len("…") {
		t.Fatalf("summary of %d bytes over the 40 budget: %q", len(s), s)
	}
	if Summarize(nil, nil, 3, 100) != "" {
		t.Fatal("summary of nothing")
	}
}

func TestAddFactFIFO(t *testing.T) {
	var facts []*Fact
	for i := range 150 {
		facts = AddFact(facts, &Fact{Text: fmt.Sprintf("fact %d", i)}, 100)
	}
	if len(facts) != 100 || facts[0].Text != "fact 50" || facts[99].Text != "fact 149" {
		t.Fatalf("%d facts from %q to %q", len(facts), facts[0].Text, facts[len(facts)-1].Text)
	}
	facts = AddFact(facts, &Fact{Text: "Fact 60", T: 7}, 100)
	if len(facts) != 100 || facts[99].T != 7 || slices.ContainsFunc(facts[:99], func(f *Fact) bool { return f.Text == "fact 60" }) {
		t.Fatal("a repeated fact was not refreshed in place of the old one")
	}
}

func TestThirdPerson(t *testing.T) {
	cases := []struct{ in, name, want string }{
		{"I love hiking with my dog.", "Caroline", "Caroline loves hiking with Caroline's dog."},
		{"I'm a teacher and I've got two kids.", "Mel", "Mel is a teacher and Mel has got two kids."},
		{"I really enjoy painting.", "Mel", "Mel really enjoys painting."},
		{"I went to Paris, and I watch movies.", "", "The user went to Paris, and The user watches movies."},
		{"I can't wait! My sister told me.", "Jo", "Jo can't wait! Jo's sister told Jo."},
		{"I study and I try.", "Al", "Al studies and Al tries."},
		{"I’ll call you.", "Al", "Al will call you."},
	}
	for _, c := range cases {
		if got := ThirdPerson(c.in, c.name); got != c.want {
			t.Errorf("ThirdPerson(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestExtractPersona(t *testing.T) {
	dims := params().Traits
	pages := []PageText{{
		Page:  &messages.Page{Q: "qcid", R: "rcid"},
		QName: "Caroline",
		Q:     "My name is Caroline. I live in New York City with my dog. I'm 29 years old! Do you like jazz?",
		RName: "assistant", RSelf: true,
		R: "I recommend the jazz concert on Friday. Your dog sounds lovely.",
	}, {
		Page:  &messages.Page{Q: "q2", R: "r2"},
		QName: "Caroline", Q: "I am a transgender woman and I work as a counselor at the clinic.",
		RName: "assistant", RSelf: true, RQuotes: true,
		R: "[offline model] From memory: I will go.",
	}}
	u := ExtractPersona(pages, NewTraits(dims))
	wantProfile := map[string]string{
		"Caroline.name": "Caroline", "Caroline.location": "New York City", "Caroline.age": "29",
		"Caroline.gender": "female", "Caroline.occupation": "counselor",
	}
	for k, v := range wantProfile {
		if u.Profile[k] != v {
			t.Errorf("profile %s = %q, want %q (all: %v)", k, u.Profile[k], v, u.Profile)
		}
	}
	var facts []string
	for _, f := range u.Facts {
		facts = append(facts, f.Text)
	}
	wantFacts := []string{
		"Caroline's name is Caroline.",
		"Caroline lives in New York City with Caroline's dog.",
		"Caroline is 29 years old!",
		"Caroline is a transgender woman and Caroline works as a counselor at the clinic.",
	}
	if !slices.Equal(facts, wantFacts) {
		t.Fatalf("facts %q\nwant %q", facts, wantFacts)
	}
	if u.Facts[0].Source != "qcid" {
		t.Fatalf("fact source %q", u.Facts[0].Source)
	}
	if len(u.AgentTraits) != 1 || u.AgentTraits[0].Text != "I recommend the jazz concert on Friday." || u.AgentTraits[0].Source != "rcid" {
		t.Fatalf("agent traits %+v (quotes of the offline model must not count)", u.AgentTraits)
	}
	var seen []string
	for _, o := range u.Traits {
		seen = append(seen, o.Dimension)
	}
	for _, d := range []string{"animals", "psychology"} {
		if !slices.Contains(seen, d) {
			t.Errorf("trait %q not observed in %v", d, seen)
		}
	}
	if slices.Contains(seen, "music") {
		t.Error("a question (Do you like jazz?) was taken as a statement")
	}
}

func TestApplyPersona(t *testing.T) {
	p := params()
	p.KBSize, p.AgentTraits = 3, 2
	persona := &Persona{}
	u := PersonaUpdate{
		Profile: map[string]string{"name": "Caroline", "": "ignored", "blank": " "},
		Facts:   []Statement{{Text: "a"}, {Text: "b"}, {Text: "c"}, {Text: "d"}},
		Traits: []TraitObservation{
			{Dimension: "music", Level: 1, Evidence: "sings"},
			{Dimension: "belonging", Level: 1, Evidence: "friends"},
			{Dimension: "no such trait", Level: 1},
		},
		AgentTraits: []Statement{{Text: "x"}, {Text: "y"}, {Text: "z"}},
	}
	ApplyPersona(persona, u, p, 9, 100)
	ApplyPersona(persona, PersonaUpdate{Traits: []TraitObservation{{Dimension: "music", Level: 1, Evidence: "plays"}}}, p, 9, 200)
	user := persona.User
	if len(user.Profile) != 1 || user.Profile["name"] != "Caroline" {
		t.Fatalf("profile %v", user.Profile)
	}
	if len(user.Knowledge) != 3 || user.Knowledge[0].Text != "b" || user.Knowledge[0].Segment != 9 {
		t.Fatalf("knowledge %v", user.Knowledge)
	}
	if len(persona.Agent.Traits) != 2 || persona.Agent.Traits[0].Text != "y" {
		t.Fatalf("agent traits %v", persona.Agent.Traits)
	}
	// Configuration order: belonging (basic needs) before music (interests).
	if len(user.Traits) != 2 || user.Traits[0].Dimension != "belonging" || user.Traits[1].Dimension != "music" {
		t.Fatalf("traits %v", user.Traits)
	}
	music := user.Traits[1]
	// 0 → 0.25 → 0.4375
	if !near(music.Level, 0.4375) || music.Evidence != "plays" || music.UpdatedAt != 200 || music.Group != "content interests" {
		t.Fatalf("music %+v", music)
	}
	if persona.Updates != 2 {
		t.Fatalf("updates %d", persona.Updates)
	}
}

func TestHeuristicChain(t *testing.T) {
	h := Heuristic{}
	ctx := context.Background()
	first := PageText{Page: page(1, nil), QName: "A", Q: "I planted tomatoes.", RName: "B", R: "Tomatoes need sun."}
	mc, err := h.Chain(ctx, ChainInput{Page: first, Similarity: 1, Threshold: 0.5})
	if err != nil || mc.Linked || mc.Start != 1 {
		t.Fatalf("first page: %+v %v", mc, err)
	}
	first.Page.MetaChain = mc
	second := PageText{Page: page(2, nil), QName: "A", Q: "The tomatoes are red now.", RName: "B", R: "Great."}
	mc, _ = h.Chain(ctx, ChainInput{Prev: []PageText{first}, Page: second, Similarity: 0.7, Threshold: 0.5})
	if !mc.Linked || mc.Start != 1 || mc.Summary == "" {
		t.Fatalf("linked page: %+v", mc)
	}
	mc, _ = h.Chain(ctx, ChainInput{Prev: []PageText{first}, Page: second, Similarity: 0.2, Threshold: 0.5})
	if mc.Linked || mc.Start != 2 {
		t.Fatalf("dissimilar page: %+v", mc)
	}
}

// The Jaccard similarity of keywords' distinct hashes agrees with the two sets' Jaccard on
// lists with repeated words and empty ones.
func TestJaccardIsTheSetsJaccard(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	words := func(n, alphabet int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("w", rng.Intn(alphabet))
		}
		return out
	}
	for i := range 5000 {
		a, b := words(rng.Intn(2*maxKeywords+3), 1+rng.Intn(30)), words(rng.Intn(4*maxKeywords+3), 1+rng.Intn(30))
		if got, want := jaccard(a, b), jaccardSets(a, b); got != want {
			t.Fatalf("case %d: jaccard(%q, %q) = %v, the sets' %v", i, a, b, got, want)
		}
	}
	if jaccard(nil, nil) != 0 || jaccard([]string{"a", "a"}, []string{"a"}) != 1 || jaccard([]string{"a", "b"}, []string{"b", "c", "c"}) != 1.0/3 {
		t.Fatal("Jaccard of small cases")
	}
}

// jaccard is a's keywords' Jaccard similarity with b's.
func jaccard(a, b []string) float64 { return newFquery(nil, b).jaccard(keywordHashes(a)) }

// jaccardSets is the Jaccard similarity of a's and b's sets, as two maps.
func jaccardSets(a, b []string) float64 {
	set := make(map[string]bool, len(a))
	for _, k := range a {
		set[k] = true
	}
	inter, union := 0, len(set)
	seen := make(map[string]bool, len(b))
	for _, k := range b {
		if seen[k] {
			continue
		}
		seen[k] = true
		if set[k] {
			inter++
		} else {
			union++
		}
	}
	if union == 0 {
		return 0
	}
	return float64(inter) / float64(union)
}

// BenchmarkJaccard is a segment's ten keywords against a query's six:
// by their hashes, the query's made once (as Place and TopSegments do for
// each of a sona's segments) and the segment's as the cache keeps them,
// and as two sets made for each.
func BenchmarkJaccard(b *testing.B) {
	seg := []string{"garden", "tomato", "water", "soil", "sun", "seed", "grow", "leaf", "root", "plant"}
	query := []string{"how", "water", "tomato", "plant", "often", "summer"}
	b.Run("query", func(b *testing.B) {
		q, hashes := newFquery(nil, query), keywordHashes(seg)
		for b.Loop() {
			q.jaccard(hashes)
		}
	})
	b.Run("sets", func(b *testing.B) {
		for b.Loop() {
			jaccardSets(seg, query)
		}
	})
}

// The cue index is built once, with the Traits, not at every extraction;
// and other dimensions get their own: a promotion under other dimensions
// observes theirs.
func TestExtractPersonaCuesFollowTheDimensions(t *testing.T) {
	pages := []PageText{{Page: &messages.Page{Q: "q", R: "r"}, QName: "Ann", Q: "I play chess with my friends every weekend.", RName: "assistant", RSelf: true}}
	observed := func(traits Traits) []string {
		var got []string
		for _, o := range ExtractPersona(pages, traits).Traits {
			got = append(got, o.Dimension)
		}
		return got
	}
	games := NewTraits([]config.TraitDimension{{Name: "strategic", Cues: []string{"chess"}}})
	outdoors := NewTraits([]config.TraitDimension{{Name: "outdoorsy", Cues: []string{"hiking"}}, {Name: "social", Cues: []string{"friends"}}})
	for range 2 {
		if got := observed(games); !slices.Equal(got, []string{"strategic"}) {
			t.Fatalf("chess dimensions observed %q, want [strategic]", got)
		}
		if got := observed(outdoors); !slices.Equal(got, []string{"social"}) {
			t.Fatalf("outdoor dimensions observed %q, want [social]", got)
		}
	}
	dims := params().Traits
	traits := NewTraits(dims)
	build := testing.AllocsPerRun(10, func() { NewTraits(dims) })
	if extract := testing.AllocsPerRun(10, func() { ExtractPersona(pages, traits) }); extract >= build {
		t.Fatalf("an extraction allocated %.0f times, the index's building %.0f: the configuration's cue index was built again", extract, build)
	}
}

// BenchmarkExtractPersona is one promotion's extraction from two pages
// under the default 90 trait dimensions.
func BenchmarkExtractPersona(b *testing.B) {
	dims := params().Traits
	pages := []PageText{{
		Page: &messages.Page{Q: "q", R: "r"}, QName: "Caroline", RName: "assistant", RSelf: true,
		Q: "My name is Caroline. I love hiking with my friends, and I read about history every night.",
		R: "I recommend the trail by the lake. You should bring water.",
	}}
	traits := NewTraits(dims)
	b.ReportAllocs()
	for b.Loop() {
		ExtractPersona(pages, traits)
	}
}
