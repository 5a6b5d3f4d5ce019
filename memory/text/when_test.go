package text

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The time expressions of a query, resolved against an injected now
// (Wednesday 12 July 2023, 15:04 UTC).
func TestTimeSpans(t *testing.T) {
	now := time.Date(2023, time.July, 12, 15, 4, 0, 0, time.UTC)
	d := func(y int, m time.Month, day int) time.Time { return time.Date(y, m, day, 0, 0, 0, 0, time.UTC) }
	sp := func(from, to time.Time) string {
		return fmt.Sprintf("%s..%s", from.Format("2006-01-02"), to.Format("2006-01-02"))
	}
	cases := []struct {
		q    string
		want []string
	}{
		{"When did Melanie go camping in June?", []string{sp(d(2023, 6, 1), d(2023, 7, 1))}},
		{"What did she do in December?", []string{sp(d(2022, 12, 1), d(2023, 1, 1))}}, // the latest December not after now
		{"What did Mel paint in July 2023?", []string{sp(d(2023, 7, 1), d(2023, 8, 1))}},
		{"What did Gina find on 1 February, 2023?", []string{sp(d(2023, 2, 1), d(2023, 2, 2))}},
		{"Who did Maria have dinner with on May 3, 2023?", []string{sp(d(2023, 5, 3), d(2023, 5, 4))}},
		{"What happened on the 4th of July?", []string{sp(d(2023, 7, 4), d(2023, 7, 5))}},
		{"How many times has she gone to the beach in 2022?", []string{sp(d(2022, 1, 1), d(2023, 1, 1))}},
		{"Where did they go during the summer?", []string{sp(d(2023, 6, 1), d(2023, 9, 1))}},
		{"Where did they go last summer?", []string{sp(d(2022, 6, 1), d(2022, 9, 1))}},
		{"What did I eat yesterday?", []string{sp(d(2023, 7, 11), d(2023, 7, 12))}},
		{"Anything today?", []string{sp(d(2023, 7, 12), d(2023, 7, 13))}},
		{"What did John do last week?", []string{sp(d(2023, 7, 3), d(2023, 7, 10))}},
		{"this week", []string{sp(d(2023, 7, 10), d(2023, 7, 17))}},
		{"What did John volunteer at last weekend?", []string{sp(d(2023, 7, 8), d(2023, 7, 10))}},
		{"last month", []string{sp(d(2023, 6, 1), d(2023, 7, 1))}},
		{"Where did he explore on a road trip last year?", []string{sp(d(2022, 1, 1), d(2023, 1, 1))}},
		{"two weeks ago", []string{sp(d(2023, 6, 24).Add(12*time.Hour), d(2023, 7, 2).Add(12*time.Hour))}}, // a week around 28 June
		{"3 days ago", []string{sp(d(2023, 7, 8).Add(12*time.Hour), d(2023, 7, 10).Add(12*time.Hour))}},
		{"a year ago", []string{sp(d(2022, 1, 12), d(2023, 1, 12))}},
		// "may" the verb is no month; May as a month is.
		{"What may Caroline pursue?", nil},
		{"What did she plan in May?", []string{sp(d(2023, 5, 1), d(2023, 6, 1))}},
		{"Where did Caroline move from 4 years ago?", []string{sp(d(2019, 1, 12), d(2020, 1, 12))}},
		{"What did Caroline research?", nil},
		// Two expressions, two spans; a date is not also read as its month or year.
		{"between March 2023 and last week", []string{sp(d(2023, 3, 1), d(2023, 4, 1)), sp(d(2023, 7, 3), d(2023, 7, 10))}},
	}
	for _, c := range cases {
		var got []string
		for _, s := range TimeSpans(c.q, now) {
			got = append(got, sp(time.Unix(s.From, 0).UTC(), time.Unix(s.To, 0).UTC()))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v, want %v", c.q, got, c.want)
		}
	}
}

func TestSpanNear(t *testing.T) {
	day := int64(24 * 3600)
	month := Span{From: 100 * day, To: 130 * day} // 30 days: the tolerance is 30 days
	dayS := Span{From: 100 * day, To: 101 * day}  // 1 day: the tolerance is a week
	cases := []struct {
		s    Span
		t    int64
		want float64
	}{
		{month, 100 * day, 1}, {month, 130*day - 1, 1}, {month, 130*day + 14*day, 1 - float64(14*day+1)/float64(30*day)},
		{month, 85 * day, 0.5}, {month, 70 * day, 0}, {month, 60 * day, 0}, {month, 160 * day, 0},
		{dayS, 100*day + 3600, 1}, {dayS, 101*day + 7*day, 0}, {dayS, 97*day - 3600*12, 1 - float64(3*day+12*3600)/float64(7*day)},
	}
	for _, c := range cases {
		if got := c.s.Near(c.t); got < c.want-1e-12 || got > c.want+1e-12 {
			t.Errorf("%+v near %d: %v, want %v", c.s, c.t, got, c.want)
		}
	}
}

// A query the word filter lets by speaks of no time: the expressions find
// nothing in it either.
func FuzzTimeWords(f *testing.F) {
	for _, q := range []string{"what did I plant in the garden", "in May", "may I ask", "8th of june", "back in 2019!",
		"two weeks ago", "last weekend", "the summer,2021", "x2023 and 20234", "mayday", "MARCH", "\u212Aday", "week_end"} {
		f.Add(q)
	}
	now := time.Date(2023, time.July, 12, 15, 4, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, q string) {
		q = strings.ToLower(q)
		if got := spans(q, now); !mayTellTime(q) && got != nil {
			t.Fatalf("%q: spans %v, but the word filter lets it by", q, got)
		}
	})
}
