package meta_test

import (
	"testing"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
)

// A committed memory enters the decoded-memory cache as the append held
// it (unless a reader following the commit, such as the text index, read
// its block first): what is served must be the memory its CID names, for
// every kind of data.
func TestCommittedMemoryIsCachedAsItsBlock(t *testing.T) {
	s := memorytest.Open(t, memorytest.Config(t.TempDir()), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	o := memorytest.NewOwner(t, s, "cache")
	ts, name, modelName, stop := int64(1_700_000_000), "Ada", "m-1", "endTurn"
	first := o.Text("the first memory")
	for _, m := range []*model.Memory{
		{Data: model.Data{Text: &model.TextData{Content: "a text with an edge and a time"}}, Timestamp: &ts,
			Edges: []model.Edge{{Target: first, Weight: 0.25}}},
		{Data: model.Data{Other: &model.OtherData{Name: &name, Content: "said by another"}}},
		{Data: model.Data{Other: &model.OtherData{Content: "said by someone unnamed"}}},
		{Data: model.Data{Self: &model.SelfData{Name: "me", Parts: []model.Part{{Content: "one", Model: &modelName}, {Content: "two"}}, StopReason: &stop}}},
	} {
		c := o.Add(m, nil)
		got, _, err := s.Memories.Get(c)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := got.Encode()
		if err != nil || again != c {
			t.Fatalf("the cached memory encodes to %s (%v), its CID is %s", again, err, c)
		}
	}
}
