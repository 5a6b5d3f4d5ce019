package living

import (
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// Insight is a dream insight as the program uses it: a memory of the
// sona that dreamed it, its CIDs parsed. It has no record of its own (the
// memory's block, its metadata's insight mark and the g/ index hold it);
// the API shows it through View.
type Insight struct {
	CID  cid.Cid
	Text string
	// Category is one of the Insight* categories; Confidence is 0..1.
	Category   string
	Confidence float64
	// Sources are the memories it was drawn from (the memory's edges).
	Sources []cid.Cid
	// Sona is the uuid of the sona that dreamed it.
	Sona string
	// GeneratedAt is in Unix seconds.
	GeneratedAt int64
}

// InsightOf is the insight memory m, addressed by c, with its mark,
// dreamed by sona at the Unix second at.
func InsightOf(c cid.Cid, m *model.Memory, mark *messages.InsightMark, sona string, at int64) Insight {
	in := Insight{CID: c, Text: m.Text(), Category: mark.GetCategory(), Confidence: mark.GetConfidence(), Sona: sona, GeneratedAt: at}
	for _, e := range m.Edges {
		in.Sources = append(in.Sources, e.Target)
	}
	return in
}

// View is the insight as the API shows it (GET /insights, a heartbeat's
// report), field by field.
func (in Insight) View() *messages.Insight {
	v := &messages.Insight{Cid: in.CID.String(), Insight: in.Text, Category: in.Category, Confidence: in.Confidence,
		Sona: in.Sona, GeneratedAt: in.GeneratedAt}
	for _, s := range in.Sources {
		v.Sources = append(v.Sources, s.String())
	}
	return v
}
