package tiers

import (
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
)

// TraitRate is how far one observation moves a trait's level towards the
// observed strength.
const TraitRate = 0.25

// Statement lengths the offline extractor keeps, in words.
const (
	minStatementWords = 4
	maxStatementWords = 40
)

// ExtractPersona is the offline persona extractor. From the user's
// statements (the inputs, and the responses that are not the sona's own)
// it takes:
//
//   - profile attributes from fixed first-person patterns ("my name is …",
//     "I live in …", "I was born in …", "I'm … years old", "I work as …",
//     "I'm from …", "I'm a woman"), keyed "speaker.attribute" when the
//     speaker is named;
//   - facts: first-person declarative sentences of 4 to 40 words, rewritten
//     in the third person with the speaker's name ("I love hiking" →
//     "Caroline loves hiking");
//   - trait observations: a dimension is observed (level 1) in a sentence
//     containing one of its cue words.
//
// From the sona's own responses (not mere quotes) it takes the agent's
// recommendations and commitments ("I recommend …", "you should …") as
// agent traits.
func ExtractPersona(pages []PageText, traits Traits) PersonaUpdate {
	u := PersonaUpdate{Profile: map[string]string{}}
	cues := traits.cues
	user := func(name, text, source string) {
		for _, s := range llm.Sentences(text) {
			if strings.HasSuffix(s, "?") {
				continue
			}
			words := strings.Fields(s)
			first := firstPerson(words)
			if first {
				for attr, v := range profileOf(s) {
					key := attr
					if name != "" {
						key = name + "." + attr
					}
					u.Profile[key] = v
				}
			}
			evidence := s
			if first {
				evidence = ThirdPerson(s, name)
			}
			if first && len(words) >= minStatementWords && len(words) <= maxStatementWords {
				u.Facts = append(u.Facts, Statement{Text: evidence, Source: source})
			}
			for _, dim := range observed(s, cues) {
				u.Traits = append(u.Traits, TraitObservation{Dimension: dim, Level: 1, Evidence: evidence})
			}
		}
	}
	for _, p := range pages {
		user(p.QName, p.Q, p.Page.Q)
		switch {
		case !p.RSelf:
			user(p.RName, p.R, p.Page.R)
		case !p.RQuotes:
			for _, s := range llm.Sentences(p.R) {
				if agentPattern.MatchString(s) {
					u.AgentTraits = append(u.AgentTraits, Statement{Text: s, Source: p.Page.R})
				}
			}
		}
	}
	return u
}

var agentPattern = regexp.MustCompile(`(?i)\b(i (recommend|suggest|will|'ll|can help)|i'll|you (should|could|might)|let's)\b`)

// Traits are the user trait dimensions a persona is observed on, with
// the index of their cues the offline extractor reads. NewTraits builds it
// once, as eumas.NewHeuristic does its archetypes': built at every
// promotion it was 16 KB allocated an advance and, with the collector's
// share, 1–1.5% of an advance's CPU over five minutes of them (issue 15,
// stop 80). The zero Traits has no dimensions.
type Traits struct {
	dims []config.TraitDimension
	cues map[string][]string // read only
}

// NewTraits prepares dims' cue index.
func NewTraits(dims []config.TraitDimension) Traits {
	return Traits{dims: dims, cues: cueIndex(dims)}
}

// Dims are the dimensions, in configuration order.
func (t Traits) Dims() []config.TraitDimension { return t.dims }

// cueIndex maps each stemmed cue to the dimensions it shows, in
// configuration order.
func cueIndex(dims []config.TraitDimension) map[string][]string {
	idx := map[string][]string{}
	for _, d := range dims {
		for _, c := range d.Cues {
			for _, t := range llm.Tokenize(c) {
				if !slices.Contains(idx[t], d.Name) {
					idx[t] = append(idx[t], d.Name)
				}
			}
		}
	}
	return idx
}

