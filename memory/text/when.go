package text

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Span is a stretch of time a query speaks of: [From, To) in unix
// seconds.
type Span struct{ From, To int64 }

// Contains reports whether t (unix seconds) lies in the span.
func (s Span) Contains(t int64) bool { return t >= s.From && t < s.To }

// Near is how near t (unix seconds) is to the span: 1 within it, falling
// linearly to 0 at a tolerance outside it — the span's length, at least a
// week, so that a day or a week spoken of reaches what was said a few days
// around it (people tell of an event after it: "last week I went…").
func (s Span) Near(t int64) float64 {
	if s.Contains(t) {
		return 1
	}
	tol := max(s.To-s.From, int64(7*24*3600))
	d := s.From - t
	if t >= s.To {
		d = t - s.To + 1
	}
	if d >= tol {
		return 0
	}
	return 1 - float64(d)/float64(tol)
}

var (
	months = map[string]time.Month{
		"january": time.January, "jan": time.January, "february": time.February, "feb": time.February,
		"march": time.March, "mar": time.March, "april": time.April, "apr": time.April, "may": time.May,
		"june": time.June, "jun": time.June, "july": time.July, "jul": time.July, "august": time.August,
		"aug": time.August, "september": time.September, "sep": time.September, "sept": time.September,
		"october": time.October, "oct": time.October, "november": time.November, "nov": time.November,
		"december": time.December, "dec": time.December,
	}
	seasons = map[string]time.Month{ // the season's first month (northern hemisphere)
		"spring": time.March, "summer": time.June, "autumn": time.September, "fall": time.September, "winter": time.December,
	}
	units = map[string]time.Duration{"day": 24 * time.Hour, "week": 7 * 24 * time.Hour}

	monthName = `(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)`
	year      = `((?:19|20)\d\d)`
	// "8 May, 2023", "8th of May 2023", "8 May"
	reDayMonth = regexp.MustCompile(`\b(\d{1,2})(?:st|nd|rd|th)?(?: of)? ` + monthName + `\b,?(?: ` + year + `\b)?`)
	// "May 8, 2023", "May 8th", "May 2023", "May"
	reMonth    = regexp.MustCompile(`\b` + monthName + `\b(?: (\d{1,2})(?:st|nd|rd|th)?\b)?,?(?: ` + year + `\b)?`)
	reYear     = regexp.MustCompile(`\b` + year + `\b`)
	reSeason   = regexp.MustCompile(`\b(?:(last|this|next|past) )?(spring|summer|autumn|fall|winter)\b(?:,? ` + year + `\b)?`)
	reRelative = regexp.MustCompile(`\b(yesterday|today|tonight|tomorrow|(?:last|this|past|previous|next) (?:week|weekend|month|year))\b`)
	reAgo      = regexp.MustCompile(`\b(a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|\d+) (day|week|month|year)s? ago\b`)
)

var counts = map[string]int{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "few": 3, "couple of": 2}

// TimeSpans resolves the time expressions of q against now, the time the
// query is asked at: dates ("8 May, 2023", "May 8th"), months ("in June",
// "July 2023"), years ("in 2022"), seasons ("during the summer"), and
// times relative to now ("yesterday", "last week", "last weekend", "this
// month", "last year", "two weeks ago"). A date or month without a year
// is the latest one not after now (the question is about the past), a
// season likewise. It returns nil when q speaks of no time.
func TimeSpans(q string, now time.Time) []Span {
	q = strings.ToLower(q)
	if !mayTellTime(q) {
		return nil
	}
	return spans(q, now)
}

// timeWords are the words one of which every time expression holds (a
// year aside): the months, the seasons, the relative words.
var timeWords = func() map[string]bool {
	w := map[string]bool{"yesterday": true, "today": true, "tonight": true, "tomorrow": true,
		"week": true, "weekend": true, "month": true, "year": true, "ago": true}
	for m := range months {
		w[m] = true
	}
	for s := range seasons {
		w[s] = true
	}
	return w
}()

