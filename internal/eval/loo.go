package eval

import (
	"fmt"
	"slices"
)

// Question is one scored question with its conversation.
type Question struct {
	Conv     string // conversation id
	ConvAt   int    // the conversation's index in the list given to Questions
	Text     string
	Category int
	Evidence []string
}

// Questions lists the scored questions (categories 1-4 with evidence
// turns: QA.Scorable) of convs, in order: conversation by conversation,
// each in its file's order.
func Questions(convs []Conversation) []Question {
	var out []Question
	for i, cv := range convs {
		for _, q := range cv.QA {
			if q.Scorable() {
				out = append(out, Question{Conv: cv.ID, ConvAt: i, Text: q.Question, Category: q.Category, Evidence: q.Evidence})
			}
		}
	}
	return out
}

// LeaveOneOut chooses recall settings leave-one-conversation-out.
// ranked[s][i] are the dia ids setting s ranked for question qs[i], best
// first. For each conversation it returns the setting whose recall@k is
// best over the other conversations' questions (the mean over questions,
// as the overall figure is); on a tie the lower index wins, so the
// configured setting, listed first, is kept unless another one does
// better. Scoring each conversation with its setting is then the
// held-out figure.
func LeaveOneOut(qs []Question, ranked [][][]string, k int) (map[string]int, error) {
	if len(ranked) == 0 {
		return nil, fmt.Errorf("leave-one-out: no settings")
	}
	var convs []string
	for _, q := range qs {
		if !slices.Contains(convs, q.Conv) {
			convs = append(convs, q.Conv)
		}
	}
	if len(convs) < 2 {
		return nil, fmt.Errorf("leave-one-out needs at least two conversations, got %d", len(convs))
	}
	// sums[s][c]: setting s's summed recall@k over conversation c's questions.
	sums := make([][]float64, len(ranked))
	for s, answers := range ranked {
		if len(answers) != len(qs) {
			return nil, fmt.Errorf("leave-one-out: setting %d answered %d of %d questions", s, len(answers), len(qs))
		}
		sums[s] = make([]float64, len(convs))
		for i, q := range qs {
			got := answers[i]
			sums[s][slices.Index(convs, q.Conv)] += share(q.Evidence, got[:min(k, len(got))])
		}
	}
	choice := map[string]int{}
	for held, c := range convs {
		best, bestSum := -1, 0.0
		for s := range ranked {
			sum := 0.0
			for other := range convs {
				if other != held {
					sum += sums[s][other]
				}
			}
			if best < 0 || sum > bestSum {
				best, bestSum = s, sum
			}
		}
		choice[c] = best
	}
	return choice, nil
}
