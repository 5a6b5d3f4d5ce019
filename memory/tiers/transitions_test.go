package tiers

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/messages"
)

// TestTransitionsGolden drives the pure tier transitions from
// testdata/transitions: pages enter the STM (PushSTM), a page the STM
// hands on joins the MTM segment with the best Fscore above θ or starts
// one (Place, Join, NewSegment), the coldest segment leaves a full MTM
// (Coldest) and hot segments are promoted (Promotable, Promote), in the
// order stepMTM applies them; visits heat a segment (Visit). The output
// is every decision with the figures it was made on.
// Regenerate with `go test ./memory/tiers -run TestTransitionsGolden -rewrite`.
func TestTransitionsGolden(t *testing.T) {
	testutil.Golden(t, "testdata/transitions", func(*testing.T) func(*testing.T, *datadriven.TestData) string {
		w := &world{p: params(), stm: &messages.StmState{}, pages: map[uint64][]uint64{}, next: 1}
		return w.run
	})
}

// world is the tiers of one sona as a test file leaves them.
type world struct {
	p     config.Tiers
	stm   *messages.StmState
	segs  []*Segment
	pages map[uint64][]uint64 // the pages of each segment, by id
	next  uint64              // the next segment id
}

func (w *world) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	switch d.Cmd {
	case "params":
		for _, a := range d.CmdArgs {
			v := w.num(t, d, a.Key)
			switch a.Key {
			case "stm":
				w.p.STMPages = int(v)
			case "mtm":
				w.p.MTMSegments = int(v)
			case "theta":
				w.p.Theta = v
			case "tau":
				w.p.Tau = v
			case "mu":
				w.p.Mu = config.Duration(time.Duration(v) * time.Second)
			default:
				d.Fatalf(t, "unknown param %s", a.Key)
			}
		}
		fmt.Fprintf(&out, "stm=%d mtm=%d θ=%g τ=%g α=%g β=%g γ=%g μ=%s\n", w.p.STMPages, w.p.MTMSegments, w.p.Theta, w.p.Tau,
			w.p.Alpha, w.p.Beta, w.p.Gamma, w.p.Mu.D())
	case "page":
		now := int64(w.num(t, d, "now"))
		var seq uint64
		d.ScanArgs(t, "seq", &seq)
		pg := page(seq, testutil.UnitVector(t, d, "vec"), keywords(d)...)
		pg.T = now
		for _, moved := range PushSTM(w.stm, pg, w.p.STMPages) {
			fmt.Fprintf(&out, "stm: page %d moves to the mtm\n", moved.Seq)
			w.place(&out, moved, now)
		}
		fmt.Fprintf(&out, "stm: %s\n", w.stmPages())
	case "visit":
		now := int64(w.num(t, d, "now"))
		var id uint64
		d.ScanArgs(t, "segment", &id)
		for _, s := range w.segs {
			if s.ID == id {
				Visit(s, now)
			}
		}
		w.promote(&out, now)
	case "heat":
		now := int64(w.num(t, d, "now"))
		for _, s := range w.segs {
			fmt.Fprintf(&out, "segment %d: heat %.4f (visits %d, interactions %d, last access %d)\n", s.ID, Heat(s, now, w.p), s.NVisit, s.LInteraction, s.LastAccess)
		}
		if i := Coldest(w.segs, now, w.p); i >= 0 {
			fmt.Fprintf(&out, "coldest: segment %d\n", w.segs[i].ID)
		}
	case "mtm":
		for _, s := range w.segs {
			fmt.Fprintf(&out, "segment %d: pages %d keywords %v promoted through %d (%d promotions) embedding %s\n",
				s.ID, s.PageCount, s.Keywords, s.PromotedThrough, s.Promotions, floats(s.Embedding))
		}
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return out.String()
}

// place puts a page the STM handed on into the MTM as stepMTM does:
// join or start a segment, evict the coldest beyond capacity, promote
// the hot ones.
func (w *world) place(out *strings.Builder, pg *messages.Page, now int64) {
	for _, s := range w.segs {
		fmt.Fprintf(out, "  F(page %d, segment %d) = %.4f\n", pg.Seq, s.ID, fscore(s, newFquery(pg.Embedding, pg.Keywords)))
	}
	ws := weights(pg.Keywords...)
	if i, f := Place(w.segs, pg.Embedding, pg.Keywords, w.p.Theta); i >= 0 {
		fmt.Fprintf(out, "  page %d joins segment %d (F %.4f > θ %g)\n", pg.Seq, w.segs[i].ID, f, w.p.Theta)
		Join(w.segs[i], pg, ws)
		w.pages[w.segs[i].ID] = append(w.pages[w.segs[i].ID], pg.Seq)
	} else {
		fmt.Fprintf(out, "  page %d starts segment %d (best F %.4f ≤ θ %g)\n", pg.Seq, w.next, f, w.p.Theta)
		w.segs = append(w.segs, NewSegment(w.next, pg, ws, now))
		w.pages[w.next] = []uint64{pg.Seq}
		w.next++
	}
	for len(w.segs) > w.p.MTMSegments {
		i := Coldest(w.segs, now, w.p)
		fmt.Fprintf(out, "  segment %d evicted (coldest: heat %.4f)\n", w.segs[i].ID, Heat(w.segs[i], now, w.p))
		w.segs = append(w.segs[:i], w.segs[i+1:]...)
	}
	w.promote(out, now)
}

func (w *world) promote(out *strings.Builder, now int64) {
	for _, i := range Promotable(w.segs, now, w.p) {
		s := w.segs[i]
		// As Store.promote: the pages after the last promotion go.
		var promoted []uint64
		for _, seq := range w.pages[s.ID] {
			if seq > s.PromotedThrough {
				promoted = append(promoted, seq)
			}
		}
		fmt.Fprintf(out, "  segment %d promoted (heat %.4f > τ %g, %d interactions): pages %v\n", s.ID, Heat(s, now, w.p), w.p.Tau, s.LInteraction, promoted)
		Promote(s, max(s.PromotedThrough, slices.Max(promoted)))
	}
}

func (w *world) stmPages() string {
	var seqs []string
	for _, p := range w.stm.Pages {
		seqs = append(seqs, strconv.FormatUint(p.Seq, 10))
	}
	return "[" + strings.Join(seqs, " ") + "]"
}

func (w *world) num(t *testing.T, d *datadriven.TestData, key string) float64 {
	var s string
	d.ScanArgs(t, key, &s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return v
}

func keywords(d *datadriven.TestData) []string {
	for _, a := range d.CmdArgs {
		if a.Key == "kw" {
			return a.Vals
		}
	}
	return nil
}

func floats(v []float32) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(float64(x), 'f', 3, 32)
	}
	return "[" + strings.Join(parts, " ") + "]"
}
