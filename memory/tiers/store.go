package tiers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The tiers in the store (DESIGN.md §4.2): see doc.go for the key space
// and the invariants of the inboxes.

// Tier transitions, as Event.Kind.
const (
	PageAdded       = "page_added"       // a page entered the STM
	PageMoved       = "page_moved"       // the STM handed its oldest page to the MTM
	SegmentCreated  = "segment_created"  // a page started a new MTM segment
	SegmentMerged   = "segment_merged"   // a page joined an MTM segment
	SegmentEvicted  = "segment_evicted"  // the coldest segment left the MTM
	SegmentPromoted = "segment_promoted" // a hot segment's new pages went to the LPM
	SegmentVisited  = "segment_visited"  // retrieval selected a segment
	PersonaUpdated  = "persona_updated"  // the LPM applied a promotion
)

// Event is one tier transition.
type Event struct {
	Sona    string
	Kind    string
	Segment uint64 // 0 when not about a segment
	Page    uint64 // 0 when not about a page
}

// Step is what one step of a tier did.
type Step struct {
	// Done: inbox entries were consumed; false when the inbox was empty.
	Done bool
	// More: the inbox held another entry after those consumed, when the
	// step read it. Work enqueued after that read comes with a wake
	// of its own (the enqueuer wakes the tier once its commit is
	// durable), so a tier whose step was Done without More can rest
	// without reading its inbox again.
	More   bool
	Events []Event
	// Wake lists the tiers that received work.
	Wake []string
}

// errConflict: the tier changed while a step was thinking; the step
// is retried on the new state.
var errConflict = errors.New("memory: tier changed during the step")

func tierPrefix(sona string) []byte            { return base.Join(KeyPrefix, []byte(sona), []byte{0}) }
func stmKey(sona string) []byte                { return base.Join(tierPrefix(sona), []byte("s")) }
func mtmKey(sona string) []byte                { return base.Join(tierPrefix(sona), []byte("m")) }
func segmentPrefix(sona string) []byte         { return base.Join(tierPrefix(sona), []byte("g")) }
func segmentKey(sona string, id uint64) []byte { return base.Join(segmentPrefix(sona), base.U64(id)) }
func visitPrefix(sona string) []byte           { return base.Join(tierPrefix(sona), []byte("v")) }
func visitKey(sona string, id uint64) []byte   { return base.Join(visitPrefix(sona), base.U64(id)) }

// PagePrefix is the key prefix of the pages of segment seg of sona.
func PagePrefix(sona string, seg uint64) []byte {
	return base.Join(tierPrefix(sona), []byte("p"), base.U64(seg))
}
func pageKey(sona string, seg, seq uint64) []byte {
	return base.Join(PagePrefix(sona, seg), base.U64(seq))
}
func personaKey(sona string) []byte { return base.Join(tierPrefix(sona), []byte("l")) }
func stmPageKey(sona string, seq uint64) []byte {
	return base.Join(tierPrefix(sona), []byte("S"), base.U64(seq))
}
func dfKey(sona, term string) []byte {
	return base.Join(tierPrefix(sona), []byte("f"), base.KeyText(term))
}

// tierKey splits key, if it is one of the tiers' (tierPrefix(sona), a
// part's letter, the rest), into those: the commit events' followers
// (the segment and document-frequency caches) tell their keys by it.
func tierKey(key string) (sona string, part byte, rest string, ok bool) {
	after, ok := strings.CutPrefix(key, string(KeyPrefix))
	j := strings.IndexByte(after, 0)
	if !ok || j < 0 || j+1 >= len(after) {
		return "", 0, "", false
	}
	return after[:j], after[j+1], after[j+2:], true
}

func inboxPrefix(sona, tier string) []byte {
	return base.Join(tierPrefix(sona), []byte("i"), []byte(tier), []byte{0})
}
func counterKey(sona, counter string) []byte {
	return base.Join(tierPrefix(sona), []byte("n"), []byte(counter))
}
func inboxKey(sona, tier string, seq uint64) []byte {
	return base.Join(inboxPrefix(sona, tier), base.U64(seq))
}

// counterPage numbers pages; the tier names number their inboxes.
const counterPage = "page"

// nextCounter takes the next value of a tier counter.
func (s *Store) nextCounter(tx store.Tx, key []byte) (uint64, error) {
	var n uint64
	v, err := s.record(tx, key)
	switch {
	case errors.Is(err, base.ErrNotFound):
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, fmt.Errorf("%w: tier counter", base.ErrCorrupt)
	default:
		n = base.DecodeU64(v)
	}
	tx.Set(key, base.U64(n+1))
	return n + 1, nil
}

// enqueueTier writes w into a tier's inbox.
func (s *Store) enqueueTier(tx store.Tx, sona, tier string, w *messages.TierWork) error {
	seq, err := s.nextCounter(tx, counterKey(sona, tier))
	if err != nil {
		return err
	}
	w.Seq = seq
	raw, err := proto.Marshal(w)
	if err != nil {
		return err
	}
	tx.Set(inboxKey(sona, tier, seq), raw)
	return nil
}

// EnqueuePage numbers a new dialogue page (q, r) and hands it to the STM,
// in the operation that writes the page's response.
func (s *Store) EnqueuePage(tx store.Tx, sona string, q, r cid.Cid, t int64) error {
	seq, err := s.nextCounter(tx, counterKey(sona, counterPage))
	if err != nil {
		return err
	}
	return s.enqueueTier(tx, sona, STM, &messages.TierWork{Work: &messages.TierWork_Page{
		Page: &messages.Page{Seq: seq, Q: q.String(), R: r.String(), T: t},
	}})
}

