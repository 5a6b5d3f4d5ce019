package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/messages"
)

// Gathering: the requests that read every sona — a self-scope recall and
// the list of sonas — are answered from what every live member holds.
//
//	POST /peer/v1/recall   peerRecall (JSON) → peerRecalled (JSON)
//	GET  /peer/v1/sonas    ?name=&cursor=&limit=&only= → ListSonasResponse

// gatherTimeout is how long a gathering request waits for the other
// members: cluster.peer_timeout, and at most half of what is left of the
// request's own deadline, so that it answers with what it has in time.
func (c *Cluster) gatherTimeout(ctx context.Context) time.Duration {
	d := c.cfg.PeerTimeout.D()
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, dl.Sub(c.clock.Now())/2)
	}
	return d
}

// gather calls fn on every other live member at once, within the gather
// timeout, and returns the ids of those that failed or did not answer.
func (c *Cluster) gather(ctx context.Context, fn func(ctx context.Context, m Member) error) []string {
	ctx, cancel := context.WithTimeout(ctx, c.gatherTimeout(ctx))
	defer cancel()
	var mu sync.Mutex
	var unanswered []string
	var wg sync.WaitGroup
	for _, m := range c.node.Members() {
		if m.ID == c.node.self.ID {
			continue
		}
		wg.Go(func() {
			if err := fn(ctx, m); err != nil {
				c.log.Warn("a member did not answer a gathering request", "member", m.ID, "err", err)
				mu.Lock()
				unanswered = append(unanswered, m.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(unanswered)
	return unanswered
}

// peerRecall asks a member for its self-scope recall for a sona it may
// not hold: the owner's centroid and activity stand for the sona's.
type peerRecall struct {
	Sona          string    `json:"sona"`
	Text          string    `json:"text"`
	Vector        []float32 `json:"vector,omitempty"`  // the text's embedding, when the asker has it
	Exclude       []string  `json:"exclude,omitempty"` // CIDs kept out (a chat step's input)
	Peek          bool      `json:"peek,omitempty"`    // leave no trace (a query)
	K             int       `json:"k"`
	Budget        int       `json:"budget"`
	Expand        *int      `json:"expand,omitempty"`
	AgentID       string    `json:"agent_id,omitempty"`
	AsOf          *int64    `json:"as_of,omitempty"`
	IncludeHidden bool      `json:"include_hidden,omitempty"`
	Centroid      []float32 `json:"centroid"`
	Activity      int64     `json:"activity"`
}

// peerRecalled is a member's recall: its memories with their blocks.
type peerRecalled struct {
	Memories []peerMemory `json:"memories"`
}

type peerMemory struct {
	CID       string          `json:"cid"`
	Block     []byte          `json:"block"` // the memory's block (dag-cbor)
	Meta      json.RawMessage `json:"meta"`  // MemoryMeta (protojson)
	Score     float64         `json:"score"`
	Via       string          `json:"via"`
	Depth     int             `json:"depth"`
	Rank      int             `json:"rank"`
	Collapsed []string        `json:"collapsed,omitempty"`
	Explain   recall.Explain  `json:"explain"`
}

// Recall is the API's recall (api.Server.RecallWith): a sona-scope recall,
// or one as of a seq of the sona, is this member's (the sona's owner: the
// requests about a sona are routed to it); a self-scope recall is gathered
// from every live member — each recalls over the sonas it holds, scoring
// them against this sona's centroid — and merged by score under the same
// k, budget and expansion bound. Members that fail or do not answer within
// the gather timeout are named in unanswered. Only a principal that may
// read every sona recalls in self scope (the API refuses the others).
func (c *Cluster) Recall(ctx context.Context, q recall.Query) ([]*recall.Recalled, []string, error) {
	out, tr, err := c.self.Recaller.Recall(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	tr.Submit(c.self.Store())
	q, expand := q.WithDefaults(c.recall)
	if q.Scope != recall.ScopeSelf || q.AsOf != nil && *q.AsOf < recall.AsOfTimeCutoff {
		return out, nil, nil
	}
	centroid, activity, ok := c.self.Sonas.Snapshot(q.Sona)
	if !ok {
		return nil, nil, fmt.Errorf("%w: sona %q", base.ErrNotFound, q.Sona)
	}
	ask := peerRecall{Sona: q.Sona, Text: q.Text, Vector: q.Vector, Peek: q.Peek, K: q.K, Budget: q.Budget, Expand: &expand,
		AgentID: q.AgentID, AsOf: q.AsOf, IncludeHidden: q.IncludeHidden, Centroid: centroid, Activity: activity}
	for _, x := range q.Exclude {
		ask.Exclude = append(ask.Exclude, x.String())
	}
	var mu sync.Mutex
	answers := [][]*recall.Recalled{out}
	unanswered := c.gather(ctx, func(ctx context.Context, m Member) error {
		var resp peerRecalled
		if err := c.callJSON(ctx, http.MethodPost, m.Peer+"/peer/v1/recall", ask, &resp); err != nil {
			return err
		}
		rs, err := decodeRecalled(resp)
		if err != nil {
			return fmt.Errorf("member %s: %w", m.ID, err)
		}
		mu.Lock()
		answers = append(answers, rs)
		mu.Unlock()
		return nil
	})
	return mergeRecalled(answers, q.K, q.Budget, expand), unanswered, nil
}

// mergeRecalled merges members' recalls: the best hits by score (a memory
// several members found counts once, at its best score) that fit k and
// budget, then what expansion added, best first, while budget and the
// expansion bound allow, in topological order.
func mergeRecalled(answers [][]*recall.Recalled, k, budget, expand int) []*recall.Recalled {
	best := map[cid.Cid]*recall.Recalled{}
	for _, rs := range answers {
		for _, r := range rs {
			b := best[r.CID]
			if b == nil || r.Rank > 0 && b.Rank == 0 || (r.Rank > 0) == (b.Rank > 0) && r.Score > b.Score {
				best[r.CID] = r
			}
		}
	}
	all := make([]*recall.Recalled, 0, len(best))
	for _, r := range best {
		all = append(all, r)
	}
	slices.SortFunc(all, func(a, b *recall.Recalled) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.CID.KeyString(), b.CID.KeyString())
	})
	taken := map[cid.Cid]bool{}
	var out []*recall.Recalled
	used := 0
	take := func(hits bool, limit int) {
		n := 0
		for _, r := range all {
			if n == limit {
				return
			}
			if (r.Rank > 0) != hits || taken[r.CID] || used+r.Chars() > budget {
				continue
			}
			taken[r.CID] = true
			for _, c := range r.Collapsed {
				taken[c] = true
			}
			used += r.Chars()
			n++
			if hits {
				r.Rank = n
			}
			out = append(out, r)
		}
	}
	take(true, k)
	take(false, expand)
	return recall.TopoSort(out)
}

// decodeRecalled turns a member's answer into recalled memories, each
// block checked against its CID.
func decodeRecalled(resp peerRecalled) ([]*recall.Recalled, error) {
	out := make([]*recall.Recalled, 0, len(resp.Memories))
	for _, pm := range resp.Memories {
		c, err := cid.Decode(pm.CID)
		if err != nil {
			return nil, err
		}
		m, err := model.DecodeMemory(pm.Block)
		if err != nil {
			return nil, fmt.Errorf("memory %s: %w", c, err)
		}
		if got, _, err := m.Encode(); err != nil || !got.Equals(c) {
			return nil, fmt.Errorf("memory %s: its block does not hash to its CID", c)
		}
		meta := &messages.MemoryMeta{}
		if err := protojson.Unmarshal(pm.Meta, meta); err != nil {
			return nil, fmt.Errorf("memory %s: meta: %w", c, err)
		}
		r := &recall.Recalled{CID: c, Memory: m, Meta: meta, Score: pm.Score, Via: pm.Via, Depth: pm.Depth, Rank: pm.Rank, Explain: pm.Explain}
		for _, s := range pm.Collapsed {
			cc, err := cid.Decode(s)
			if err != nil {
				return nil, err
			}
			r.Collapsed = append(r.Collapsed, cc)
		}
		out = append(out, r)
	}
	return out, nil
}

// handleRecall is a member's side of a gathered recall.
func (c *Cluster) handleRecall(w http.ResponseWriter, r *http.Request) {
	var ask peerRecall
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPeerBody)).Decode(&ask); err != nil || ask.Centroid == nil {
		peerError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("a peer recall needs the sona's centroid (%v)", err))
		return
	}
	q := recall.Query{
		Sona: ask.Sona, Text: ask.Text, Vector: ask.Vector, Peek: ask.Peek, K: ask.K, Budget: ask.Budget, Expand: ask.Expand,
		AgentID: ask.AgentID, Scope: recall.ScopeSelf, AsOf: ask.AsOf, IncludeHidden: ask.IncludeHidden,
		Centroid: ask.Centroid, Activity: ask.Activity,
	}
	for _, x := range ask.Exclude {
		c, err := cid.Decode(x)
		if err != nil {
			peerError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("exclude: %v", err))
			return
		}
		q.Exclude = append(q.Exclude, c)
	}
	out, tr, err := c.self.Recaller.Recall(r.Context(), q)
	if err != nil {
		apiError(w, err)
		return
	}
	tr.Submit(c.self.Store())
	resp := peerRecalled{Memories: make([]peerMemory, 0, len(out))}
	for _, rc := range out {
		_, block, err := rc.Memory.Encode()
		if err != nil {
			apiError(w, err)
			return
		}
		meta, err := protojson.Marshal(rc.Meta)
		if err != nil {
			apiError(w, err)
			return
		}
		pm := peerMemory{CID: rc.CID.String(), Block: block, Meta: meta, Score: rc.Score, Via: rc.Via, Depth: rc.Depth, Rank: rc.Rank, Explain: rc.Explain}
		for _, cc := range rc.Collapsed {
			pm.Collapsed = append(pm.Collapsed, cc.String())
		}
		resp.Memories = append(resp.Memories, pm)
	}
	writeJSON(w, http.StatusOK, resp)
}

