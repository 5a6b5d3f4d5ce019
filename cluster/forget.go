package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Forgetting in a cluster (README "Forgetting", "Cluster"). A forget is
// taken by one member (the owner of the sona it names, when it names one:
// Route) and carried out on every live member in two rounds:
//
//  1. plan: every member plans the request on what it holds, writing
//     nothing (forget.Request.Tolerant: named CIDs it lacks are listed,
//     not refused). A refusal anywhere (a CID the principal may not
//     forget) refuses the whole forget; a named CID no member holds is
//     refused as on one node. A dry run ends here.
//  2. apply: every member forgets the union of the plans' tombstones
//     (forget.Forgetter.Apply): it excises what it holds and records the
//     tombstones of the rest, so that no copy fetched later brings a
//     forgotten memory back; the summaries a member holds of what went
//     are forgotten there and sent to every member in a further round.
//
// The forget is acknowledged once every live member applied it; a member
// that does not answer makes it fail with 503 after the others applied it
// (forgetting again is idempotent). A member that was down copies the
// tombstones it lacks from the others when it joins (SyncTombstones),
// before it serves. Chains keep their forgotten entries: a catch-up ships
// such an entry as its ACT and tombstone (StagedAppend.forgotten), and a
// staged append whose memory is forgotten is rewritten so (forgetStaged).

// LocalForget is this member's own forgetting (actors.System.Forget and
// ForgetApply), which the cluster's forgets run on every member.
type LocalForget struct {
	Forget func(ctx context.Context, req forget.Request) (forget.Report, error)
	Apply  func(ctx context.Context, tombs []*messages.Tombstone) (forget.Report, error)
}

// UseForget sets the member's own forgetting; until it is set, peers'
// forgets are refused (503).
func (c *Cluster) UseForget(l LocalForget) { c.local.Store(&l) }

// localForget is UseForget's, or nil.
func (c *Cluster) localForget() *LocalForget { return c.local.Load() }

// errCannotForgetYet refuses a forget before UseForget (a member starting).
var errCannotForgetYet = fmt.Errorf("%w: this member is starting and cannot forget yet; retry", ErrNoReplicas)

// maxForgetRounds bounds the apply rounds (each round's new tombstones are
// summaries found on some member).
const maxForgetRounds = 8