// PushPage hands the dialogue page (q, r) of sona to its STM, outside an
// advance (an advance does it in the response's own transaction). Both
// memories must be in the sona.
func (s *Store) PushPage(ctx context.Context, sona string, q, r cid.Cid) error {
	t := s.clock.Now().Unix()
	return s.store.Update(ctx, func(tx store.Tx) error {
		for _, c := range []cid.Cid{q, r} {
			sonas, err := s.env.Sonas(tx, c)
			if err != nil {
				return err
			}
			if !slices.Contains(sonas, sona) {
				return fmt.Errorf("%w: memory %s is not in sona %s", base.ErrInvalid, c, sona)
			}
		}
		return s.EnqueuePage(tx, sona, q, r, t)
	})
}

// inbox lists the work waiting in a tier's inbox, oldest first, at most
// limit entries (0: all). It seeks past the entries consumed before (see
// inboxStart): an inbox is written at its end and consumed from its
// start, and the deleted entries stay in the store's files until a
// compaction drops them — a scan from the inbox's first key stepped over
// all of them, more with each page a sona ever had.
//
// A view reads it through the cache of the inboxes (cachedInboxOf) and,
// when the cache cannot tell, reads the whole inbox to cache it.
func (s *Store) inbox(txn store.Reader, sona, tier string, limit int) ([]*messages.TierWork, error) {
	if in, ok := s.cachedInboxOf(txn, sona, tier); ok {
		return in.works(sona, tier, limit)
	}
	var fill *cachedInbox // the whole inbox, to cache
	if _, op := txn.(store.Tx); !op && s.inboxes != nil {
		fill = &cachedInbox{}
	}
	var out []*messages.TierWork
	prefix := inboxPrefix(sona, tier)
	from := s.starts.get(sona, tier)
	it := txn.NewIterator(store.IterOptions{Prefix: prefix, PrefetchValues: true})
	defer it.Close()
	for it.Seek(inboxKey(sona, tier, from)); it.Valid() && (fill != nil || limit == 0 || len(out) < limit); it.Next() {
		w := &messages.TierWork{}
		err := it.Item().Value(func(v []byte) error {
			if fill != nil {
				v = slices.Clone(v)
				fill.raws = append(fill.raws, v)
			}
			return proto.Unmarshal(v, w)
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %s inbox of %s: %v", base.ErrCorrupt, tier, sona, err)
		}
		if fill != nil {
			fill.seqs = append(fill.seqs, w.Seq)
		}
		if limit == 0 || len(out) < limit {
			out = append(out, w)
		}
	}
	if len(out) > 0 {
		s.starts.seen(sona, tier, out[0].Seq)
	}
	if fill != nil {
		s.inboxes.Fill(string(prefix), fill, txn)
	}
	return out, nil
}

// inboxTail lists the newest n entries of a tier's inbox, oldest first:
// what a retrieval shows of the STM's pages still on their way in. A
// sona advanced faster than its STM steps (each a commit; with a model
// of their own, its call) gathers thousands of them, and every retrieval
// decoded them all to keep the last few — at two sonas under 64 clients,
// a sixth of the CPU after two minutes, an advance's CPU growing with the
// backlog (issue 15, stop 102). Cached, only those n are decoded; else
// the whole inbox is read (and cached, in a view).
func (s *Store) inboxTail(txn store.Reader, sona, tier string, n int) ([]*messages.TierWork, error) {
	if in, ok := s.cachedInboxOf(txn, sona, tier); ok {
		return decodeWorks(sona, tier, in.raws[max(0, len(in.raws)-n):])
	}
	ws, err := s.inbox(txn, sona, tier, 0)
	if err != nil {
		return nil, err
	}
	return ws[max(0, len(ws)-n):], nil
}

// inboxStart remembers, per sona and tier, the first entry an inbox was
// seen to hold: every entry before it is consumed, for good — entries are
// numbered in the order they are written (nextCounter) and consumed
// oldest first, and one that is changed is written again under a new
// number. Lost with the process: a first read scans from the start.
type inboxStart struct {
	mu    sync.Mutex
	first map[string]uint64 // sona 0x00 tier → seq
}

func (s *inboxStart) get(sona, tier string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first[sona+"\x00"+tier]
}

// seen records that seq was the first entry of the inbox in a read.
func (s *inboxStart) seen(sona, tier string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := sona + "\x00" + tier
	if s.first == nil {
		s.first = map[string]uint64{}
	}
	s.first[k] = max(s.first[k], seq)
}

// segments reads the MTM segment headers of a sona, oldest first, each
// with its visits (visitKey) when they were recorded apart.
func segments(txn store.Reader, sona string) ([]*Segment, error) {
	var out []*Segment
	err := store.Scan(txn, segmentPrefix(sona), func(_, v []byte) error {
		rec := &messages.Segment{}
		if err := proto.Unmarshal(v, rec); err != nil {
			return fmt.Errorf("%w: segment of %s: %v", base.ErrCorrupt, sona, err)
		}
		seg, err := SegmentOf(rec)
		if err != nil {
			return fmt.Errorf("segment of %s: %w", sona, err) // corrupt
		}
		out = append(out, seg)
		return nil
	})
	if err != nil {
		return nil, err
	}
	prefix := visitPrefix(sona)
	err = store.Scan(txn, prefix, func(k, v []byte) error {
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("%w: visit record key %q of %s", base.ErrCorrupt, k, sona)
		}
		id := binary.BigEndian.Uint64(k[len(prefix):])
		if i, ok := slices.BinarySearchFunc(out, id, bySegmentID); ok {
			if err := out[i].addVisits(v); err != nil {
				return fmt.Errorf("%w: visits of segment %d of %s: %v", base.ErrCorrupt, id, sona, err)
			}
		}
		return nil
	})
	return out, err
}

// bySegmentID orders segments (as their keys do) for a binary search.
func bySegmentID(s *Segment, id uint64) int { return cmp.Compare(s.ID, id) }

// setPage writes mid-term page p at key with its embedding packed
// (PackEmbedding), and leaves p as it was.
func setPage(tx store.Tx, key []byte, p *messages.Page) error {
	emb := p.Embedding
	p.Embedding, p.Embedding8 = nil, PackEmbedding(emb)
	err := store.SetProto(tx, key, p)
	p.Embedding, p.Embedding8 = emb, nil
	return err
}

