package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

func recalledText(t *testing.T, text string, score float64, rank int) *recall.Recalled {
	t.Helper()
	m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}
	c, _, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &recall.Recalled{CID: c, Memory: m, Meta: &messages.MemoryMeta{}, Score: score, Rank: rank, Via: recall.ViaHit}
}

// TestMergeRecalled: members' recalls merge into the best hits by score
// (a memory two members found counts once, at its best score) under k
// and the budget, then expansions under the expansion bound.
func TestMergeRecalled(t *testing.T) {
	a := recalledText(t, "aaaa", 0.9, 1)
	b := recalledText(t, "bbbb", 0.5, 2)
	bOther := *b
	bOther.Score, bOther.Rank = 0.95, 1
	c := recalledText(t, "cccc", 0.7, 2)
	long := recalledText(t, "a text far longer than the budget allows", 0.99, 1)
	x := recalledText(t, "xx", 0.3, 0)
	y := recalledText(t, "yy", 0.2, 0)
	got := mergeRecalled([][]*recall.Recalled{{a, b, x}, {&bOther, c, long, y}}, 3, 20, 1)
	var order []string
	for _, r := range recall.Ranked(got) {
		order = append(order, fmt.Sprintf("%s@%.2f", r.Memory.Text(), r.Score))
	}
	if want := []string{"bbbb@0.95", "aaaa@0.90", "cccc@0.70"}; !slices.Equal(order, want) {
		t.Fatalf("hits %v, want %v", order, want)
	}
	if len(got) != 4 || !slices.ContainsFunc(got, func(r *recall.Recalled) bool { return r.CID.Equals(x.CID) && r.Rank == 0 }) {
		t.Fatalf("want the hits and the best expansion (xx) only: %d memories", len(got))
	}
}

// TestMergeSonas: members' pages of sonas merge into the first limit of
// their union, each sona once (its longest copy), with a cursor when more
// remain.
func TestMergeSonas(t *testing.T) {
	s := func(id string, length int64) *messages.Sona { return &messages.Sona{Uuid: id, Length: length} }
	pages := []base.Page[*messages.Sona]{
		{Items: []*messages.Sona{s("a", 1), s("c", 3)}},
		{Items: []*messages.Sona{s("b", 1), s("c", 5)}, Next: "c"},
	}
	got := mergeSonas(pages, 2)
	if len(got.Items) != 2 || got.Items[0].Uuid != "a" || got.Items[1].Uuid != "b" || got.Next != "b" {
		t.Fatalf("first page %+v", got)
	}
	got = mergeSonas(pages, 3)
	if len(got.Items) != 3 || got.Items[2].Length != 5 || got.Next != "c" {
		t.Fatalf("a member with more: %+v", got)
	}
	got = mergeSonas(pages[:1], 5)
	if len(got.Items) != 2 || got.Next != "" {
		t.Fatalf("the last page: %+v", got)
	}
}
