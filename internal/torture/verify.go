package torture

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"golang.org/x/sync/errgroup"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// checkWorkers is how many checks run at once.
const checkWorkers = 8

// chain is one sona's chain as walked: the memory of each seq.
type chain struct {
	memories []string       // by seq
	seqOf    map[string]int // memory CID → seq
}

// verify checks everything acknowledged so far against the server behind
// c. Losses and violations are counted in the report; the error is for a
// check that could not be made (the server went away).
func (t *run) verify(ctx context.Context, c *client.Client) error {
	inserts, chats := t.ledger.snapshot()
	chains := make(map[string]*chain, len(t.sonas))
	var mu sync.Mutex
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(checkWorkers)
	for _, s := range t.sonas {
		eg.Go(func() error {
			ch, err := t.walk(ectx, c, s)
			mu.Lock()
			chains[s] = ch
			mu.Unlock()
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	var acts int64
	for _, ch := range chains {
		acts += int64(len(ch.memories))
	}
	t.rep.ACTs = acts

	// Every acknowledged step is in its chain, where it was acknowledged.
	var cids []string
	for _, a := range inserts {
		cids = append(cids, a.cid)
		ch := chains[a.sona]
		seq, ok := ch.seqOf[a.cid]
		switch {
		case !ok:
			t.loss("insert %s into sona %s (seq %v) is not in its chain", a.cid, a.sona, deref(a.seq))
		case a.seq != nil && (*a.seq >= int64(len(ch.memories)) || ch.memories[*a.seq] != a.cid):
			t.loss("insert %s into sona %s was acknowledged at seq %d, the chain has it at %d", a.cid, a.sona, *a.seq, seq)
		}
	}
	for _, a := range chats {
		cids = append(cids, a.input, a.response)
		ch := chains[a.sona]
		in, okIn := ch.seqOf[a.input]
		out, okOut := ch.seqOf[a.response]
		switch {
		case !okIn || !okOut:
			t.loss("chat in sona %s: input %s (in chain: %v), response %s (in chain: %v)", a.sona, a.input, okIn, a.response, okOut)
		case out <= in:
			t.violation("chat in sona %s: response %s at seq %d, not after its input at %d", a.sona, a.response, out, in)
		}
	}

	// Every acknowledged memory is served, and its block verifies.
	eg, ectx = errgroup.WithContext(ctx)
	eg.SetLimit(checkWorkers)
	for _, id := range cids {
		eg.Go(func() error {
			if _, err := c.Memory(ectx, id); err != nil {
				if gone(err) {
					t.loss("acknowledged memory %s: %v", id, err)
					return nil
				}
				return err
			}
			return t.block(ectx, c, id, nil)
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}

	if err := t.indexes(ctx, c); err != nil {
		return err
	}
	return t.recalls(ctx, c, inserts)
}

// walk follows a sona's chain from its head to its genesis: each ACT's
// block must hash to its CID, name the sona and count down by one to 0,
// where it has no prev; the walk must take exactly the sona's length.
func (t *run) walk(ctx context.Context, c *client.Client, sona string) (*chain, error) {
	ch := &chain{seqOf: map[string]int{}}
	rec, err := c.Sona(ctx, sona)
	if err != nil {
		if gone(err) {
			t.loss("sona %s: %v", sona, err)
			return ch, nil
		}
		return ch, err
	}
	ch.memories = make([]string, rec.Length)
	next := rec.GetHead()
	for want := rec.Length - 1; want >= 0; want-- {
		if next == "" {
			t.violation("sona %s: the chain ends at seq %d, its length is %d", sona, want+1, rec.Length)
			return ch, nil
		}
		var act *model.Act
		if err := t.block(ctx, c, next, func(b []byte) error {
			a, err := model.DecodeAct(b)
			act = a
			return err
		}); err != nil {
			return ch, err
		}
		if act == nil {
			return ch, nil // counted by block
		}
		switch {
		case act.Sona != sona:
			t.violation("ACT %s at seq %d of sona %s names sona %s", next, want, sona, act.Sona)
		case act.Seq != want:
			t.violation("ACT %s of sona %s has seq %d where %d was due", next, sona, act.Seq, want)
		case (want == 0) != (act.Prev == nil):
			t.violation("ACT %s of sona %s at seq %d: prev %v", next, sona, want, act.Prev)
		}
		m := act.Memory.String()
		ch.memories[want] = m
		if _, dup := ch.seqOf[m]; !dup {
			ch.seqOf[m] = int(want)
		}
		next = ""
		if act.Prev != nil {
			next = act.Prev.String()
		}
	}
	if next != "" {
		t.violation("sona %s: the chain goes on past seq 0 (to %s)", sona, next)
	}
	return ch, nil
}

// block fetches a raw block and checks that it hashes to its CID (and,
// with decode, that it decodes). A missing block is a loss, a bad one a
// violation.
func (t *run) block(ctx context.Context, c *client.Client, id string, decode func([]byte) error) error {
	want, err := cid.Decode(id)
	if err != nil {
		t.violation("the server gave a malformed CID %q: %v", id, err)
		return nil
	}
	b, err := c.Block(ctx, id)
	if err != nil {
		if gone(err) {
			t.loss("block %s: %v", id, err)
			return nil
		}
		return err
	}
	got, err := want.Prefix().Sum(b)
	if err != nil || !got.Equals(want) {
		t.violation("block %s does not hash to its CID (got %v, %v)", id, got, err)
		return nil
	}
	if decode != nil {
		if err := decode(b); err != nil {
			t.violation("block %s: %v", id, err)
		}
	}
	return nil
}

// indexes waits until the vector index holds every memory.
func (t *run) indexes(ctx context.Context, c *client.Client) error {
	start := time.Now()
	deadline := start.Add(t.o.IndexDeadline)
	for {
		h, err := c.Health(ctx)
		if err != nil {
			return err
		}
		if h.Indexed >= h.Memories {
			t.rep.IndexCatchUpMaxMs = max(t.rep.IndexCatchUpMaxMs, ms(time.Since(start)))
			return nil
		}
		if time.Now().After(deadline) {
			t.violation("the indexes hold %d of %d memories %s after the restart", h.Indexed, h.Memories, t.o.IndexDeadline)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling interval
		}
	}
}

// recalls asks for some acknowledged texts, the latest first: recall must
// find each.
func (t *run) recalls(ctx context.Context, c *client.Client, inserts []ackInsert) error {
	n := min(t.o.RecallChecks, len(inserts))
	picked := slices.Clone(inserts[len(inserts)-n/2:]) // the newest, whose indexing the crash may have cut
	for len(picked) < n {
		picked = append(picked, inserts[t.rng.IntN(len(inserts))])
	}
	for _, a := range picked {
		resp, err := c.Recall(ctx, a.sona, &messages.RecallRequest{Query: a.text, K: 10})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(resp.Memories, func(m *messages.RecalledMemory) bool { return m.Cid == a.cid }) {
			t.violation("recall in sona %s for %q does not find acknowledged memory %s", a.sona, a.text, a.cid)
		}
	}
	return nil
}

// gone reports an answer that says a thing does not exist (404, 410):
// a loss, not a failed check.
func gone(err error) bool {
	var e *client.Error
	return errors.As(err, &e) && (e.Status == 404 || e.Status == 410)
}

func deref(p *int64) any {
	if p == nil {
		return "none"
	}
	return *p
}
