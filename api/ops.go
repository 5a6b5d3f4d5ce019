package api

// The operations REST and MCP share: each validates its input, checks the
// principal of its context against the sonas and memories it touches, and
// reads from the memory.Self or writes through the sona actors. A
// transport only decodes its request and renders the result.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// allowSona checks the principal of ctx may use the sona id.
func allowSona(ctx context.Context, id string) error {
	if p := principalFrom(ctx); !p.MaySona(id) {
		return forbidden("token %q may not use sona %s", p.Name, id)
	}
	return nil
}

// sonaByUUID returns the sona with this uuid (any spelling) if the
// principal may use it; the allow-list is checked before existence, so a
// refusal says nothing of other sonas.
func (s *Server) sonaByUUID(ctx context.Context, ref string) (*messages.Sona, error) {
	id, ok := memory.CanonicalUUID(ref)
	if !ok {
		return nil, badRequest("invalid_uuid", "malformed sona uuid %q", ref)
	}
	if err := allowSona(ctx, id); err != nil {
		return nil, err
	}
	return s.self.Sona(id)
}

// resolveSona finds a sona by uuid or unambiguous name among the sonas the
// principal may use.
func (s *Server) resolveSona(ctx context.Context, ref string) (*messages.Sona, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, badRequest("invalid", "sona is required (uuid or unambiguous name)")
	}
	p := principalFrom(ctx)
	if !p.SonaScoped() {
		return s.self.ResolveSona(ref)
	}
	if id, ok := memory.CanonicalUUID(ref); ok {
		return s.sonaByUUID(ctx, id)
	}
	ids, err := s.self.SonasNamed(ref)
	if err != nil {
		return nil, err
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return !p.MaySona(id) })
	switch len(ids) {
	case 0:
		return nil, forbidden("token %q may use no sona named %q", p.Name, ref)
	case 1:
		return s.self.Sona(ids[0])
	}
	return nil, &apiError{http.StatusConflict, "conflict", "several sonas this token may use are named " + ref + ": use a uuid"}
}

// allowMemory checks the principal may read the memory c: a sona-scoped
// token reads the memories of its sonas and the backbone (visible to every
// sona). A memory that does not exist is refused the same way, so a
// sona-scoped token cannot probe for other sonas' memories.
func (s *Server) allowMemory(ctx context.Context, c cid.Cid) error {
	p := principalFrom(ctx)
	if !p.SonaScoped() {
		return nil
	}
	meta, err := s.self.Meta(c)
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return err
	}
	if meta != nil {
		if meta.Backbone {
			return nil
		}
		for _, id := range meta.Sonas {
			if p.MaySona(id) {
				return nil
			}
		}
	}
	return forbidden("token %q may not read %s: it is not a memory of a sona the token may use", p.Name, c)
}

// memoryOp reads a memory in its API form.
func (s *Server) memoryOp(ctx context.Context, c cid.Cid) (*messages.Memory, error) {
	if err := s.allowMemory(ctx, c); err != nil {
		return nil, err
	}
	return s.loadRendered(c)
}

// fileOp reads a file: a raw block by its CID, or the content of a file
// memory with its mimeType and name. Sona-scoped tokens read files through
// their file memory (a raw block is not tied to a sona).
func (s *Server) fileOp(ctx context.Context, c cid.Cid) (data []byte, mimeType, name string, err error) {
	content := c
	if c.Prefix().Codec == memory.CodecDagCBOR {
		if err := s.allowMemory(ctx, c); err != nil {
			return nil, "", "", err
		}
		m, _, err := s.self.Get(c)
		if err != nil {
			return nil, "", "", err
		}
		f := m.Data.File
		if f == nil {
			return nil, "", "", badRequest("not_a_file", "%s is a %s memory, not a file", c, m.Data.Kind())
		}
		content = f.Content
		if f.MimeType != nil {
			mimeType = *f.MimeType
		}
		if f.Name != nil {
			name = *f.Name
		}
	} else if p := principalFrom(ctx); p.SonaScoped() {
		return nil, "", "", forbidden("token %q is limited to some sonas: read a file by its file memory's CID, not the raw block %s", p.Name, c)
	}
	data, err = s.self.Block(content)
	if err != nil {
		return nil, "", "", err
	}
	if mimeType == "" {
		mimeType = http.DetectContentType(data)
	}
	return data, mimeType, name, nil
}