// segmentPages reads the pages of one segment, oldest first, their
// embeddings unpacked.
func segmentPages(txn store.Reader, sona string, seg uint64) ([]*messages.Page, error) {
	var out []*messages.Page
	err := store.Scan(txn, PagePrefix(sona, seg), func(_, v []byte) error {
		p, err := decodePage(v, sona)
		if err == nil {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

// readPage reads page seq of segment seg of sona, its embedding unpacked.
func readPage(txn store.Reader, sona string, seg, seq uint64) (*messages.Page, error) {
	v, err := txn.Get(pageKey(sona, seg, seq))
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("%w: page %d of segment %d of %s is missing", base.ErrCorrupt, seq, seg, sona)
	}
	if err != nil {
		return nil, err
	}
	return decodePage(v, sona)
}

// decodePage decodes a page record of sona, its embedding unpacked.
func decodePage(v []byte, sona string) (*messages.Page, error) {
	p := &messages.Page{}
	if err := proto.Unmarshal(v, p); err != nil {
		return nil, fmt.Errorf("%w: page of %s: %v", base.ErrCorrupt, sona, err)
	}
	if len(p.Embedding8) > 0 {
		emb, err := UnpackEmbedding(p.Embedding8)
		if err != nil {
			return nil, fmt.Errorf("page %d of %s: %w", p.Seq, sona, err) // corrupt
		}
		if len(p.Embedding) == 0 {
			p.Embedding = emb
		}
		p.Embedding8 = nil
	}
	return p, nil
}

// consume checks, inside an op, that the inbox entry w is still there and
// deletes it: a step that lost a race changes nothing.
func consume(tx store.Tx, sona, tier string, w *messages.TierWork) error {
	key := inboxKey(sona, tier, w.Seq)
	ok, err := tx.Has(key)
	if err != nil {
		return err
	}
	if !ok {
		return errConflict
	}
	tx.Delete(key)
	return nil
}

// Step processes the oldest entry of one tier's inbox of sona with model
// (the STM's and the MTM's oldest entries: stepSTM, stepMTM), durably, as
// the tier's actor does:
// when no entry was left behind, its write waits for a group commit to
// share (store.Committer.UpdateDeferred).
// A tier's steps must not run concurrently with each other (its actor
// runs them one at a time); if they do, one of them retries.
func (s *Store) Step(ctx context.Context, sona, tier string, model Model) (Step, error) {
	return s.step(ctx, sona, tier, model, true)
}

// step runs one step of tier; in the background (Step), its write shares
// a later group commit unless more work waits (commit).
func (s *Store) step(ctx context.Context, sona, tier string, model Model, background bool) (Step, error) {
	step := map[string]func(context.Context, string, Model, bool) (Step, error){
		STM: s.stepSTM, MTM: s.stepMTM, LPM: s.stepLPM,
	}[tier]
	if step == nil {
		return Step{}, fmt.Errorf("%w: no tier %q", base.ErrInvalid, tier)
	}
	return retryConflicts(func() (Step, error) { return step(ctx, sona, model, background) })
}

// retryConflicts runs a tier step again while another worker's commit got
// in its way. A conflict always means that the other worker made progress,
// so after a few attempts it reports progress and lets the caller go on.
func retryConflicts(step func() (Step, error)) (Step, error) {
	for range 3 {
		res, err := step()
		if !errors.Is(err, errConflict) {
			return res, err
		}
	}
	return Step{Done: true, More: true}, nil
}

// Settle runs the steps of every tier of sona until no work is left, each
// committed at once: its caller waits for them all.
func (s *Store) Settle(ctx context.Context, sona string, model Model) ([]Event, error) {
	var events []Event
	for {
		progress := false
		for _, tier := range Names {
			for {
				res, err := s.step(ctx, sona, tier, model, false)
				if err != nil {
					return events, err
				}
				if !res.Done {
					break
				}
				progress = true
				events = append(events, res.Events...)
			}
		}
		if !progress {
			return events, nil
		}
	}
}

// oldestWork returns the first entry of a tier's inbox, or nil, and
// whether another follows it.
func (s *Store) oldestWork(txn store.Reader, sona, tier string) (_ *messages.TierWork, more bool, err error) {
	ws, err := s.inbox(txn, sona, tier, 2)
	if err != nil || len(ws) == 0 {
		return nil, false, err
	}
	return ws[0], len(ws) > 1, nil
}

// Pending lists the tiers of sona whose inboxes hold work, in one read:
// what a sona's tiers look at when it is activated.
func (s *Store) Pending(sona string) ([]string, error) {
	var out []string
	err := s.view.View(func(txn store.Reader) error {
		it := txn.NewIterator(store.IterOptions{Prefix: base.Join(tierPrefix(sona), []byte("i"))})
		defer it.Close()
		for _, tier := range Names {
			it.Seek(inboxKey(sona, tier, s.starts.get(sona, tier)))
			if it.Valid() && bytes.HasPrefix(it.Item().Key(), inboxPrefix(sona, tier)) {
				out = append(out, tier)
			}
		}
		return nil
	})
	return out, err
}

// pageText loads the texts of a page's memories.
func (s *Store) pageText(txn store.Reader, p *messages.Page) (PageText, error) {
	pt := PageText{Page: p}
	load := func(ref string) (*model.Memory, error) {
		c, err := cid.Decode(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: page %d memory %q: %v", base.ErrCorrupt, p.Seq, ref, err)
		}
		return s.env.Memory(txn, c)
	}
	q, err := load(p.Q)
	if err != nil {
		return pt, err
	}
	r, err := load(p.R)
	if err != nil {
		return pt, err
	}
	pt.QName, pt.Q = model.Speaker(q), model.Said(q)
	pt.RName, pt.R = model.Speaker(r), model.Said(r)
	if self := r.Data.Self; self != nil {
		pt.RSelf = true
		pt.RQuotes = slices.ContainsFunc(self.Parts, func(p model.Part) bool { return p.Model != nil && *p.Model == llm.OfflineModel })
	}
	return pt, nil
}

// pageVector is the embedding of a page from its memories' embeddings:
// from the vector index, or from the store when the index has not caught
// up with the commit that queued the page yet.
func (s *Store) pageVector(p *messages.Page) ([]float32, error) {
	var vecs [2][]float32
	for i, ref := range []string{p.Q, p.R} {
		c, err := cid.Decode(ref)
		if err != nil {
			return nil, fmt.Errorf("%w: page %d memory %q: %v", base.ErrCorrupt, p.Seq, ref, err)
		}
		v, err := s.env.Vector(c)
		if err != nil {
			return nil, fmt.Errorf("%w: page %d: %v", base.ErrCorrupt, p.Seq, err)
		}
		vecs[i] = v
	}
	return PageVector(vecs[0], vecs[1]), nil
}

// stmState reads sona's STM state in r with its pages, oldest first (an
// empty state when there is none): the pages are records of their own
// (stmPageKey, listed by the state's PageSeqs, which stays as read), or
// inline in a state an older build wrote. Every record is read through
// the cache of tier records — but a view may read there a record older
// than its snapshot (a commit's writes reach the cache just after its
// snapshot is offered), so that the state it reads lists a page its
// snapshot no longer holds, or the other way round: it then reads them
// all past the cache, from its snapshot, which holds the state and its
// pages as one commit left them.
func (s *Store) stmState(r store.Reader, sona string) (*messages.StmState, error) {
	st, missing, err := readSTM(r, s.recs, sona)
	if _, op := r.(store.Tx); missing != 0 && err == nil && !op {
		st, missing, err = readSTM(r, nil, sona)
	}
	if err == nil && missing != 0 {
		err = fmt.Errorf("%w: STM page %d of sona %s is missing", base.ErrCorrupt, missing, sona)
	}
	return st, err
}

// readSTM reads sona's STM state in r through recs (nil: past the
// cache), and the seq of the first page it lists that r does not hold (0:
// none).
func readSTM(r store.Reader, recs *store.Records, sona string) (*messages.StmState, uint64, error) {
	st := &messages.StmState{}
	if _, err := recs.GetProto(r, stmKey(sona), st); err != nil {
		return nil, 0, err
	}
	for _, seq := range st.PageSeqs {
		p := &messages.Page{}
		ok, err := recs.GetProto(r, stmPageKey(sona, seq), p)
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return st, seq, nil
		}
		st.Pages = append(st.Pages, p)
	}
	return st, 0, nil
}

// putSTM writes next as sona's STM state over old (as stmState read it in
// tx): the state with its pages' seqs, the pages it adds or changes, and
// the deletion of those it no longer holds — every page when old held
// them inline.
func (s *Store) putSTM(tx store.Tx, sona string, old, next *messages.StmState) error {
	had := map[uint64]*messages.Page{}
	if len(old.PageSeqs) > 0 || len(old.Pages) == 0 {
		for _, p := range old.Pages {
			had[p.Seq] = p
		}
	} else {
		for _, p := range old.Pages {
			had[p.Seq] = nil // inline: its record is to be written
		}
	}
	head := &messages.StmState{Version: next.Version, SimN: next.SimN, SimMean: next.SimMean, SimM2: next.SimM2}
	for _, p := range next.Pages {
		head.PageSeqs = append(head.PageSeqs, p.Seq)
		if prev, ok := had[p.Seq]; !ok || prev == nil || !proto.Equal(prev, p) {
			if err := store.SetProto(tx, stmPageKey(sona, p.Seq), p); err != nil {
				return err
			}
		}
		delete(had, p.Seq)
	}
	for seq, p := range had {
		if p != nil {
			tx.Delete(stmPageKey(sona, seq))
		}
	}
	return store.SetProto(tx, stmKey(sona), head)
}

// tierBatch is how many pages of its inbox an STM or MTM step takes at
// most, and tierBatchFor how long it goes on taking more (the first page
// is always taken): a step is a commit, waited for before the next, and a
// sona advanced faster than one step a commit gathered its pages in the
// inbox — at two sonas under 64 clients, ~6,000 a sona in the STM's after
// two minutes, then ~9,000 in the MTM's (issue 15, stops 102 and 103). A
// tier model that calls a provider takes longer than tierBatchFor a page,
// so its steps take one page each, as before.
const (
	tierBatch    = 32
	tierBatchFor = 50 * time.Millisecond
)

// inboxPages reads the oldest entries of tier's inbox of sona, up to a
// step's batch, with the texts of their pages, and whether more wait.
func (s *Store) inboxPages(txn store.Reader, sona, tier string) (ws []*messages.TierWork, pts []PageText, more bool, err error) {
	if ws, err = s.inbox(txn, sona, tier, s.batch+1); err != nil || len(ws) == 0 {
		return nil, nil, false, err
	}
	if more = len(ws) > s.batch; more {
		ws = ws[:s.batch]
	}
	for _, w := range ws {
		if w.GetPage() == nil {
			return nil, nil, false, fmt.Errorf("%w: %s inbox entry %d holds no page", base.ErrCorrupt, strings.ToUpper(tier), w.Seq)
		}
		pt, err := s.pageText(txn, w.GetPage())
		if err != nil {
			return nil, nil, false, err
		}
		pts = append(pts, pt)
	}
	return ws, pts, more, nil
}

// stepSTM moves the oldest pages of sona's STM inbox into the STM, each
// linked into the meta chain by model as the one after the page before,
// in one commit: the pages past the STM's capacity go on to the MTM's
// inbox. A step that took several pages and failed on one commits those
// before it; the next step meets the failure with that page first.
func (s *Store) stepSTM(ctx context.Context, sona string, model Model, background bool) (Step, error) {
	var (
		ws   []*messages.TierWork
		more bool
		stm  = &messages.StmState{}
		prev []PageText // the texts of the STM's pages, as the step moves them
		pts  []PageText // of ws's pages
	)
	err := s.view.View(func(txn store.Reader) error {
		var err error
		if ws, pts, more, err = s.inboxPages(txn, sona, STM); err != nil || len(ws) == 0 {
			return err
		}
		if stm, err = s.stmState(txn, sona); err != nil {
			return err
		}
		for _, p := range stm.Pages {
			t, err := s.pageText(txn, p)
			if err != nil {
				return err
			}
			prev = append(prev, t)
		}
		return nil
	})
	if err != nil || len(ws) == 0 {
		return Step{}, err
	}
	next := proto.Clone(stm).(*messages.StmState)
	stats := assoc.SimStats{N: int64(stm.SimN), Mean: stm.SimMean, M2: stm.SimM2}
	res := Step{Done: true}
	var moved []*messages.Page
	start := s.clock.Now()
	taken := 0
	for i, w := range ws {
		if i > 0 && s.clock.Since(start) >= tierBatchFor {
			break
		}
		out, err := s.pushSTM(ctx, next, &stats, prev, w.GetPage(), pts[i], model)
		if err != nil {
			if i == 0 {
				return Step{}, err
			}
			break
		}
		taken++
		prev = append(prev[len(out):], pts[i])
		moved = append(moved, out...)
		res.Events = append(res.Events, Event{Sona: sona, Kind: PageAdded, Page: w.GetPage().Seq})
		for _, p := range out {
			res.Events = append(res.Events, Event{Sona: sona, Kind: PageMoved, Page: p.Seq})
		}
	}
	if taken < len(ws) {
		ws, more = ws[:taken], true
	}
	// The state and the MTM inbox keep no page embeddings: they are the
	// normalised sum of the page's two memory vectors, which the index
	// holds (pageVector), and were most of the state, written whole on
	// every step. The segments keep theirs (their ranking reads them).
	for _, p := range next.Pages {
		p.Embedding = nil
	}
	for _, p := range moved {
		p.Embedding = nil
	}
	next.SimN, next.SimMean, next.SimM2 = uint64(stats.N), stats.Mean, stats.M2
	next.Version++
	err = s.commit(ctx, background && !more, func(tx store.Tx) error {
		// The state's version alone: every change of the STM moves it, so
		// at stm's version its pages are those the view read.
		cur := &messages.StmState{}
		if _, err := s.getProto(tx, stmKey(sona), cur); err != nil {
			return err
		}
		if cur.Version != stm.Version {
			return errConflict
		}
		for _, w := range ws {
			if err := consume(tx, sona, STM, w); err != nil {
				return err
			}
		}
		for _, p := range moved {
			if err := s.enqueueTier(tx, sona, MTM, &messages.TierWork{Work: &messages.TierWork_Page{Page: p}}); err != nil {
				return err
			}
		}
		return s.putSTM(tx, sona, stm, next)
	})
	if err != nil {
		return Step{}, err
	}
	res.More = more
	if len(moved) > 0 {
		res.Wake = []string{MTM}
	}
	return res, nil
}

// pushSTM links page (its text pt) into the meta chain after the last of
// next's pages, whose texts are prev, and pushes it onto next, updating
// the similarity statistics of successive pages: it returns the pages
// pushed past the STM's capacity.
func (s *Store) pushSTM(ctx context.Context, next *messages.StmState, stats *assoc.SimStats, prev []PageText, page *messages.Page, pt PageText, model Model) ([]*messages.Page, error) {
	var err error
	if page.Embedding, err = s.pageVector(page); err != nil {
		return nil, err
	}
	var sim float64
	if len(next.Pages) > 0 {
		last := next.Pages[len(next.Pages)-1]
		vec := last.Embedding // a page of this step, or of a state written before embeddings were left out
		if len(vec) == 0 {
			if vec, err = s.pageVector(last); err != nil {
				return nil, err
			}
		}
		sim = base.Cosine(vec, page.Embedding)
	}
	th := assoc.EmergentThreshold(s.cfg.Thresholds, s.cfg.Thresholds.RetrievalBeta, *stats, stats.N)
	if page.MetaChain, err = model.Chain(ctx, ChainInput{Prev: prev, Page: pt, Similarity: sim, Threshold: th.Value}); err != nil {
		return nil, err
	}
	if len(next.Pages) > 0 {
		stats.Add(sim)
	}
	return PushSTM(next, page, s.cfg.Tiers.STMPages), nil
}

// mtmChange is what one MTM step or visit writes.
type mtmChange struct {
	state    *messages.MtmState
	base     uint64                // the version it was computed on
	changed  []*Segment            // headers to write, one copy of each
	visited  []*Segment            // visits to write (visitKey), apart from the headers
	pages    []segmentPage         // new pages, each with its segment
	terms    map[string]uint64     // document frequencies to count up, by how many pages
	evicted  []uint64              // segments to delete with their pages
	promoted []*messages.Promotion // to hand to the LPM
}

// segmentPage is a page new in segment seg.
type segmentPage struct {
	seg  uint64
	page *messages.Page
}

// change notes seg's header to be written, in place of a copy noted before.
func (c *mtmChange) change(seg *Segment) {
	if i := slices.IndexFunc(c.changed, func(o *Segment) bool { return o.ID == seg.ID }); i >= 0 {
		c.changed[i] = seg
	} else {
		c.changed = append(c.changed, seg)
	}
}

// commit runs a step's write; lazy (a tier actor's step, no more work in
// its inbox, whose next step would wait for it): with a later group
// commit (store.Committer.UpdateDeferred). Settle's steps are not lazy:
// their caller waits for all of them.
func (s *Store) commit(ctx context.Context, lazy bool, op store.Op) error {
	if lazy {
		return s.store.UpdateDeferred(ctx, op)
	}
	return s.store.Update(ctx, op)
}

// commitMTM writes an MTM change if the MTM is still at its base version,
// consuming ws in the same transaction (lazy: commit).
func (s *Store) commitMTM(ctx context.Context, sona string, ws []*messages.TierWork, lazy bool, c *mtmChange) error {
	return s.commit(ctx, lazy, func(tx store.Tx) error {
		cur := &messages.MtmState{}
		if _, err := s.getProto(tx, mtmKey(sona), cur); err != nil {
			return err
		}
		if cur.Version != c.base {
			return errConflict
		}
		for _, w := range ws {
			if err := consume(tx, sona, MTM, w); err != nil {
				return err
			}
		}
		for _, seg := range c.changed {
			if slices.Contains(c.evicted, seg.ID) {
				continue
			}
			if err := store.SetProto(tx, segmentKey(sona, seg.ID), seg.Record()); err != nil {
				return err
			}
		}
		for _, seg := range c.visited {
			if !slices.Contains(c.evicted, seg.ID) {
				tx.Set(visitKey(sona, seg.ID), seg.visits())
			}
		}
		for _, p := range c.pages {
			if slices.Contains(c.evicted, p.seg) {
				continue
			}
			if err := setPage(tx, pageKey(sona, p.seg, p.page.Seq), p.page); err != nil {
				return err
			}
		}
		for term, k := range c.terms {
			key := dfKey(sona, term)
			n, err := s.docFreq(tx, key)
			if err != nil {
				return err
			}
			tx.Set(key, base.U64(n+k))
		}
		for _, id := range c.evicted {
			tx.Delete(segmentKey(sona, id))
			tx.Delete(visitKey(sona, id))
			var keys [][]byte
			if err := store.Keys(tx, PagePrefix(sona, id), func(k []byte) { keys = append(keys, slices.Clone(k)) }); err != nil {
				return err
			}
			for _, k := range keys {
				tx.Delete(k)
			}
		}
		for _, p := range c.promoted {
			if err := s.enqueueTier(tx, sona, LPM, &messages.TierWork{Work: &messages.TierWork_Promotion{Promotion: p}}); err != nil {
				return err
			}
		}
		return store.SetProto(tx, mtmKey(sona), c.state)
	})
}

// promote finds the promotable segments of segs at now, marks them
// promoted and returns their promotions; pages lists a segment's pages
// (stored and new).
func (s *Store) promote(segs []*Segment, now int64, pages func(*Segment) ([]*messages.Page, error)) ([]*Segment, []*messages.Promotion, error) {
	var changed []*Segment
	var out []*messages.Promotion
	for _, i := range Promotable(segs, now, s.cfg.Tiers) {
		seg := segs[i].clone() // segs' may be shared (segmentCache)
		segs[i] = seg
		ps, err := pages(seg)
		if err != nil {
			return nil, nil, err
		}
		promo := &messages.Promotion{Segment: seg.ID, Summary: seg.Summary, Keywords: slices.Clone(seg.Keywords)}
		through := seg.PromotedThrough
		for _, p := range ps {
			if p.Seq > seg.PromotedThrough {
				promo.Pages = append(promo.Pages, &messages.Page{Seq: p.Seq, Q: p.Q, R: p.R, T: p.T})
				through = max(through, p.Seq)
			}
		}
		Promote(seg, through)
		changed = append(changed, seg)
		out = append(out, promo)
	}
	return changed, out, nil
}

// stepMTM places the oldest pages of sona's MTM inbox into its segments,
// each as a step of its own would (weighed by the document frequencies
// that the pages before it counted up, placed among the segments as they
// left them, the coldest evicted past capacity, the segments hot enough
// promoted), in one commit. A page the model failed ends the step: the
// pages before it are committed; the next step meets it first.
func (s *Store) stepMTM(ctx context.Context, sona string, model Model, background bool) (Step, error) {
	var (
		ws    []*messages.TierWork
		more  bool
		state = &messages.MtmState{}
		segs  []*Segment
		pts   []PageText
		terms [][]string // each page's distinct terms
		df    = map[string]uint64{}
	)
	gen := s.segs.begin(sona)
	err := s.view.View(func(txn store.Reader) error {
		var err error
		if ws, pts, more, err = s.inboxPages(txn, sona, MTM); err != nil || len(ws) == 0 {
			return err
		}
		if _, err := s.getProto(txn, mtmKey(sona), state); err != nil {
			return err
		}
		if segs, err = s.readSegments(txn, sona, gen); err != nil {
			return err
		}
		for _, pt := range pts {
			terms = append(terms, ContentWords(pt.Text()))
			if state.Pages == 0 {
				continue // the first mid-term pages: every count is 0, nothing to read
			}
			for _, t := range terms[len(terms)-1] {
				if _, ok := df[t]; ok {
					continue
				}
				if df[t], err = s.docFreq(txn, dfKey(sona, t)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil || len(ws) == 0 {
		return Step{}, err
	}
	c := &mtmChange{state: proto.Clone(state).(*messages.MtmState), base: state.Version, terms: map[string]uint64{}}
	res := Step{Done: true}
	segs = slices.Clone(segs) // shared with the cache: changed below, each segment cloned first
	start := s.clock.Now()
	taken := 0
	for i, w := range ws {
		if i > 0 && s.clock.Since(start) >= tierBatchFor {
			break
		}
		next, placed, err := s.placeMTM(ctx, c, &res, sona, segs, w.GetPage(), pts[i], terms[i], df, model)
		if err != nil {
			if i == 0 || placed {
				return Step{}, err
			}
			break // this page could not be placed: the pages before it are committed
		}
		segs = next
		taken++
	}
	if taken < len(ws) {
		ws, more = ws[:taken], true
	}
	c.state.Version++
	if err := s.commitMTM(ctx, sona, ws, background && !more, c); err != nil {
		return Step{}, err
	}
	res.More = more
	return res, nil
}

// placeMTM places page (its text pt, its distinct terms) among segs,
// which it returns as they are after it, and adds what that changes to c
// and res, the terms counted up in df. When the page could not be placed
// (the model failed, or its vector could not be read), placed is false
// and c, res, segs and df are as they were; a failure after it was placed
// (reading a promoted segment's pages) leaves them changed.
func (s *Store) placeMTM(ctx context.Context, c *mtmChange, res *Step, sona string, segs []*Segment, page *messages.Page, pt PageText, terms []string, df map[string]uint64, model Model) (_ []*Segment, placed bool, _ error) {
	page = proto.Clone(page).(*messages.Page)
	if len(page.Embedding) == 0 {
		var err error
		if page.Embedding, err = s.pageVector(page); err != nil {
			return nil, false, err
		}
	}
	weights, err := model.PageKeywords(ctx, KeywordInput{Page: pt, DF: func(t string) uint64 { return df[t] }, N: c.state.Pages})
	if err != nil {
		return nil, false, err
	}
	page.Keywords = Terms(weights)
	now := s.clock.Now().Unix()
	p := s.cfg.Tiers
	i, _ := Place(segs, page.Embedding, page.Keywords, p.Theta)
	var seg *Segment
	if i >= 0 {
		seg = segs[i].clone() // segs' may be shared (segmentCache)
		Join(seg, page, weights)
	} else {
		seg = NewSegment(c.state.NextSegment+1, page, weights, now)
	}
	summary, keywords, err := model.Digest(ctx, DigestInput{Segment: seg, Page: pt})
	if err != nil {
		return nil, false, err
	}
	// The page is placed: what follows changes c, res, segs and df.
	if i >= 0 {
		segs[i] = seg
		res.Events = append(res.Events, Event{Sona: sona, Kind: SegmentMerged, Segment: seg.ID, Page: page.Seq})
	} else {
		c.state.NextSegment++
		segs = append(segs, seg)
		res.Events = append(res.Events, Event{Sona: sona, Kind: SegmentCreated, Segment: seg.ID, Page: page.Seq})
	}
	seg.Summary = summary
	if keywords != nil {
		seg.Keywords = NormalizeKeywords(keywords)
	}
	c.change(seg)
	c.pages = append(c.pages, segmentPage{seg: seg.ID, page: page})
	for _, t := range terms {
		df[t]++
		c.terms[t]++
	}
	c.state.Pages++
	for len(segs) > p.MTMSegments {
		i := Coldest(segs, now, p)
		c.evicted = append(c.evicted, segs[i].ID)
		res.Events = append(res.Events, Event{Sona: sona, Kind: SegmentEvicted, Segment: segs[i].ID})
		segs = slices.Delete(segs, i, i+1)
	}
	return segs, true, s.promoteInto(c, res, sona, segs, now)
}

// promoteInto adds the promotions of segs at now to c and res. The pages
// of c not yet stored count among their segments'.
func (s *Store) promoteInto(c *mtmChange, res *Step, sona string, segs []*Segment, now int64) error {
	changed, promos, err := s.promote(segs, now, func(seg *Segment) ([]*messages.Page, error) {
		var ps []*messages.Page
		err := s.view.View(func(txn store.Reader) error {
			var err error
			ps, err = segmentPages(txn, sona, seg.ID)
			return err
		})
		for _, p := range c.pages {
			if p.seg == seg.ID {
				ps = append(ps, p.page)
			}
		}
		return ps, err
	})
	if err != nil {
		return err
	}
	for _, seg := range changed {
		c.change(seg) // promote changed a copy: it replaces one changed before it
		res.Events = append(res.Events, Event{Sona: sona, Kind: SegmentPromoted, Segment: seg.ID})
	}
	c.promoted = append(c.promoted, promos...)
	if len(promos) > 0 && !slices.Contains(res.Wake, LPM) {
		res.Wake = append(res.Wake, LPM)
	}
	return nil
}

// VisitSegments records that retrieval selected the segments ids of sona
// at unix time at (their N_visit and last access move), then promotes
// every segment hot enough. With no ids it only evaluates heat. It must
// run in step with the MTM's steps (the mtm actor runs both).
func (s *Store) VisitSegments(ctx context.Context, sona string, ids []uint64, at int64) (Step, error) {
	return s.RecordVisits(ctx, sona, []Visits{{IDs: ids, At: at}})
}

// Visits are the segments one retrieval selected, at unix time At.
type Visits struct {
	IDs []uint64
	At  int64
}

// RecordVisits records several retrievals' visits in one commit, in
// order, as VisitSegments one after the other would, but for the
// promotions, evaluated once, after the last. The mtm actor records the
// visits waiting so: a retrieval of every advance asks for one, and a sona
// advanced faster than one commit a visit (each deferred, to share a
// group commit) kept its MTM recording visits, its inbox's pages never
// taken — at two sonas under 64 clients, ~100 of ~12,700 pages a sona in
// two minutes (issue 15, stop 102).
func (s *Store) RecordVisits(ctx context.Context, sona string, vs []Visits) (Step, error) {
	return retryConflicts(func() (Step, error) { return s.visitSegments(ctx, sona, vs) })
}

func (s *Store) visitSegments(ctx context.Context, sona string, vs []Visits) (Step, error) {
	state := &messages.MtmState{}
	var segs []*Segment
	gen := s.segs.begin(sona)
	err := s.view.View(func(txn store.Reader) error {
		if _, err := s.getProto(txn, mtmKey(sona), state); err != nil {
			return err
		}
		var err error
		segs, err = s.readSegments(txn, sona, gen)
		return err
	})
	if err != nil {
		return Step{}, err
	}
	c := &mtmChange{state: proto.Clone(state).(*messages.MtmState), base: state.Version}
	var res Step
	segs = slices.Clone(segs) // shared with the cache: each segment changed is cloned
	cloned := map[uint64]bool{}
	at := s.clock.Now().Unix()
	for _, v := range vs {
		at = max(at, v.At)
		for i, seg := range segs {
			if !slices.Contains(v.IDs, seg.ID) {
				continue
			}
			if !cloned[seg.ID] {
				cloned[seg.ID] = true
				seg = seg.clone()
				segs[i] = seg
				c.visited = append(c.visited, seg)
			}
			Visit(seg, v.At)
			res.Events = append(res.Events, Event{Sona: sona, Kind: SegmentVisited, Segment: seg.ID})
		}
	}
	if err := s.promoteInto(c, &res, sona, segs, at); err != nil {
		return Step{}, err
	}
	if len(c.changed) == 0 && len(c.visited) == 0 {
		return res, nil
	}
	c.state.Version++
	return res, s.commitMTM(ctx, sona, nil, true, c)
}

func (s *Store) stepLPM(ctx context.Context, sona string, model Model, background bool) (Step, error) {
	var (
		w       *messages.TierWork
		more    bool
		persona *Persona
		texts   []PageText
	)
	err := s.view.View(func(txn store.Reader) error {
		var err error
		if w, more, err = s.oldestWork(txn, sona, LPM); err != nil || w == nil {
			return err
		}
		if w.GetPromotion() == nil {
			return fmt.Errorf("%w: LPM inbox entry %d holds no promotion", base.ErrCorrupt, w.Seq)
		}
		if persona, err = s.readPersona(txn, sona); err != nil {
			return err
		}
		for _, p := range w.GetPromotion().Pages {
			t, err := s.pageText(txn, p)
			if err != nil {
				return err
			}
			texts = append(texts, t)
		}
		return nil
	})
	if err != nil || w == nil {
		return Step{}, err
	}
	promo := w.GetPromotion()
	upd, err := model.Persona(ctx, PersonaInput{Promotion: promo, Pages: texts, Persona: persona, Traits: s.traits})
	if err != nil {
		return Step{}, err
	}
	var stmts []*Statement
	for i := range upd.Facts {
		stmts = append(stmts, &upd.Facts[i])
	}
	for i := range upd.AgentTraits {
		stmts = append(stmts, &upd.AgentTraits[i])
	}
	if len(stmts) > 0 {
		texts := make([]string, len(stmts))
		for i, st := range stmts {
			texts[i] = st.Text
		}
		vecs, err := s.env.Embed(ctx, texts...)
		if err != nil {
			return Step{}, err
		}
		for i, st := range stmts {
			st.Embedding = vecs[i]
		}
	}
	next := persona.Clone()
	ApplyPersona(next, upd, s.cfg.Tiers, promo.Segment, s.clock.Now().Unix())
	err = s.commit(ctx, background && !more, func(tx store.Tx) error {
		cur := &messages.Persona{}
		if _, err := s.getProto(tx, personaKey(sona), cur); err != nil {
			return err
		}
		if cur.Updates != persona.Updates {
			return errConflict
		}
		if err := consume(tx, sona, LPM, w); err != nil {
			return err
		}
		return store.SetProto(tx, personaKey(sona), next.Record())
	})
	if err != nil {
		return Step{}, err
	}
	return Step{Done: true, More: more, Events: []Event{{Sona: sona, Kind: PersonaUpdated, Segment: promo.Segment}}}, nil
}

// KeyPrefix is the tiers' key space: t/<sona uuid>\x00… (see package
// memory's doc for its layout).
var KeyPrefix = []byte("t/")

// Env is what the tiers' storage needs of the rest of memory/.
type Env interface {
	// Memory loads the memory c (through the decoded-memory cache).
	Memory(r store.Reader, c cid.Cid) (*model.Memory, error)
	// Vector is the embedding of memory c: from the vector index, or
	// from the store when the index has not caught up yet.
	Vector(c cid.Cid) ([]float32, error)
	// Embed embeds texts in the store's embedding space (unit length).
	Embed(ctx context.Context, texts ...string) ([][]float32, error)
	// Sonas are the sonas memory c belongs to, read through r;
	// base.ErrNotFound when c is not stored.
	Sonas(r store.Reader, c cid.Cid) ([]string, error)
	// CheckSona fails (base.ErrNotFound) unless sona exists.
	CheckSona(sona string) error
}

// Options configure a Store.
type Options struct {
	Tiers      config.Tiers
	Thresholds config.Thresholds
	Clock      clock.Clock
}

// Store keeps the MemoryOS tiers of every sona in the store: their
// durable inboxes, the steps that move work through them, retrieval and
// the display view.
type Store struct {
	store    store.Committer
	view     store.Viewer
	env      Env
	cfg      Options
	traits   Traits // cfg.Tiers.Traits, their cues indexed
	clock    clock.Clock
	segs     *segmentCache
	dfs      *store.Cache[uint64]       // document frequencies by dfKey (dfcache.go)
	recs     *store.Records             // states, personas and counters (reccache.go)
	personas *personas                  // decoded from recs' records, for retrieval (reccache.go)
	inboxes  *store.Cache[*cachedInbox] // the tiers' inboxes, by inboxPrefix (reccache.go)
	starts   inboxStart
	batch    int // pages an STM or MTM step takes at most (tierBatch; tests set it)
}

// NewStore is the tiers' storage on st. When st reports its commits
// (store.Store), NewStore subscribes to them — call it before st's first
// write — and keeps the sonas' segments decoded (segmentCache) and their
// document frequencies read lately (docFreq).
func NewStore(st interface {
	store.Committer
	store.Viewer
}, env Env, o Options) *Store {
	s := &Store{store: st, view: st, env: env, cfg: o, traits: NewTraits(o.Tiers.Traits), clock: clock.Or(o.Clock), segs: newSegmentCache(), batch: tierBatch}
	if sub, ok := st.(interface{ Subscribe(func(store.Event)) }); ok {
		sub.Subscribe(s.segs.committed)
		s.dfs = store.NewCache[uint64](dfCacheSize)
		sub.Subscribe(s.dfCommitted)
		s.recs = store.NewRecords(recCacheSize, cachedTierRecord)
		s.personas = newPersonas()
		sub.Subscribe(s.personas.committed)
		sub.Subscribe(s.recs.Committed)
		s.inboxes = store.NewCache[*cachedInbox](inboxCacheSize)
		sub.Subscribe(s.inboxCommitted)
	} else {
		s.segs = nil
	}
	return s
}

// ContentWords are the distinct content words of a text (stemmed, stop
// words removed), in order of first appearance.
func ContentWords(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range llm.Tokenize(text) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}