// mayTellTime reports whether q (lower case) holds a word of timeWords or
// a year, as words are to the expressions' \b: a run of ASCII letters,
// digits and underscores. A query holding none speaks of no time, and the
// expressions need not be run over it (they were a percent of an
// advance's CPU).
func mayTellTime(q string) bool {
	inWord := func(c byte) bool { return c >= 'a' && c <= 'z' || isDigit(c) || c == '_' }
	for i := 0; i < len(q); {
		if !inWord(q[i]) {
			i++
			continue
		}
		j := i
		for j < len(q) && inWord(q[j]) {
			j++
		}
		w := q[i:j]
		if timeWords[w] || len(w) == 4 && (w[:2] == "19" || w[:2] == "20") && isDigit(w[2]) && isDigit(w[3]) {
			return true
		}
		i = j
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// spans is TimeSpans of a lower-case q.
func spans(q string, now time.Time) []Span {
	now = now.UTC()
	day := func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC) }
	today := day(now)
	span := func(from, to time.Time) Span { return Span{from.Unix(), to.Unix()} }
	var out []Span
	used := make([]bool, len(q)) // characters an expression already took
	take := func(loc []int) bool {
		for i := loc[0]; i < loc[1]; i++ {
			if used[i] {
				return false
			}
		}
		for i := loc[0]; i < loc[1]; i++ {
			used[i] = true
		}
		return true
	}
	// latest is the latest month m (of year y, when given) starting not after now.
	latest := func(m time.Month, y int) time.Time {
		if y > 0 {
			return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		}
		t := time.Date(now.Year(), m, 1, 0, 0, 0, 0, time.UTC)
		if t.After(now) {
			t = t.AddDate(-1, 0, 0)
		}
		return t
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for _, m := range reDayMonth.FindAllStringSubmatchIndex(q, -1) {
		d, mon := atoi(q[m[2]:m[3]]), months[q[m[4]:m[5]]]
		y := 0
		if m[6] >= 0 {
			y = atoi(q[m[6]:m[7]])
		}
		if d < 1 || d > 31 || !take(m[:2]) {
			continue
		}
		t := time.Date(max(y, 1), mon, d, 0, 0, 0, 0, time.UTC)
		if y == 0 {
			t = time.Date(latest(mon, 0).Year(), mon, d, 0, 0, 0, 0, time.UTC)
		}
		out = append(out, span(t, t.AddDate(0, 0, 1)))
	}
	for _, m := range reMonth.FindAllStringSubmatchIndex(q, -1) {
		name := q[m[2]:m[3]]
		if name == "may" && m[4] < 0 && m[6] < 0 && !strings.HasSuffix(strings.TrimSpace(q[:m[2]]), "in") {
			continue // "may" the verb: only "in May", "May 8", "May 2023"
		}
		if !take(m[:2]) {
			continue
		}
		mon, y := months[name], 0
		if m[6] >= 0 {
			y = atoi(q[m[6]:m[7]])
		}
		first := latest(mon, y)
		if m[4] >= 0 {
			if d := atoi(q[m[4]:m[5]]); d >= 1 && d <= 31 {
				t := time.Date(first.Year(), mon, d, 0, 0, 0, 0, time.UTC)
				out = append(out, span(t, t.AddDate(0, 0, 1)))
				continue
			}
		}
		out = append(out, span(first, first.AddDate(0, 1, 0)))
	}
	for _, m := range reSeason.FindAllStringSubmatchIndex(q, -1) {
		if !take(m[:2]) {
			continue
		}
		start := seasons[q[m[4]:m[5]]]
		var first time.Time
		if m[6] >= 0 {
			first = time.Date(atoi(q[m[6]:m[7]]), start, 1, 0, 0, 0, 0, time.UTC)
		} else {
			first = latest(start, 0)
			if m[2] >= 0 && (q[m[2]:m[3]] == "last" || q[m[2]:m[3]] == "past") && !first.AddDate(0, 3, 0).Before(now) {
				first = first.AddDate(-1, 0, 0) // last summer: not the one still under way
			}
		}
		out = append(out, span(first, first.AddDate(0, 3, 0)))
	}
	for _, m := range reYear.FindAllStringSubmatchIndex(q, -1) {
		if !take(m[:2]) {
			continue
		}
		y := atoi(q[m[2]:m[3]])
		out = append(out, span(time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(y+1, 1, 1, 0, 0, 0, 0, time.UTC)))
	}
	monday := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	yearStart := time.Date(now.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	for _, m := range reRelative.FindAllStringIndex(q, -1) {
		if !take(m) {
			continue
		}
		expr := strings.Fields(q[m[0]:m[1]])
		if len(expr) == 1 {
			switch expr[0] {
			case "yesterday":
				out = append(out, span(today.AddDate(0, 0, -1), today))
			case "today", "tonight":
				out = append(out, span(today, today.AddDate(0, 0, 1)))
			case "tomorrow":
				out = append(out, span(today.AddDate(0, 0, 1), today.AddDate(0, 0, 2)))
			}
			continue
		}
		shift := map[string]int{"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1}[expr[0]]
		switch expr[1] {
		case "week":
			s := monday.AddDate(0, 0, 7*shift)
			out = append(out, span(s, s.AddDate(0, 0, 7)))
		case "weekend":
			s := monday.AddDate(0, 0, 7*shift+5)
			out = append(out, span(s, s.AddDate(0, 0, 2)))
		case "month":
			s := month.AddDate(0, shift, 0)
			out = append(out, span(s, s.AddDate(0, 1, 0)))
		case "year":
			s := yearStart.AddDate(shift, 0, 0)
			out = append(out, span(s, s.AddDate(1, 0, 0)))
		}
	}
	for _, m := range reAgo.FindAllStringSubmatchIndex(q, -1) {
		if !take(m[:2]) {
			continue
		}
		n, ok := counts[q[m[2]:m[3]]]
		if !ok {
			n = atoi(q[m[2]:m[3]])
		}
		switch unit := q[m[4]:m[5]]; unit {
		case "day", "week":
			at := today.Add(-time.Duration(n) * units[unit])
			out = append(out, span(at.Add(-units[unit]/2), at.Add(units[unit]/2+24*time.Hour)))
		case "month":
			at := today.AddDate(0, -n, 0)
			out = append(out, span(at.AddDate(0, 0, -15), at.AddDate(0, 0, 16)))
		case "year":
			at := today.AddDate(-n, 0, 0)
			out = append(out, span(at.AddDate(0, -6, 0), at.AddDate(0, 6, 0)))
		}
	}
	return out
}