// LocalSonas lists this member's own sonas (api.Server.LocalSonas).
type LocalSonas func(ctx context.Context, name, cursor string, limit int, only []string) (base.Page[*messages.Sona], []string, error)

// ListSonas returns the API's sona list (api.Server.ListSonasWith): the
// sonas of every live member, each once (the copy with the longest chain),
// in uuid order, paged as one list. local lists this member's; it answers
// the other members' requests too.
func (c *Cluster) ListSonas(local LocalSonas) LocalSonas {
	c.localSonas.Store(&local)
	return func(ctx context.Context, name, cursor string, limit int, only []string) (base.Page[*messages.Sona], []string, error) {
		page, _, err := local(ctx, name, cursor, limit, only)
		if err != nil {
			return page, nil, err
		}
		q := url.Values{"name": {name}, "cursor": {cursor}, "limit": {strconv.Itoa(limit)}}
		if only != nil {
			q["only"] = append([]string{""}, only...) // "" marks a list given, even an empty one
		}
		var mu sync.Mutex
		pages := []base.Page[*messages.Sona]{page}
		unanswered := c.gather(ctx, func(ctx context.Context, m Member) error {
			resp := &messages.ListSonasResponse{}
			if err := c.call(ctx, http.MethodGet, m.Peer+"/peer/v1/sonas?"+q.Encode(), nil, resp); err != nil {
				return err
			}
			mu.Lock()
			pages = append(pages, base.Page[*messages.Sona]{Items: resp.Items, Next: resp.GetNextCursor()})
			mu.Unlock()
			return nil
		})
		return mergeSonas(pages, limit), unanswered, nil
	}
}

