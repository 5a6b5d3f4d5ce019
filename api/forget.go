package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/messages"
)

// Forgetting (README "Forgetting"): POST /forget excises memories,
// GET /forgotten lists the tombstones. A forgotten memory's reads answer
// 410 (ErrForgotten, classify).

// maxReportItems bounds the tombstones a forget's answer lists.
const maxReportItems = 1000

// forget excises what the body selects (messages.ForgetRequest).
func (s *Server) forget(w http.ResponseWriter, r *http.Request) {
	var req messages.ForgetRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	rep, err := s.forgetOp(r.Context(), &req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// forgetOp checks a forget request against its principal, runs it and
// renders what the principal may see of the report. An admin token not
// limited to sonas forgets anything; any other write token forgets the memories all of whose sonas it may
// use (never the backbone's, never a raw block by its CID), and learns of
// nothing else — a CID it may not forget is refused exactly as one stored
// nowhere (403), and the summaries of other sonas that go with its
// memories are counted and listed only for admin.
func (s *Server) forgetOp(ctx context.Context, in *messages.ForgetRequest) (*messages.ForgetReport, error) {
	if err := requireScope(ctx, ScopeWrite); err != nil {
		return nil, err // MCP's forget: the route checked it for REST
	}
	p := principalFrom(ctx)
	admin := p.Scope >= ScopeAdmin && !p.SonaScoped()
	req := forget.Request{
		Reason: strings.TrimSpace(in.Reason),
		By:     p.Name,
		DryRun: in.DryRun,
		Files:  admin,
	}
	if len(req.Reason) > 1000 {
		return nil, badRequest("invalid", "reason is longer than 1000 bytes")
	}
	if in.Purge && !admin {
		return nil, forbidden("token %q may not purge: a purge is a pass of the store's garbage collection (admin)", p.Name)
	}
	if !admin {
		req.Limit = &forget.Limit{Sonas: p.Sonas()}
	}
	var err error
	if req.CIDs, err = parseCIDs("cids", in.Cids); err != nil {
		return nil, err
	}
	if req.DerivedFrom, err = parseCIDs("derived_from", in.DerivedFrom); err != nil {
		return nil, err
	}
	if in.Sona != "" {
		rec, err := s.resolveSona(ctx, in.Sona)
		if err != nil {
			return nil, err
		}
		req.Sona = rec.Uuid
	}
	if in.AgentId != "" {
		if err := base.ValidateAgentID(in.AgentId); err != nil {
			return nil, err
		}
	}
	req.Label, req.Agent, req.Since, req.Until = in.Label, in.AgentId, in.Since, in.Until
	run := s.sys.Forget
	if s.forgetRunner != nil {
		run = s.forgetRunner
	}
	rep, err := run(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &messages.ForgetReport{
		DryRun:      rep.DryRun,
		Already:     uint64(rep.Already),
		Batches:     uint64(rep.Batches),
		TookSeconds: rep.Took.Seconds(),
	}
	for _, t := range rep.Tombstones {
		if !admin && !(t.Backbone || slices.ContainsFunc(t.Sonas, p.MaySona)) {
			continue
		}
		if t.Kind == forget.KindFile {
			out.Files++
		} else {
			out.Memories++
		}
		if len(out.Items) < maxReportItems {
			out.Items = append(out.Items, t)
		} else {
			out.Truncated++
		}
	}
	if in.Purge && !in.DryRun {
		gc, err := s.self.Forget.Purge(ctx)
		if err != nil {
			return nil, err
		}
		out.Purge = GCReportMessage(gc)
	}
	return out, nil
}

// A ForgetRunner carries out a forget checked against its principal.
type ForgetRunner func(ctx context.Context, req forget.Request) (forget.Report, error)

// ForgetWith has fn carry out the forgets of this server (POST /forget,
// MCP forget) instead of the actor system alone: a cluster member forgets
// on every member.
func (s *Server) ForgetWith(fn ForgetRunner) { s.forgetRunner = fn }

// parseCIDs parses a list of CIDs from a request (400 naming the field
// and the first malformed one).
func parseCIDs(field string, in []string) ([]cid.Cid, error) {
	out := make([]cid.Cid, 0, len(in))
	for _, v := range in {
		c, err := cid.Decode(v)
		if err != nil {
			return nil, badRequest("invalid_cid", "%s: malformed CID %q: %v", field, v, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// forgotten lists the tombstones (admin): GET /forgotten?cursor=&limit=.
func (s *Server) forgotten(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limit(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := &messages.TombstoneList{Items: []*messages.Tombstone{}}
	next, err := s.self.Tombstones(r.URL.Query().Get("cursor"), limit, func(t *messages.Tombstone) error {
		out.Items = append(out.Items, t)
		return nil
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	if next != "" {
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
}