// observed lists the dimensions whose cues occur in s, each once.
func observed(s string, cues map[string][]string) []string {
	var out []string
	for _, t := range llm.Tokenize(s) {
		for _, d := range cues[t] {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

var firstPersonWords = map[string]bool{
	"i": true, "i'm": true, "i've": true, "i'd": true, "i'll": true, "my": true, "me": true, "mine": true, "myself": true,
}

func firstPerson(words []string) bool {
	for _, w := range words {
		if firstPersonWords[strings.ToLower(strings.Trim(normalizeApostrophes(w), ".,!;:\"()"))] {
			return true
		}
	}
	return false
}

func normalizeApostrophes(s string) string { return strings.ReplaceAll(s, "’", "'") }

var profilePatterns = []struct {
	attr string
	re   *regexp.Regexp
}{
	{"name", regexp.MustCompile(`(?i)\bmy name is ([A-Z][\p{L}'-]+)`)},
	{"age", regexp.MustCompile(`(?i)\bi(?:'m| am) (\d{1,3}) years? old\b`)},
	{"birth_year", regexp.MustCompile(`(?i)\bi was born in (\d{4})\b`)},
	{"location", regexp.MustCompile(`(?i)\bi (?:live|am living|'m living) in ((?:the )?[A-Z][\p{L}-]+(?: [A-Z][\p{L}-]+){0,2})`)},
	{"origin", regexp.MustCompile(`(?i)\bi(?:'m| am| come) from ((?:the )?[A-Z][\p{L}-]+(?: [A-Z][\p{L}-]+){0,2})`)},
	{"occupation", regexp.MustCompile(`(?i)\bi work as (?:an? )?([\p{L} -]{2,40}?)(?:[.,;!]|$| at | in | for )`)},
}

var genderWords = map[string]string{
	"woman": "female", "girl": "female", "mother": "female", "mom": "female", "wife": "female", "lady": "female",
	"man": "male", "boy": "male", "father": "male", "dad": "male", "husband": "male", "guy": "male",
}

var genderPattern = regexp.MustCompile(`(?i)\bi(?:'m| am) an? (?:(?:trans|transgender|single|young|old|proud) )?(woman|girl|mother|mom|wife|lady|man|boy|father|dad|husband|guy)\b`)

// profileOf reads static attributes from one first-person sentence.
func profileOf(s string) map[string]string {
	s = normalizeApostrophes(s)
	out := map[string]string{}
	for _, p := range profilePatterns {
		if m := p.re.FindStringSubmatch(s); m != nil {
			out[p.attr] = strings.TrimSpace(m[1])
		}
	}
	if m := genderPattern.FindStringSubmatch(s); m != nil {
		out["gender"] = genderWords[strings.ToLower(m[1])]
	}
	return out
}

// ThirdPerson rewrites a first-person sentence about name ("The user"
// when unnamed) in the third person: "I'm moving and I love my dog" →
// "Caroline is moving and Caroline loves Caroline's dog".
func ThirdPerson(s, name string) string {
	if name == "" {
		name = "The user"
	}
	words := strings.Fields(normalizeApostrophes(s))
	out := make([]string, 0, len(words))
	for i := 0; i < len(words); i++ {
		lead, core, trail := splitPunct(words[i])
		lower := strings.ToLower(core)
		switch lower {
		case "i'm":
			out = append(out, lead+name+" is"+trail)
		case "i've":
			out = append(out, lead+name+" has"+trail)
		case "i'd":
			out = append(out, lead+name+" would"+trail)
		case "i'll":
			out = append(out, lead+name+" will"+trail)
		case "my", "mine":
			out = append(out, lead+name+"'s"+trail)
		case "me", "myself":
			out = append(out, lead+name+trail)
		case "i":
			out = append(out, lead+name+trail)
			if trail != "" {
				continue
			}
			// Conjugate the verb after "I", past adverbs.
			for j := i + 1; j < len(words); j++ {
				l, c, t := splitPunct(words[j])
				if adverbs[strings.ToLower(c)] {
					out = append(out, words[j])
					i = j
					continue
				}
				out = append(out, l+thirdPersonVerb(c)+t)
				i = j
				break
			}
		default:
			out = append(out, words[i])
		}
	}
	return strings.Join(out, " ")
}

var adverbs = map[string]bool{
	"also": true, "just": true, "always": true, "never": true, "still": true, "really": true, "often": true,
	"usually": true, "sometimes": true, "recently": true, "finally": true, "actually": true, "definitely": true,
	"totally": true, "truly": true, "even": true, "only": true, "absolutely": true, "already": true,
}

var unchangedVerbs = map[string]bool{
	"was": true, "had": true, "did": true, "went": true, "got": true, "made": true, "saw": true, "took": true,
	"found": true, "felt": true, "thought": true, "knew": true, "met": true, "left": true, "told": true,
	"said": true, "began": true, "bought": true, "brought": true, "came": true, "gave": true, "kept": true,
	"lost": true, "ran": true, "read": true, "sat": true, "spent": true, "taught": true, "won": true, "wrote": true,
	"can": true, "could": true, "will": true, "would": true, "should": true, "might": true, "must": true,
	"may": true, "shall": true, "used": true,
}

var irregularVerbs = map[string]string{
	"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't",
	"can't": "can't", "won't": "won't", "didn't": "didn't", "wasn't": "wasn't",
}

// thirdPersonVerb conjugates a verb that followed "I".
func thirdPersonVerb(v string) string {
	lower := strings.ToLower(v)
	if r, ok := irregularVerbs[lower]; ok {
		return r
	}
	if unchangedVerbs[lower] || strings.HasSuffix(lower, "ed") || !isWord(lower) {
		return v
	}
	switch {
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "sh"), strings.HasSuffix(lower, "ch"),
		strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"), strings.HasSuffix(lower, "o"):
		return v + "es"
	case len(lower) > 1 && strings.HasSuffix(lower, "y") && !strings.ContainsRune("aeiou", rune(lower[len(lower)-2])):
		return v[:len(v)-1] + "ies"
	}
	return v + "s"
}

func isWord(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return s != ""
}

// splitPunct separates leading and trailing punctuation from a word.
func splitPunct(w string) (lead, core, trail string) {
	start := strings.IndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
	if start < 0 {
		return w, "", ""
	}
	end := strings.LastIndexFunc(w, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
	return w[:start], w[start : end+1], w[end+1:]
}

// ApplyPersona applies an update from segment seg at now: profile
// attributes overwrite, facts and agent traits join their FIFOs (at most
// p.KBSize and p.AgentTraits entries), and each trait observation moves
// its dimension's level by TraitRate towards the observed level. Traits
// unknown to the configuration are ignored. Traits stay in configuration
// order.
func ApplyPersona(persona *Persona, u PersonaUpdate, p config.Tiers, seg uint64, now int64) {
	user, agent := &persona.User, &persona.Agent
	if user.Profile == nil {
		user.Profile = map[string]string{}
	}
	for k, v := range u.Profile {
		if k = strings.TrimSpace(k); k != "" && strings.TrimSpace(v) != "" {
			user.Profile[k] = strings.TrimSpace(v)
		}
	}
	for _, f := range u.Facts {
		user.Knowledge = AddFact(user.Knowledge, fact(f, seg, now), p.KBSize)
	}
	for _, f := range u.AgentTraits {
		agent.Traits = AddFact(agent.Traits, fact(f, seg, now), p.AgentTraits)
	}
	levels := map[string]*Trait{}
	for _, t := range user.Traits {
		levels[t.Dimension] = t
	}
	for _, o := range u.Traits {
		t := levels[o.Dimension]
		if t == nil {
			i := slices.IndexFunc(p.Traits, func(d config.TraitDimension) bool { return d.Name == o.Dimension })
			if i < 0 {
				continue
			}
			t = &Trait{Dimension: o.Dimension, Group: p.Traits[i].Group}
			levels[o.Dimension] = t
		}
		t.Level += TraitRate * (min(1, max(0, o.Level)) - t.Level)
		t.Evidence, t.UpdatedAt = o.Evidence, now
	}
	user.Traits = user.Traits[:0]
	for _, d := range p.Traits {
		if t := levels[d.Name]; t != nil {
			user.Traits = append(user.Traits, t)
		}
	}
	persona.Updates++
}

func fact(s Statement, seg uint64, now int64) *Fact {
	return &Fact{Text: strings.TrimSpace(s.Text), Embedding: s.Embedding, T: now, Segment: seg, Source: s.Source}
}
