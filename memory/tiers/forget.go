package tiers

import (
	"errors"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Forget is the tiers' part of an excision (memory/forget): in tx, it
// removes from sona's tiers every page that names a forgotten memory
// (gone reports whether a CID is forgotten) and what the tiers derived
// from those pages, which may quote them:
//
//   - the page, from the STM, its segment or an inbox (a promotion loses
//     it, and its summary and keywords);
//   - the meta-chain summaries of the later pages of its dialogue chain;
//   - its segment's summary, keywords and weighted terms (the heuristic
//     or the model writes them again as pages join), its embedding
//     recomputed from the pages left; a segment left without pages goes;
//   - the document frequency of each of its terms that no page left
//     holds (the others count one page less), and the page from the
//     MTM's corpus size;
//   - from the persona: the facts (knowledge, agent traits) a forgotten
//     memory stated or its segment yielded, and — when a forgotten page
//     had been handed to the persona — the user profile and the traits'
//     evidence, which keep no provenance (the levels stay: numbers, no
//     text).
//
// It must run before the excision deletes the memories: it reads their
// texts for the terms. Each tier's version moves, so a step computed on
// the old state retries.
func (s *Store) Forget(tx store.Tx, sona string, gone func(cid string) bool) error {
	f := &tierForget{s: s, tx: tx, sona: sona, gone: gone, segs: map[uint64]bool{}}
	return f.run()
}

type tierForget struct {
	s       *Store
	tx      store.Tx
	sona    string
	gone    func(string) bool
	removed []*messages.Page // pages removed
	chains  []uint64         // seqs of removed pages (meta-chain summaries after them go)
	segs    map[uint64]bool  // segments that lost a page
	facts   bool             // a persona fact or a promoted page went
	mtmMod  bool             // a segment or a page of the MTM changed
	dropped uint64           // MTM pages removed
}

func (f *tierForget) hit(p *messages.Page) bool { return p != nil && (f.gone(p.Q) || f.gone(p.R)) }

func (f *tierForget) run() error {
	if err := f.stm(); err != nil {
		return err
	}
	if err := f.inboxes(); err != nil {
		return err
	}
	if err := f.mtm(); err != nil {
		return err
	}
	if len(f.removed) == 0 && !f.factsGone() {
		return nil
	}
	if err := f.chainSummaries(); err != nil {
		return err
	}
	if err := f.terms(); err != nil {
		return err
	}
	if err := f.bumpMTM(); err != nil {
		return err
	}
	return f.persona()
}

// bumpMTM moves the MTM's version when anything of it changed (an MTM
// step computed on the old state then retries), and takes the removed
// pages out of its corpus size.
func (f *tierForget) bumpMTM() error {
	if !f.mtmMod {
		return nil
	}
	state := &messages.MtmState{}
	if _, err := f.s.getProto(f.tx, mtmKey(f.sona), state); err != nil {
		return err
	}
	state.Pages -= min(state.Pages, f.dropped)
	state.Version++
	return store.SetProto(f.tx, mtmKey(f.sona), state)
}

// stm drops the short-term pages that name a forgotten memory.
func (f *tierForget) stm() error {
	old, err := f.s.stmState(f.tx, f.sona)
	if err != nil {
		return err
	}
	st := proto.Clone(old).(*messages.StmState)
	kept := st.Pages[:0]
	for _, p := range st.Pages {
		if f.hit(p) {
			f.removed = append(f.removed, p)
			f.chains = append(f.chains, p.Seq)
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == len(st.Pages) {
		return nil
	}
	st.Pages = kept
	st.Version++
	return f.s.putSTM(f.tx, f.sona, old, st)
}

// inboxes drops queued pages that name a forgotten memory, and strips
// them from queued promotions.
func (f *tierForget) inboxes() error {
	for _, tier := range []string{STM, MTM, LPM} {
		work, err := f.s.inbox(f.tx, f.sona, tier, 0)
		if err != nil {
			return err
		}
		for _, w := range work {
			key := inboxKey(f.sona, tier, w.Seq)
			if p := w.GetPage(); p != nil {
				if f.hit(p) {
					f.removed = append(f.removed, p)
					f.chains = append(f.chains, p.Seq)
					f.tx.Delete(key)
				}
				continue
			}
			pr := w.GetPromotion()
			if pr == nil {
				continue
			}
			n := len(pr.Pages)
			pr.Pages = slices.DeleteFunc(pr.Pages, f.hit)
			if len(pr.Pages) == n {
				continue
			}
			f.facts = true // the persona was about to hear of a forgotten page
			// Under a new key: an LPM step that read the old entry fails
			// to consume it, and retries.
			f.tx.Delete(key)
			if len(pr.Pages) == 0 {
				continue
			}
			pr.Summary, pr.Keywords = "", nil
			if err := f.s.enqueueTier(f.tx, f.sona, LPM, &messages.TierWork{Work: &messages.TierWork_Promotion{Promotion: pr}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// mtm drops the mid-term pages that name a forgotten memory, and what
// their segments derived from them.
func (f *tierForget) mtm() error {
	return f.eachSegment(func(seg *Segment, pages []*messages.Page) error {
		var kept []*messages.Page
		for _, p := range pages {
			if !f.hit(p) {
				kept = append(kept, p)
				continue
			}
			f.removed = append(f.removed, p)
			f.chains = append(f.chains, p.Seq)
			f.tx.Delete(pageKey(f.sona, seg.ID, p.Seq))
			f.dropped++
			f.mtmMod = true
			if p.Seq <= seg.PromotedThrough {
				f.facts = true
			}
		}
		if len(kept) == len(pages) {
			return nil
		}
		f.segs[seg.ID] = true
		if len(kept) == 0 {
			f.tx.Delete(segmentKey(f.sona, seg.ID))
			f.tx.Delete(visitKey(f.sona, seg.ID))
			return nil
		}
		seg.Summary, seg.Keywords, seg.Weights = "", nil, nil
		seg.PageCount = uint64(len(kept))
		var mean base.Mean
		var centroid []float32
		for _, p := range kept {
			if len(p.Embedding) > 0 {
				mean, centroid = mean.Add(p.Embedding)
			}
		}
		if llm.Normalize(centroid) {
			seg.Embedding = centroid
		}
		return store.SetProto(f.tx, segmentKey(f.sona, seg.ID), seg.Record())
	})
}

// eachSegment calls fn with each mid-term segment of the sona and its
// pages, stopping at fn's first error.
func (f *tierForget) eachSegment(fn func(seg *Segment, pages []*messages.Page) error) error {
	segs, err := segments(f.tx, f.sona)
	if err != nil {
		return err
	}
	for _, seg := range segs {
		pages, err := segmentPages(f.tx, f.sona, seg.ID)
		if err != nil {
			return err
		}
		if err := fn(seg, pages); err != nil {
			return err
		}
	}
	return nil
}

// factsGone reports whether the persona holds a fact a forgotten memory
// stated.
func (f *tierForget) factsGone() bool {
	persona, err := f.s.readPersona(f.tx, f.sona)
	if err != nil {
		return false
	}
	gone := func(x *Fact) bool { return f.gone(x.Source) }
	return slices.ContainsFunc(persona.User.Knowledge, gone) || slices.ContainsFunc(persona.Agent.Traits, gone)
}

// chainSummaries clears the meta-chain summaries that may restate a
// removed page: those of the pages after it.
func (f *tierForget) chainSummaries() error {
	if len(f.chains) == 0 {
		return nil
	}
	first := slices.Min(f.chains)
	clear := func(p *messages.Page) bool {
		if mc := p.GetMetaChain(); mc != nil && mc.Summary != "" && p.Seq > first && mc.Start <= slices.Max(f.chains) {
			mc.Summary = ""
			return true
		}
		return false
	}
	old, err := f.s.stmState(f.tx, f.sona)
	if err != nil {
		return err
	}
	st := proto.Clone(old).(*messages.StmState)
	changed := false
	for _, p := range st.Pages {
		changed = clear(p) || changed
	}
	if changed {
		st.Version++
		if err := f.s.putSTM(f.tx, f.sona, old, st); err != nil {
			return err
		}
	}
	return f.eachSegment(func(seg *Segment, pages []*messages.Page) error {
		for _, p := range pages {
			if clear(p) {
				f.mtmMod = true
				if err := setPage(f.tx, pageKey(f.sona, seg.ID, p.Seq), p); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// terms takes the removed pages out of the document frequencies: a term
// no page left holds loses its key.
func (f *tierForget) terms() error {
	count := map[string]uint64{}
	for _, p := range f.removed {
		pt, err := f.s.pageText(f.tx, p)
		if err != nil {
			if errors.Is(err, base.ErrNotFound) {
				continue // a page whose memories were forgotten before: counted out then
			}
			return err
		}
		for _, t := range ContentWords(pt.Text()) {
			count[t]++
		}
	}
	if len(count) == 0 {
		return nil
	}
	left := map[string]bool{}
	err := f.eachSegment(func(_ *Segment, pages []*messages.Page) error {
		for _, p := range pages {
			if f.hit(p) {
				continue
			}
			pt, err := f.s.pageText(f.tx, p)
			if err != nil {
				return err
			}
			for _, t := range ContentWords(pt.Text()) {
				if _, ok := count[t]; ok {
					left[t] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for t, n := range count {
		key := dfKey(f.sona, t)
		v, err := f.tx.Get(key)
		if errors.Is(err, base.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		have := base.DecodeU64(v)
		if !left[t] || have <= n {
			f.tx.Delete(key)
			continue
		}
		f.tx.Set(key, base.U64(have-n))
	}
	return nil
}

// persona drops the facts of forgotten memories and of the segments that
// lost a page; when a forgotten page had reached the persona, it clears
// the user profile and the traits' evidence, which keep no provenance.
func (f *tierForget) persona() error {
	rec := &messages.Persona{}
	ok, err := f.s.getProto(f.tx, personaKey(f.sona), rec)
	if err != nil || !ok {
		return err
	}
	persona := PersonaOf(rec)
	before := persona.Record()
	drop := func(x *Fact) bool { return f.gone(x.Source) || f.segs[x.Segment] }
	persona.User.Knowledge = slices.DeleteFunc(persona.User.Knowledge, drop)
	persona.Agent.Traits = slices.DeleteFunc(persona.Agent.Traits, drop)
	if !proto.Equal(before, persona.Record()) {
		f.facts = true
	}
	if f.facts {
		persona.User.Profile = nil
		for _, t := range persona.User.Traits {
			t.Evidence = ""
		}
	}
	if proto.Equal(before, persona.Record()) {
		return nil
	}
	persona.Updates++ // an LPM step computed on the old persona retries
	return store.SetProto(f.tx, personaKey(f.sona), persona.Record())
}