// createSonaOp creates a sona (not for sona-scoped tokens: they could not
// use it).
func (s *Server) createSonaOp(ctx context.Context, name string) (*messages.Sona, error) {
	if err := requireScope(ctx, ScopeWrite); err != nil {
		return nil, err
	}
	if err := requireUnscoped(ctx, "creating a sona"); err != nil {
		return nil, err
	}
	return s.self.CreateSona(ctx, name)
}

// listSonasOp lists sonas (optionally those called name) in uuid order;
// a sona-scoped token sees only its own.
func (s *Server) listSonasOp(ctx context.Context, name, cursor string, limit int) (*messages.ListSonasResponse, error) {
	p := principalFrom(ctx)
	var page memory.Page[*messages.Sona]
	var err error
	switch {
	case p.SonaScoped():
		page, err = s.allowedSonas(p, name, cursor, limit)
	case name != "":
		page, err = s.self.ListSonasNamed(name, cursor, limit)
	default:
		page, err = s.self.ListSonas(cursor, limit)
	}
	if err != nil {
		return nil, err
	}
	resp := &messages.ListSonasResponse{Items: page.Items}
	if resp.Items == nil {
		resp.Items = []*messages.Sona{}
	}
	if page.Next != "" {
		resp.NextCursor = &page.Next
	}
	return resp, nil
}

// allowedSonas pages through a sona-scoped principal's existing sonas.
func (s *Server) allowedSonas(p *Principal, name, cursor string, limit int) (memory.Page[*messages.Sona], error) {
	var page memory.Page[*messages.Sona]
	for _, id := range p.Sonas() {
		if id <= cursor {
			continue
		}
		rec, err := s.self.Sona(id)
		if errors.Is(err, memory.ErrNotFound) {
			continue
		}
		if err != nil {
			return page, err
		}
		if name != "" && rec.Name != name {
			continue
		}
		if len(page.Items) == limit {
			page.Next = page.Items[limit-1].Uuid
			break
		}
		page.Items = append(page.Items, rec)
	}
	return page, nil
}

// recallScope is the scope a recall, chat or query runs in: a sona-scoped
// token recalls in sona scope (its sona and the backbone), never across
// every sona.
func recallScope(ctx context.Context, asked string) (string, error) {
	switch asked {
	case "", memory.ScopeSelf, memory.ScopeSona:
	default:
		return "", badRequest("invalid", "scope must be %q or %q (or empty for the configured default)", memory.ScopeSelf, memory.ScopeSona)
	}
	if p := principalFrom(ctx); p.SonaScoped() {
		if asked == memory.ScopeSelf {
			return "", forbidden("token %q is limited to some sonas: it recalls in %q scope only", p.Name, memory.ScopeSona)
		}
		return memory.ScopeSona, nil
	}
	return asked, nil
}

// checkChat validates a chat or query request and fixes its scope.
func (s *Server) checkChat(ctx context.Context, req *messages.ChatRequest) error {
	if strings.TrimSpace(req.Content) == "" {
		return badRequest("invalid", "content must not be empty")
	}
	if err := memory.ValidateStep(req.Name, req.AgentId, req.Scope); err != nil {
		return err
	}
	if err := s.checkRecallBounds(req.K, req.BudgetChars); err != nil {
		return err
	}
	scope, err := recallScope(ctx, req.Scope)
	if err != nil {
		return err
	}
	req.Scope = scope
	return nil
}

func (s *Server) checkRecallBounds(k, budget int32) error {
	if k < 0 || int(k) > s.cfg.Server.MaxK {
		return badRequest("invalid", "k must be within 0..%d (0 = default %d)", s.cfg.Server.MaxK, s.cfg.Recall.TopK)
	}
	if budget < 0 || int(budget) > s.cfg.Server.MaxBudgetChars {
		return badRequest("invalid", "budget_chars must be within 0..%d (0 = default %d)", s.cfg.Server.MaxBudgetChars, s.cfg.Recall.BudgetChars)
	}
	return nil
}