// mergeSonas merges members' pages of sonas (each the first limit after
// one cursor) into the first limit of their union.
func mergeSonas(pages []base.Page[*messages.Sona], limit int) base.Page[*messages.Sona] {
	byID := map[string]*messages.Sona{}
	more := false
	for _, p := range pages {
		more = more || p.Next != ""
		for _, s := range p.Items {
			if b := byID[s.Uuid]; b == nil || s.Length > b.Length {
				byID[s.Uuid] = s
			}
		}
	}
	var out base.Page[*messages.Sona]
	for _, s := range byID {
		out.Items = append(out.Items, s)
	}
	slices.SortFunc(out.Items, func(a, b *messages.Sona) int { return cmp.Compare(a.Uuid, b.Uuid) })
	if len(out.Items) > limit {
		out.Items, more = out.Items[:limit], true
	}
	if more && len(out.Items) > 0 {
		out.Next = out.Items[len(out.Items)-1].Uuid
	}
	return out
}

// handleSonas is a member's side of a gathered sona list.
func (c *Cluster) handleSonas(w http.ResponseWriter, r *http.Request) {
	local := c.localSonas.Load()
	if local == nil {
		peerError(w, http.StatusServiceUnavailable, "unavailable", "this member is starting: it cannot list its sonas yet")
		return
	}
	q := r.URL.Query()
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 {
		peerError(w, http.StatusBadRequest, "invalid", "limit must be a positive number")
		return
	}
	var only []string
	if o, ok := q["only"]; ok {
		only = o[1:]
	}
	page, _, err := (*local)(r.Context(), q.Get("name"), q.Get("cursor"), limit, only)
	if err != nil {
		apiError(w, err)
		return
	}
	resp := &messages.ListSonasResponse{Items: page.Items}
	if page.Next != "" {
		resp.NextCursor = &page.Next
	}
	writeProto(w, resp)
}
