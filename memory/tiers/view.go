package tiers

import "github.com/memoria-ai/memoria/messages"

// The API's view of the tiers (GET /sona/{uuid}/tiers, Store.View) is
// made of the same messages as the stored records. A view is built from a
// record field by field, naming what is shown, rather than cloned with the
// stored-only fields cleared: a field added to a record stays out of the
// responses until a view names it.

// pageView is a stored page as the API shows it: without its embedding,
// with the texts of its input and response.
func pageView(p *messages.Page, qText, rText string) *messages.Page {
	return &messages.Page{Seq: p.Seq, Q: p.Q, R: p.R, T: p.T, MetaChain: p.MetaChain, Keywords: p.Keywords, QText: qText, RText: rText}
}

// segmentView is a stored segment as the API shows it: without its
// embedding and keyword weights, with its pages (as pageView shows them)
// and its heat now. promoted_through has always been shown, though
// tiers.proto calls it stored only; it stays, so the response is unchanged.
func segmentView(s *Segment, heat float64, pages []*messages.Page) *messages.Segment {
	return &messages.Segment{Id: s.ID, Summary: s.Summary, Keywords: s.Keywords, NVisit: s.NVisit, LInteraction: s.LInteraction,
		LastAccess: s.LastAccess, CreatedAt: s.CreatedAt, PageCount: s.PageCount, PromotedThrough: s.PromotedThrough,
		Promotions: s.Promotions, Pages: pages, Heat: heat}
}

// personaView is a stored persona as the API shows it: its facts without
// their embeddings, the agent's profile from the configuration.
func personaView(p *Persona, agentProfile map[string]string) *messages.Persona {
	v := &messages.Persona{User: &messages.UserPersona{Profile: p.User.Profile, Traits: traitRecords(p.User.Traits)},
		Agent: &messages.AgentPersona{Profile: agentProfile}, Updates: p.Updates}
	v.User.Knowledge = factViews(p.User.Knowledge)
	v.Agent.Traits = factViews(p.Agent.Traits)
	return v
}

func factViews(fs []*Fact) []*messages.Fact {
	var out []*messages.Fact
	for _, f := range fs {
		out = append(out, &messages.Fact{Text: f.Text, T: f.T, Segment: f.Segment, Source: f.Source})
	}
	return out
}