// Forget carries out req on every live member (api.Server.ForgetWith).
func (c *Cluster) Forget(ctx context.Context, req forget.Request) (forget.Report, error) {
	start := c.clock.Now()
	lf := c.localForget()
	if lf == nil {
		return forget.Report{}, errCannotForgetYet
	}
	plan := req
	plan.DryRun, plan.Tolerant = true, true
	local, err := lf.Forget(ctx, plan)
	if err != nil {
		return forget.Report{}, err
	}
	msg, err := planMessage(req)
	if err != nil {
		return forget.Report{}, err
	}
	var mu sync.Mutex
	union := newTombSet()
	union.add(local.Tombstones...)
	missing := map[cid.Cid]int{}
	for _, c := range local.Missing {
		missing[c]++
	}
	peers := c.peers()
	errs := c.eachPeer(ctx, peers, func(ctx context.Context, m Member) error {
		out := &messages.ForgetPlanned{}
		if err := c.call(ctx, http.MethodPost, m.Peer+"/peer/v1/forget/plan", msg, out); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		union.add(out.Tombstones...)
		for _, s := range out.Missing {
			if c, err := cid.Decode(s); err == nil {
				missing[c]++
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return forget.Report{}, forgetPeerError("planning the forget (nothing was forgotten)", err)
	}
	members := 1 + len(peers)
	rep := forget.Report{DryRun: req.DryRun}
	for _, c := range slices.Concat(req.CIDs, req.DerivedFrom) {
		if union.has(c) {
			continue
		}
		if missing[c] == members {
			return forget.Report{}, storedNowhere(req, c)
		}
		rep.Already++
	}
	if !req.DryRun {
		if rep.Batches, err = c.applyEverywhere(ctx, lf, peers, union); err != nil {
			return forget.Report{}, err
		}
	}
	for _, t := range union.list {
		rep.Tombstones = append(rep.Tombstones, t)
		if t.Kind == forget.KindFile {
			rep.Files++
		} else {
			rep.Memories++
		}
	}
	rep.Took = c.clock.Since(start)
	return rep, nil
}

// applyEverywhere has every member (this one and peers) forget the
// tombstones of union, in rounds until no member finds another summary
// to forget; union grows with them. It returns the transactions this
// member's excisions took.
func (c *Cluster) applyEverywhere(ctx context.Context, lf *LocalForget, peers []Member, union *tombSet) (batches int, err error) {
	todo := slices.Clone(union.list)
	var mu sync.Mutex
	for round := 0; len(todo) > 0; round++ {
		if round == maxForgetRounds {
			return batches, fmt.Errorf("cluster: forget: summaries still found after %d rounds", round)
		}
		found := newTombSet()
		rep, err := lf.Apply(ctx, todo)
		if err != nil {
			return batches, err
		}
		batches += rep.Batches
		found.add(rep.Tombstones...)
		msg := &messages.ForgetApply{Tombstones: todo}
		errs := c.eachPeer(ctx, peers, func(ctx context.Context, m Member) error {
			out := &messages.ForgetApplied{}
			if err := c.call(ctx, http.MethodPost, m.Peer+"/peer/v1/forget/apply", msg, out); err != nil {
				return err
			}
			mu.Lock()
			found.add(out.Tombstones...)
			mu.Unlock()
			return nil
		})
		if err := errors.Join(errs...); err != nil {
			return batches, forgetPeerError("forgotten on this member, not confirmed by every other: send the forget again (forgetting twice is harmless)", err)
		}
		todo = todo[:0]
		for _, t := range found.list {
			if c, err := cid.Decode(t.Cid); err == nil && !union.has(c) {
				union.add(t)
				todo = append(todo, t)
			}
		}
	}
	return batches, nil
}

// peers are the other live members.
func (c *Cluster) peers() []Member {
	var out []Member
	for _, m := range c.node.Members() {
		if m.ID != c.node.self.ID {
			out = append(out, m)
		}
	}
	return out
}

// eachPeer runs fn on every member of ms at once and returns their errors.
func (c *Cluster) eachPeer(ctx context.Context, ms []Member, fn func(context.Context, Member) error) []error {
	errs := make(chan error, len(ms))
	for _, m := range ms {
		go func() {
			if err := fn(ctx, m); err != nil {
				errs <- fmt.Errorf("member %s: %w", m.ID, err)
				return
			}
			errs <- nil
		}()
	}
	var out []error
	for range ms {
		if err := <-errs; err != nil {
			out = append(out, err)
		}
	}
	return out
}

// forgetPeerError classifies peers' refusals of a forget: the codes a
// peer answered with (peerForgetError, read into a PeerError) become the
// sentinels again.
func forgetPeerError(what string, err error) error {
	switch {
	case hasPeerCode(err, "not_allowed"):
		return fmt.Errorf("%w: %s", forget.ErrNotAllowed, err)
	case hasPeerCode(err, "invalid"):
		return fmt.Errorf("%w: %s", base.ErrInvalid, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrNoReplicas, what, err)
}

// storedNowhere is the error for a named CID no member holds, as one node
// answers it.
func storedNowhere(req forget.Request, c cid.Cid) error {
	if req.Limit != nil || (c.Prefix().Codec == cid.Raw && !req.Files) {
		return fmt.Errorf("%w: %s is not a memory of a sona it may forget", forget.ErrNotAllowed, c)
	}
	return fmt.Errorf("%w: %s is no stored memory or file on any member (an ACT is kept: forget the memory it names)", base.ErrNotFound, c)
}

// tombSet is tombstones in the order added, one per CID.
type tombSet struct {
	list []*messages.Tombstone
	seen map[cid.Cid]bool
}

func newTombSet() *tombSet { return &tombSet{seen: map[cid.Cid]bool{}} }

func (s *tombSet) has(c cid.Cid) bool { return s.seen[c] }

func (s *tombSet) add(ts ...*messages.Tombstone) {
	for _, t := range ts {
		c, err := cid.Decode(t.Cid)
		if err != nil || s.seen[c] {
			continue
		}
		s.seen[c] = true
		s.list = append(s.list, t)
	}
}

// planMessage is req as a peer plans it.
func planMessage(req forget.Request) (*messages.ForgetPlan, error) {
	in := &messages.ForgetRequest{Sona: req.Sona, Label: req.Label, AgentId: req.Agent, Since: req.Since, Until: req.Until, Reason: req.Reason}
	for _, c := range req.CIDs {
		in.Cids = append(in.Cids, c.String())
	}
	for _, c := range req.DerivedFrom {
		in.DerivedFrom = append(in.DerivedFrom, c.String())
	}
	out := &messages.ForgetPlan{Request: in, By: req.By}
	if req.Limit != nil {
		out.Limited, out.Sonas = true, req.Limit.Sonas
	}
	if req.Limit == nil && !req.Files {
		return nil, fmt.Errorf("cluster: a forget without a limit must allow files (an admin's)")
	}
	return out, nil
}

// planRequest is the forget.Request of a peer's plan.
func planRequest(in *messages.ForgetPlan) (forget.Request, error) {
	r := in.GetRequest()
	req := forget.Request{Reason: r.GetReason(), By: in.By, DryRun: true, Tolerant: true, Files: !in.Limited}
	req.Sona, req.Label, req.Agent, req.Since, req.Until = r.GetSona(), r.GetLabel(), r.GetAgentId(), r.Since, r.Until
	if in.Limited {
		req.Limit = &forget.Limit{Sonas: in.Sonas}
		if len(in.Sonas) == 0 {
			req.Limit.Sonas = nil
		}
	}
	for _, list := range []struct {
		from []string
		to   *[]cid.Cid
	}{{r.GetCids(), &req.CIDs}, {r.GetDerivedFrom(), &req.DerivedFrom}} {
		for _, s := range list.from {
			c, err := cid.Decode(s)
			if err != nil {
				return req, fmt.Errorf("%w: cid %q", base.ErrInvalid, s)
			}
			*list.to = append(*list.to, c)
		}
	}
	return req, nil
}

func (c *Cluster) handleForgetPlan(w http.ResponseWriter, r *http.Request) {
	in := &messages.ForgetPlan{}
	if err := readProto(r, in); err != nil {
		peerError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	req, err := planRequest(in)
	lf := c.localForget()
	if err == nil && lf == nil {
		err = errCannotForgetYet
	}
	var rep forget.Report
	if err == nil {
		rep, err = lf.Forget(r.Context(), req)
	}
	if err != nil {
		peerForgetError(w, err)
		return
	}
	out := &messages.ForgetPlanned{Tombstones: rep.Tombstones, Already: uint64(rep.Already)}
	for _, m := range rep.Missing {
		out.Missing = append(out.Missing, m.String())
	}
	writeProto(w, out)
}

func (c *Cluster) handleForgetApply(w http.ResponseWriter, r *http.Request) {
	in := &messages.ForgetApply{}
	if err := readProto(r, in); err != nil {
		peerError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	lf := c.localForget()
	if lf == nil {
		peerForgetError(w, errCannotForgetYet)
		return
	}
	rep, err := lf.Apply(r.Context(), in.Tombstones)
	if err != nil {
		peerForgetError(w, err)
		return
	}
	writeProto(w, &messages.ForgetApplied{Tombstones: rep.Tombstones, Batches: uint64(rep.Batches)})
}

// peerForgetError answers a peer's forget with the code its sentinel has.
func peerForgetError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, forget.ErrNotAllowed):
		peerError(w, http.StatusForbidden, "not_allowed", err.Error())
	case errors.Is(err, base.ErrInvalid):
		peerError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, ErrNoReplicas):
		peerError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		peerError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// tombstonePage is how many tombstones a page of GET /peer/v1/tombstones
// holds.
const tombstonePage = 1000

func (c *Cluster) handleTombstones(w http.ResponseWriter, r *http.Request) {
	out := &messages.TombstonePage{}
	next, err := c.self.Tombstones(r.URL.Query().Get("cursor"), tombstonePage, func(t *messages.Tombstone) error {
		out.Tombstones = append(out.Tombstones, t)
		return nil
	})
	if err != nil {
		peerForgetError(w, err)
		return
	}
	out.Next = next
	writeProto(w, out)
}

// SyncTombstones copies from every other live member the tombstones this
// member lacks, forgetting what they name (a member that was down during
// a forget): call it when the member joins, before it serves. A member
// that does not answer is logged and passed over.
func (c *Cluster) SyncTombstones(ctx context.Context) error {
	lf := c.localForget()
	if lf == nil {
		return fmt.Errorf("cluster: UseForget first")
	}
	var synced int
	for _, m := range c.peers() {
		cursor := ""
		for {
			page := &messages.TombstonePage{}
			if err := c.call(ctx, http.MethodGet, m.Peer+"/peer/v1/tombstones?"+url.Values{"cursor": {cursor}}.Encode(), nil, page); err != nil {
				c.log.Warn("cannot copy a member's tombstones", "member", m.ID, "err", err)
				break
			}
			lack, err := c.lacking(page.Tombstones)
			if err != nil {
				return err
			}
			if len(lack) > 0 {
				if _, err := lf.Apply(ctx, lack); err != nil {
					return fmt.Errorf("cluster: forgetting what member %s forgot: %w", m.ID, err)
				}
				synced += len(lack)
			}
			if page.Next == "" || len(page.Tombstones) == 0 {
				break
			}
			cursor = page.Next
		}
	}
	if synced > 0 {
		c.log.Info("forgot what other members forgot while this one was away", "tombstones", synced)
	}
	return nil
}

// lacking are the tombstones of ts this member does not keep.
func (c *Cluster) lacking(ts []*messages.Tombstone) ([]*messages.Tombstone, error) {
	var out []*messages.Tombstone
	err := c.self.Store().View(func(r store.Reader) error {
		for _, t := range ts {
			id, err := cid.Decode(t.Cid)
			if err != nil {
				return fmt.Errorf("%w: a member's tombstone of %q", base.ErrCorrupt, t.Cid)
			}
			if ok, err := r.Has(store.TombstoneKey(id)); err != nil {
				return err
			} else if !ok {
				out = append(out, t)
			}
		}
		return nil
	})
	return out, err
}

// forgetStaged is this package's part of an excision (forget.Part): a
// staged append whose memory goes is rewritten without its content (the
// memory, its embedding, metadata and file), keeping its ACT, so that it
// can still enter the chain, as a forgotten entry.
func forgetStaged(tx store.Tx, b *forget.Batch) error {
	type rewrite struct {
		key []byte
		val []byte
	}
	var todo []rewrite
	it := tx.NewIterator(store.IterOptions{Prefix: prefixStaged, PrefetchValues: true})
	for it.Seek(prefixStaged); it.Valid(); it.Next() {
		a := &messages.StagedAppend{}
		if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, a) }); err != nil {
			it.Close()
			return fmt.Errorf("%w: staged append: %v", base.ErrCorrupt, err)
		}
		if a.Forgotten != nil {
			continue
		}
		act, err := model.DecodeAct(a.ActBlock)
		if err != nil {
			it.Close()
			return fmt.Errorf("%w: staged ACT: %v", base.ErrCorrupt, err)
		}
		if !b.IsGone(act.Memory) {
			continue
		}
		a.Append, a.Forgotten = nil, &messages.Tombstone{Cid: act.Memory.String(), Kind: forget.KindMemory, ForgottenAt: b.Now}
		raw, err := proto.Marshal(a)
		if err != nil {
			it.Close()
			return err
		}
		todo = append(todo, rewrite{it.Item().KeyCopy(nil), raw})
	}
	it.Close()
	for _, r := range todo {
		tx.Set(r.key, r.val)
	}
	return nil
}
