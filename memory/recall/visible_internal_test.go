package recall

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/messages"
)

// plainFields keeps what record keeps of a full decode, past the fields
// it skips (maps, nested messages, repeated messages).
func TestPlainFieldsAgreeWithProto(t *testing.T) {
	p := newPlainMemories()
	for i, m := range []*messages.MemoryMeta{
		{},
		{Sonas: []string{"a", "b"}, AgentId: "ag", Kind: "fact", Importance: 0.5, AccessCount: 3, LastAccessTick: 9, CreatedAt: 1700000000, Seq: 12,
			Labels: map[string]string{"x": "y", "z": ""}, Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 0.25, "n": 1}},
			Joins: []*messages.SonaJoin{{Sona: "b", AgentId: "ag2", Labels: map[string]string{"k": "v"}, JoinedAt: 5}}},
		{Sonas: []string{"s"}, Backbone: true},
		{Sonas: []string{"", "s"}},
		{Sonas: []string{""}, Kind: "note"},
		{Sonas: []string{"s"}, Archived: true, Evaluation: &messages.EvalSummary{Failed: true}},
		{Sonas: []string{"s"}, ExpiresAt: 1 << 40},
		{Sonas: []string{"s"}, Insight: &messages.InsightMark{}},
		{Sonas: []string{"s"}, Insight: &messages.InsightMark{Confidence: 0.9}},
		{Sonas: []string{"s"}, Kind: "goal", Importance: 0.25, LastAccessTick: 4, CreatedAt: 3,
			Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 0.5}, Priority: &messages.Priority{Score: 0.3, Factors: []string{"x"}, DecayRate: 0.8}}},
		{Kind: "fact", Evaluation: &messages.EvalSummary{Priority: &messages.Priority{Score: 0.5}}},
		{Sonas: []string{"t"}, Evaluation: &messages.EvalSummary{Failed: true, Priority: &messages.Priority{DecayRate: 0.1}}},
		{Sonas: []string{"t"}, Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 0.5}}},
	} {
		sona := ""
		if len(m.Sonas) > 0 {
			sona = m.Sonas[0]
		}
		// What recall's read of m keeps.
		q := newPlainMemories()
		q.seed = p.seed
		q.record(0, m, sona, 0)
		want, wantScore := q.facts[0], scoreNamed(q, 0)
		// As stored (packed) and as proto encodes it.
		packed, err := meta.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range [][]byte{packed, plain} {
			// TestTrimPlainKnowsTheSame: the trimmed record gives the same.
			trimmed, err := TrimPlain(nil, raw)
			if err != nil {
				t.Fatalf("%d: trim: %v", i, err)
			}
			if len(trimmed) > len(raw) {
				t.Errorf("%d: trimmed to %d bytes from %d", i, len(trimmed), len(raw))
			}
			for what, b := range map[string][]byte{"record": raw, "trimmed": trimmed} {
				got, rs, err := plainFields(b, p)
				if err != nil {
					t.Fatalf("%d: %s: %v", i, what, err)
				}
				if got != want {
					t.Errorf("%d: %s: %+v, want %+v", i, what, got, want)
				}
				r := newPlainMemories()
				r.keepRecord(0, got, rs, 0)
				if s := scoreNamed(r, 0); s != wantScore {
					t.Errorf("%d: %s: score %+v, want %+v", i, what, s, wantScore)
				}
			}
		}
	}
	if _, err := TrimPlain(nil, []byte{0x0a, 0x05, 'a'}); err == nil {
		t.Error("a damaged record trims")
	}
	if _, _, err := plainFields([]byte{0x0a, 0x05, 'a'}, p); err == nil { // a string cut short
		t.Error("a damaged record decodes")
	}
}

// namedScore is a score fact with its names.
type namedScore struct {
	known             bool
	importance, decay float64
	access            int64
	kind, sona        string
}

func scoreNamed(p *plainMemories, id uint64) namedScore {
	_, s, kind, sonas, ok := p.known(id)
	if !ok {
		return namedScore{}
	}
	n := namedScore{known: true, importance: s.importance, decay: s.decay, access: s.access, kind: kind}
	if len(sonas) > 0 {
		n.sona = sonas[0]
	}
	return n
}

// What plainMemories tells: in sona scope only for the sona a memory was
// read a member of (or the backbone's), in self scope for any; nothing
// for a memory not plain, nor after a forget, nor from a read in a view
// begun before that forget.
func TestPlainMemoriesTellOnlyWhatWasRead(t *testing.T) {
	p := newPlainMemories()
	gen := p.generation()
	p.record(3, &messages.MemoryMeta{Sonas: []string{"a", "b"}, CreatedAt: 7}, "a", gen)
	p.record(4, &messages.MemoryMeta{Sonas: []string{"c"}, Backbone: true}, "c", gen)
	p.record(5, &messages.MemoryMeta{Sonas: []string{"a"}, Archived: true}, "a", gen)
	for _, c := range []struct {
		id        uint64
		sona      string
		sonaScope bool
		want      bool
	}{
		{3, "a", true, true},
		{3, "b", true, false}, // a member of b too, but read for a: b's recall reads it
		{3, "x", true, false}, // another sona's: never without a read
		{3, "x", false, true}, // self scope
		{4, "x", true, true},  // the backbone's
		{5, "a", true, false}, // archived
		{5, "a", false, false},
		{9, "a", false, false}, // never read
	} {
		created, ok := p.visible(c.id, c.sona, c.sonaScope)
		if ok != c.want {
			t.Errorf("%d in %q (sona scope %v): %v, want %v", c.id, c.sona, c.sonaScope, ok, c.want)
		}
		if ok && c.id == 3 && created != 7 {
			t.Errorf("3 stored at %d, want 7", created)
		}
	}
	p.commit([]written{{id: 3}}) // its metadata written
	if _, ok := p.visible(3, "a", true); ok {
		t.Error("3 still known after its metadata was written")
	}
	p.record(3, &messages.MemoryMeta{Sonas: []string{"a"}}, "a", gen) // read before the write
	if _, ok := p.visible(3, "a", true); ok {
		t.Error("a read in a view older than the write recorded")
	}
	p.record(3, &messages.MemoryMeta{Sonas: []string{"a"}}, "a", p.generation())
	if _, ok := p.visible(3, "a", true); !ok {
		t.Error("a read after the write did not record")
	}
}

// BenchmarkKnowPlain is what the open's scan does with each memory's
// trimmed record from the metadata snapshot (KnowPlainAt), room reserved
// as the open reserves it.
func BenchmarkKnowPlain(b *testing.B) {
	m := &messages.MemoryMeta{Sonas: []string{"sona-0123456789abcdef"}, Kind: "observation", Importance: 0.3, LastAccessTick: 1234, CreatedAt: 1700000000, Seq: 99,
		Evaluation: &messages.EvalSummary{Metrics: map[string]float64{"m": 0.5}, Priority: &messages.Priority{Score: 0.3, Factors: []string{"x"}, DecayRate: 0.6}}}
	raw, _ := meta.Marshal(m)
	tr, _ := TrimPlain(nil, raw)
	p := newPlainMemories()
	p.reserve(b.N)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f, rs, err := plainFields(tr, p)
		if err != nil {
			b.Fatal(err)
		}
		p.keepRecord(uint64(i), f, rs, 0)
	}
}
