package tiers

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/memoria-ai/memoria/memory/base"
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
		var ranked []rankedPage
		for _, r := range TopSegments(segs, vec, qk, p.TopM) {
			id := segs[r.Index].ID
			out.Segments = append(out.Segments, id)
			if ranked, err = rankPages(txn, sona, id, vec, p.SegmentPages, ranked); err != nil {
				return err
			}
		}
		slices.SortFunc(ranked, func(a, b rankedPage) int { // as TopPages
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		for _, r := range ranked[:min(k, len(ranked))] {
			pg, err := readPage(txn, sona, r.seg, r.seq)
			if err != nil {
				return err
			}
			t, err := s.pageText(txn, pg)
			if err != nil {
				return err
			}
			out.MTM = append(out.MTM, RecalledPage{PageText: t, Segment: r.seg, Score: r.score})
		}

		persona, err := s.sharedPersona(txn, sona)
		if err != nil {
			return err
		}
		out.Persona = s.relevantPersona(persona, vec)
		return nil
	})
	return out, err
}

// relevantPersona is persona with its knowledge and agent traits cut to
// the most relevant to vec, best first, and the configured agent profile.
// It shares persona's facts, user profile and traits, and changes none.
func (s *Store) relevantPersona(persona *Persona, vec []float32) *Persona {
	p := s.cfg.Tiers
	out := new(Persona)
	*out = *persona
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

// rankedPage is a mid-term page a retrieval ranks: its similarity with
// the query, its seq and its segment.
type rankedPage struct {
	score    float64
	seq, seg uint64
}

// rankPages adds to out the newest n pages of segment seg of sona, each
// with its cosine similarity with vec (TopPages' score of the page
// decoded), read from their records' seq and embedding alone: a segment
// grows with every page that joins it, and a retrieval decodes only the
// top_k pages of its segments (readPage).
func rankPages(txn store.Reader, sona string, seg uint64, vec []float32, n int, out []rankedPage) ([]rankedPage, error) {
	prefix := PagePrefix(sona, seg)
	// No values prefetched: Badger starts a goroutine to copy each (23%
	// of the server's CPU over five minutes at two busy sonas), where a
	// page's small record is read in place.
	it := txn.NewIterator(store.IterOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	for it.Seek(append(slices.Clip(prefix), 0xff)); it.Valid() && n > 0; it.Next() {
		n--
		err := it.Item().Value(func(v []byte) error {
			seq, score, err := pageScore(v, vec)
			if err != nil {
				return fmt.Errorf("page of segment %d of %s: %w", seg, sona, err)
			}
			out = append(out, rankedPage{score: score, seq: seq, seg: seg})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pageScore reads a page record's seq and its embedding's cosine
// similarity with vec, decoding nothing else: the embedding is the
// floats of an older record, or else the packed one (as segmentPages
// reads it).
func pageScore(v []byte, vec []float32) (seq uint64, score float64, err error) {
	var floats []float32
	var packed []byte
	for len(v) > 0 {
		num, typ, n := protowire.ConsumeTag(v)
		if n < 0 {
			return 0, 0, fmt.Errorf("%w: a page record: %v", base.ErrCorrupt, protowire.ParseError(n))
		}
		v = v[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			seq, n = protowire.ConsumeVarint(v)
		case num == 7 && typ == protowire.BytesType: // packed floats
			var b []byte
			if b, n = protowire.ConsumeBytes(v); n >= 0 && len(b)%4 != 0 {
				return 0, 0, fmt.Errorf("%w: a page record's embedding of %d bytes", base.ErrCorrupt, len(b))
			}
			if n >= 0 {
				for ; len(b) >= 4; b = b[4:] {
					floats = append(floats, math.Float32frombits(binary.LittleEndian.Uint32(b)))
				}
			}
		case num == 7 && typ == protowire.Fixed32Type:
			var x uint32
			if x, n = protowire.ConsumeFixed32(v); n >= 0 {
				floats = append(floats, math.Float32frombits(x))
			}
		case num == 10 && typ == protowire.BytesType:
			packed, n = protowire.ConsumeBytes(v)
		default:
			n = protowire.ConsumeFieldValue(num, typ, v)
		}
		if n < 0 {
			return 0, 0, fmt.Errorf("%w: a page record: %v", base.ErrCorrupt, protowire.ParseError(n))
		}
		v = v[n:]
	}
	if len(packed) > 0 {
		if score, err = packedCosine(packed, vec); err != nil || len(floats) == 0 {
			return seq, score, err
		}
	}
	return seq, base.Cosine(floats, vec), nil
}
