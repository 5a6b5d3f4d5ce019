package tiers

import (
	"cmp"
	"maps"
	"slices"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Recall is what MemoryOS retrieval gives a step (seed 003 §3): every
// STM page, the best pages of the best MTM segments, and the persona with
// its most relevant knowledge and agent traits.
type Recall struct {
	// STM holds the short-term pages, oldest first, with the pages still
	// on their way in.
	STM []PageText
	// MTM holds the retrieved mid-term pages, best first.
	MTM []RecalledPage
	// Segments are the segments selected, best first: their visits are
	// recorded through VisitSegments.
	Segments []uint64
	// Persona is the LPM with Knowledge and Agent.Traits cut to the most
	// relevant, best first, and the agent profile from configuration.
	Persona *Persona
}

// RecalledPage is a retrieved MTM page.
type RecalledPage struct {
	PageText
	Segment uint64
	Score   float64
}

// queryKeywords are the TF-IDF keywords of a query against the sona's
// mid-term corpus.
const queryKeywords = 8

// RecallTiers retrieves from the tiers of sona for a query (text and its
// embedding): top-m segments by Fscore, then the top-k pages among them
// by similarity (k = 0: top_k), and the top KB entries and agent
// traits. It only reads; the caller records the visits.
func (s *Store) Recall(sona, text string, vec []float32, k int) (*Recall, error) {
	p := s.cfg.Tiers
	if k <= 0 {
		k = p.TopK
	}
	out := &Recall{}
	gen := s.segs.begin(sona)
	err := s.view.View(func(txn store.Reader) error {
		stm, err := s.stmState(txn, sona)
		if err != nil {
			return err
		}
		pending, err := s.inboxTail(txn, sona, STM, p.STMPages)
		if err != nil {
			return err
		}
		pages := slices.Clone(stm.Pages)
		for _, w := range pending {
			pages = append(pages, w.GetPage())
		}
		for _, pg := range pages[max(0, len(pages)-p.STMPages):] {
			t, err := s.pageText(txn, pg)
			if err != nil {
				return err
			}
			out.STM = append(out.STM, t)
		}

		state := &messages.MtmState{}
		if _, err := s.getProto(txn, mtmKey(sona), state); err != nil {
			return err
		}
		var segs []*Segment
		if state.NextSegment > 0 { // else no segment was ever made: none to read
			if segs, err = s.readSegments(txn, sona, gen); err != nil {
				return err
			}
		}
		var qk []string
		if len(segs) > 0 { // the query's keywords only rank segments
			df := func(term string) uint64 {
				if state.Pages == 0 {
					return 0 // no mid-term page yet: nothing to read
				}
				n, _ := s.docFreq(txn, dfKey(sona, term)) // unreadable: as if unseen
				return n
			}
			qk = Terms(Keywords(text, df, state.Pages, queryKeywords))
		}
		var cands []*messages.Page
		var owner []uint64
		for _, r := range TopSegments(segs, vec, qk, p.TopM) {
			id := segs[r.Index].ID
			out.Segments = append(out.Segments, id)
			ps, err := segmentPages(txn, sona, id)
			if err != nil {
				return err
			}
			for _, pg := range ps {
				cands = append(cands, pg)
				owner = append(owner, id)
			}
		}
		for _, r := range TopPages(cands, vec, k) {
			t, err := s.pageText(txn, cands[r.Index])
			if err != nil {
				return err
			}
			out.MTM = append(out.MTM, RecalledPage{PageText: t, Segment: owner[r.Index], Score: r.Score})
		}

		persona, err := s.readPersona(txn, sona)
		if err != nil {
			return err
		}
		out.Persona = s.relevantPersona(persona, vec)
		return nil
	})
	return out, err
}

// relevantPersona cuts a persona's knowledge and agent traits to the most
// relevant to vec, best first, and adds the configured agent profile. It
// changes persona, the caller's own (read for this retrieval).
func (s *Store) relevantPersona(persona *Persona, vec []float32) *Persona {
	p := s.cfg.Tiers
	out := persona
	pick := func(facts []*Fact) []*Fact {
		var picked []*Fact
		for _, r := range TopFacts(facts, vec, p.LPMTopK) {
			picked = append(picked, facts[r.Index])
		}
		return picked
	}
	out.User.Knowledge = pick(out.User.Knowledge)
	out.Agent.Traits = pick(out.Agent.Traits)
	out.Agent.Profile = s.agentProfile()
	return out
}

func (s *Store) agentProfile() map[string]string {
	return maps.Clone(s.cfg.Tiers.AgentProfile)
}

// Tiers returns the state of sona's tiers for display: STM pages, MTM
// segments hottest first with their pages and heat, the work in flight
// between the tiers, and the persona (embeddings left out).
func (s *Store) View(sona string) (*messages.Tiers, error) {
	if err := s.env.CheckSona(sona); err != nil {
		return nil, err
	}
	now := s.clock.Now().Unix()
	out := &messages.Tiers{Stm: &messages.StmView{}, Mtm: &messages.MtmView{}, Lpm: &messages.Persona{}}
	gen := s.segs.begin(sona)
	err := s.view.View(func(txn store.Reader) error {
		show := func(p *messages.Page) (*messages.Page, error) {
			t, err := s.pageText(txn, p)
			if err != nil {
				return nil, err
			}
			lines := t.Lines()
			return pageView(p, lines[0], lines[1]), nil
		}
		showAll := func(ps []*messages.Page) ([]*messages.Page, error) {
			out := make([]*messages.Page, 0, len(ps))
			for _, p := range ps {
				shown, err := show(p)
				if err != nil {
					return nil, err
				}
				out = append(out, shown)
			}
			return out, nil
		}
		pagesOf := func(tier string) ([]*messages.Page, error) {
			ws, err := s.inbox(txn, sona, tier, 0)
			var ps []*messages.Page
			for _, w := range ws {
				ps = append(ps, w.GetPage())
			}
			return ps, err
		}

		stm, err := s.stmState(txn, sona)
		if err != nil {
			return err
		}
		if out.Stm.Pages, err = showAll(stm.Pages); err != nil {
			return err
		}
		pending, err := pagesOf(STM)
		if err != nil {
			return err
		}
		if out.Stm.Pending, err = showAll(pending); err != nil {
			return err
		}

		segs, err := s.readSegments(txn, sona, gen)
		if err != nil {
			return err
		}
		for _, seg := range segs {
			ps, err := segmentPages(txn, sona, seg.ID)
			if err != nil {
				return err
			}
			shown, err := showAll(ps)
			if err != nil {
				return err
			}
			out.Mtm.Segments = append(out.Mtm.Segments, segmentView(seg, Heat(seg, now, s.cfg.Tiers), shown))
		}
		slices.SortStableFunc(out.Mtm.Segments, func(a, b *messages.Segment) int { return cmp.Compare(b.Heat, a.Heat) })
		if pending, err = pagesOf(MTM); err != nil {
			return err
		}
		if out.Mtm.Pending, err = showAll(pending); err != nil {
			return err
		}
		promos, err := s.inbox(txn, sona, LPM, 0)
		if err != nil {
			return err
		}
		for _, w := range promos {
			out.Mtm.Promoting = append(out.Mtm.Promoting, w.GetPromotion())
		}

		lpm, err := s.readPersona(txn, sona)
		if err != nil {
			return err
		}
		out.Lpm = personaView(lpm, s.agentProfile())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