// chatOp advances a sona: the input and the response are stored through
// the sona's actor.
func (s *Server) chatOp(ctx context.Context, rec *messages.Sona, req *messages.ChatRequest) (*messages.ChatResponse, error) {
	if err := s.chatAllowed(ctx, rec, req); err != nil {
		return nil, err
	}
	return s.sys.Advance(ctx, rec.Uuid, req)
}

// chatAllowed checks a chat, streamed or not: the write scope, the sona,
// the request.
func (s *Server) chatAllowed(ctx context.Context, rec *messages.Sona, req *messages.ChatRequest) error {
	if err := requireScope(ctx, ScopeWrite); err != nil {
		return err
	}
	if err := allowSona(ctx, rec.Uuid); err != nil {
		return err
	}
	return s.checkChat(ctx, req)
}

// queryOp recalls and answers without storing anything.
func (s *Server) queryOp(ctx context.Context, rec *messages.Sona, req *messages.ChatRequest) (*messages.QueryResponse, error) {
	if err := requireScope(ctx, ScopeRead); err != nil {
		return nil, err
	}
	if err := allowSona(ctx, rec.Uuid); err != nil {
		return nil, err
	}
	if err := s.checkChat(ctx, req); err != nil {
		return nil, err
	}
	return s.sys.Query(ctx, rec.Uuid, req)
}

// recallOp recalls the memories that matter for a query in a sona.
func (s *Server) recallOp(ctx context.Context, rec *messages.Sona, req *messages.RecallRequest) ([]*memory.Recalled, error) {
	if err := requireScope(ctx, ScopeRead); err != nil {
		return nil, err
	}
	if err := allowSona(ctx, rec.Uuid); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, badRequest("invalid", "query must not be empty")
	}
	if err := s.checkRecallBounds(req.K, req.BudgetChars); err != nil {
		return nil, err
	}
	scope, err := recallScope(ctx, req.Scope)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	recalled, err := s.self.Recall(ctx, memory.Query{
		Sona: rec.Uuid, Text: req.Query, K: int(req.K), Budget: int(req.BudgetChars),
		AgentID: req.AgentId, Scope: scope, AsOf: req.AsOf, IncludeHidden: req.IncludeHidden,
	})
	s.metrics.ObserveRecall("recall", time.Since(start))
	return recalled, err
}

// insertOp stores a memory into a sona without calling the model: dedup
// first, then an append through the sona's actor. created is false when
// nothing new was appended (a duplicate, or a memory already there).
func (s *Server) insertOp(ctx context.Context, req *messages.InsertRequest) (resp *messages.InsertResponse, created bool, err error) {
	if err := requireScope(ctx, ScopeWrite); err != nil {
		return nil, false, err
	}
	rec, err := s.resolveSona(ctx, req.Sona)
	if err != nil {
		return nil, false, err
	}
	m, err := memoryFromInsert(req)
	if err != nil {
		return nil, false, err
	}
	if err := memory.ValidateAgentID(req.AgentId); err != nil {
		return nil, false, err
	}
	dedup := s.cfg.Recall.Dedup
	if req.Dedup != nil {
		dedup = *req.Dedup
	}
	meta := &messages.MemoryMeta{Kind: req.Kind, AgentId: req.AgentId, Labels: req.Labels}
	p, dup, err := s.self.PrepareInsert(ctx, rec.Uuid, m, meta, dedup)
	if err != nil {
		return nil, false, err
	}
	if dup != nil {
		if err := s.self.ReinforceDuplicate(ctx, dup.Existing); err != nil {
			return nil, false, err
		}
		return &messages.InsertResponse{
			Cid: dup.Existing.String(), Deduplicated: true,
			Similarity: &dup.Similarity, Threshold: &dup.Threshold.Value,
		}, false, nil
	}
	res, err := s.sys.Append(ctx, rec.Uuid, p)
	if err != nil {
		return nil, false, err
	}
	return &messages.InsertResponse{Cid: res.Cid, Seq: res.Seq, Existed: res.Seq == nil}, res.Seq != nil, nil
}
