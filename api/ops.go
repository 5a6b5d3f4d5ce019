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

	"github.com/ipfs/go-cid"
	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/prompt"
	"github.com/memoria-ai/memoria/memory/recall"
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
	id, ok := chain.CanonicalUUID(ref)
	if !ok {
		return nil, badRequest("invalid_uuid", "malformed sona uuid %q", ref)
	}
	if err := allowSona(ctx, id); err != nil {
		return nil, err
	}
	rec, err := s.self.Sonas.Get(id)
	tagSona(ctx, rec)
	return rec, err
}

// resolveSona finds a sona by uuid or unambiguous name among the sonas the
// principal may use.
func (s *Server) resolveSona(ctx context.Context, ref string) (*messages.Sona, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, badRequest("invalid", "sona is required (uuid or unambiguous name)")
	}
	p := principalFrom(ctx)
	if !p.SonaScoped() {
		rec, err := s.self.Sonas.Resolve(ref)
		tagSona(ctx, rec)
		return rec, err
	}
	if id, ok := chain.CanonicalUUID(ref); ok {
		return s.sonaByUUID(ctx, id)
	}
	ids, err := s.self.Sonas.Named(ref)
	if err != nil {
		return nil, err
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return !p.MaySona(id) })
	switch len(ids) {
	case 0:
		return nil, forbidden("token %q may use no sona named %q", p.Name, ref)
	case 1:
		return s.sonaByUUID(ctx, ids[0])
	}
	return nil, &apiError{base.ErrAmbiguous, "conflict", "several sonas this token may use are named " + ref + ": use a uuid"}
}

// What a sona-scoped principal sees (README "Auth and limits"): the
// memories of its sonas and of the backbone (every sona's), and the files
// of its sonas; anything else is answered as if it did not exist, so that
// naming a CID never tells it whether another sona holds it. Reads of
// what it may not see are 403 whether or not the CID exists; an insert
// whose edges or file name what it may not see is refused exactly as one
// naming a CID stored nowhere; metadata is rendered per principal
// (metaView).

// sees reports whether p may see the memory c (false when c is no memory).
func (s *Server) sees(p *Principal, c cid.Cid) (bool, error) {
	if !p.SonaScoped() {
		return true, nil
	}
	meta, err := s.self.Memories.Meta(c)
	if errors.Is(err, base.ErrForgotten) {
		// It may be told the memory is gone only if it could see it.
		t, terr := s.self.Tombstone(c)
		if terr != nil {
			return false, nil
		}
		return t.Backbone || slices.ContainsFunc(t.Sonas, p.MaySona), nil
	}
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return meta.Backbone || slices.ContainsFunc(meta.Sonas, p.MaySona), nil
}

// allowMemory checks the principal may read the memory c. A memory that
// does not exist is refused the same way as another sona's.
func (s *Server) allowMemory(ctx context.Context, c cid.Cid) error {
	p := principalFrom(ctx)
	ok, err := s.sees(p, c)
	if err != nil || ok {
		return err
	}
	return forbidden("token %q may not read %s: it is not a memory of a sona the token may use", p.Name, c)
}

// checkLinksSeen refuses a sona-scoped principal an insert whose edges or
// file content name what it may not see, with the error a CID stored
// nowhere gets. inline is the file that comes with the memory, if any.
func (s *Server) checkLinksSeen(ctx context.Context, m *model.Memory, inline cid.Cid) error {
	p := principalFrom(ctx)
	if !p.SonaScoped() {
		return nil
	}
	for _, e := range m.Edges {
		ok, err := s.sees(p, e.Target)
		if err != nil {
			return err
		}
		if !ok {
			return chain.EdgeNotStored(e.Target)
		}
	}
	if f := m.Data.File; f != nil && f.Content != inline {
		ok, err := s.self.Chains.FileInSonas(f.Content, p.MaySona)
		if err != nil {
			return err
		}
		if !ok {
			return chain.FileNotStored(f.Content)
		}
	}
	return nil
}

// metaView is a memory's metadata as the principal of ctx may see it. A
// sona-scoped principal sees the sonas it may use among the memory's, the
// provenance (agent_id, kind, labels, created_at, expires_at, insight) of
// the first of them the memory joined — what its own write recorded —,
// whether it is archived or on the backbone, and its evaluation (derived
// from its content); not the self's learning about it (importance, access
// count and tick, insertion-log position), which other sonas' use shapes.
//
// Any other principal sees all of it: rec itself, shared (read records
// are never modified; copying each — Of, then View — was 3–4% of what
// a recall allocated at 100,000 memories).
func (s *Server) metaView(ctx context.Context, rec *messages.MemoryMeta) *messages.MemoryMeta {
	p := principalFrom(ctx)
	if rec == nil || !p.SonaScoped() {
		return rec
	}
	m := meta.Of(rec)
	all := m.View() // its evaluation and insight mark as every principal sees them
	v := &messages.MemoryMeta{Backbone: m.Backbone, Archived: m.Archived, Evaluation: all.Evaluation}
	for _, id := range m.Sonas {
		if p.MaySona(id) {
			v.Sonas = append(v.Sonas, id)
		}
	}
	if m.Backbone || len(m.Sonas) > 0 && p.MaySona(m.Sonas[0]) {
		v.AgentId, v.Kind, v.Labels, v.CreatedAt, v.ExpiresAt, v.Insight = m.AgentID, m.Kind, m.Labels, m.CreatedAt, m.ExpiresAt, all.Insight
		return v
	}
	for _, j := range m.Joins {
		if p.MaySona(j.Sona) {
			v.AgentId, v.Kind, v.Labels, v.CreatedAt = j.AgentID, j.Kind, j.Labels, j.JoinedAt
			if ttl := s.cfg.Kinds[j.Kind].TTL.D(); ttl > 0 {
				v.ExpiresAt = j.JoinedAt + int64(ttl.Seconds())
			}
			break
		}
	}
	return v
}

// memoryOp reads a memory in its API form.
func (s *Server) memoryOp(ctx context.Context, c cid.Cid) (*messages.Memory, error) {
	if err := s.allowMemory(ctx, c); err != nil {
		return nil, err
	}
	return s.loadRendered(ctx, c)
}

// fileOp reads a file: a raw block by its CID, or the content of a file
// memory with its mimeType and name. Sona-scoped tokens read files through
// their file memory (a raw block is not tied to a sona), whose content
// must be a file of their sonas.
func (s *Server) fileOp(ctx context.Context, c cid.Cid) (data []byte, mimeType, name string, err error) {
	content := c
	if c.Prefix().Codec == model.CodecDagCBOR {
		if err := s.allowMemory(ctx, c); err != nil {
			return nil, "", "", err
		}
		m, _, err := s.self.Memories.Get(c)
		if err != nil {
			return nil, "", "", err
		}
		f := m.Data.File
		if f == nil {
			return nil, "", "", badRequest("not_a_file", "%s is a %s memory, not a file", c, m.Data.Kind())
		}
		content = f.Content
		if p := principalFrom(ctx); p.SonaScoped() {
			ok, err := s.self.Chains.FileInSonas(content, p.MaySona)
			if err != nil {
				return nil, "", "", err
			}
			if !ok {
				return nil, "", "", forbidden("token %q may not read %s: its content is not a file of a sona the token may use", p.Name, c)
			}
		}
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

// fileSona is the sona an upload is recorded for: ref (a uuid or an
// unambiguous name), or a sona-scoped principal's only sona; "" for none.
func (s *Server) fileSona(ctx context.Context, ref string) (string, error) {
	p := principalFrom(ctx)
	if ref == "" {
		ids := p.Sonas()
		if !p.SonaScoped() {
			return "", nil
		}
		if len(ids) != 1 {
			return "", badRequest("invalid", "token %q may use several sonas: name the one the file is for with ?sona=", p.Name)
		}
		ref = ids[0]
	}
	rec, err := s.resolveSona(ctx, ref)
	if err != nil {
		return "", err
	}
	return rec.Uuid, nil
}

// createSonaOp creates a sona (not for sona-scoped tokens: they could not
// use it) whose name is unique, unless allowDuplicate.
func (s *Server) createSonaOp(ctx context.Context, name string, allowDuplicate bool) (*messages.Sona, error) {
	if err := requireScope(ctx, ScopeWrite); err != nil {
		return nil, err
	}
	if err := requireUnscoped(ctx, "creating a sona"); err != nil {
		return nil, err
	}
	if s.sonaCreator != nil {
		return s.sonaCreator(ctx, name, !allowDuplicate)
	}
	if allowDuplicate {
		return s.self.Sonas.CreateDuplicate(ctx, name)
	}
	return s.self.Sonas.Create(ctx, name)
}

// listSonasOp lists sonas (optionally those called name) in uuid order;
// a sona-scoped token sees only its own. unanswered names the cluster
// members that did not answer in time.
func (s *Server) listSonasOp(ctx context.Context, name, cursor string, limit int) (*messages.ListSonasResponse, []string, error) {
	p := principalFrom(ctx)
	var only []string
	if p.SonaScoped() {
		only = p.Sonas()
		if only == nil {
			only = []string{}
		}
	}
	list := s.LocalSonas
	if s.sonaLister != nil {
		list = s.sonaLister
	}
	page, unanswered, err := list(ctx, name, cursor, limit, only)
	if err != nil {
		return nil, nil, err
	}
	resp := &messages.ListSonasResponse{Items: page.Items}
	if resp.Items == nil {
		resp.Items = []*messages.Sona{}
	}
	if page.Next != "" {
		resp.NextCursor = &page.Next
	}
	return resp, unanswered, nil
}

// SonaLister lists the sonas after cursor in uuid order, at most limit,
// those called name when it is set, among only when only is not nil.
type SonaLister func(ctx context.Context, name, cursor string, limit int, only []string) (page base.Page[*messages.Sona], unanswered []string, err error)

// ListSonasWith has fn list the sonas for GET /sonas/list (a cluster
// member lists every member's).
func (s *Server) ListSonasWith(fn SonaLister) { s.sonaLister = fn }

// LocalSonas is a SonaLister of this store.
func (s *Server) LocalSonas(_ context.Context, name, cursor string, limit int, only []string) (base.Page[*messages.Sona], []string, error) {
	var page base.Page[*messages.Sona]
	var err error
	switch {
	case only != nil:
		page, err = s.allowedSonas(only, name, cursor, limit)
	case name != "":
		page, err = s.self.Sonas.ListNamed(name, cursor, limit)
	default:
		page, err = s.self.Sonas.List(cursor, limit)
	}
	return page, nil, err
}

// allowedSonas pages through the sonas of ids (sorted) that exist.
func (s *Server) allowedSonas(ids []string, name, cursor string, limit int) (base.Page[*messages.Sona], error) {
	var page base.Page[*messages.Sona]
	for _, id := range ids {
		if id <= cursor {
			continue
		}
		rec, err := s.self.Sonas.Get(id)
		if errors.Is(err, base.ErrNotFound) {
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
	case "", recall.ScopeSelf, recall.ScopeSona:
	default:
		return "", badRequest("invalid", "scope must be %q or %q (or empty for the configured default)", recall.ScopeSelf, recall.ScopeSona)
	}
	if p := principalFrom(ctx); p.SonaScoped() {
		if asked == recall.ScopeSelf {
			return "", forbidden("token %q is limited to some sonas: it recalls in %q scope only", p.Name, recall.ScopeSona)
		}
		return recall.ScopeSona, nil
	}
	return asked, nil
}

// checkChat validates a chat or query request and fixes its scope.
func (s *Server) checkChat(ctx context.Context, req *messages.ChatRequest) error {
	if strings.TrimSpace(req.Content) == "" {
		return badRequest("invalid", "content must not be empty")
	}
	if err := prompt.ValidateStep(req.Name, req.AgentId, req.Scope); err != nil {
		return err
	}
	if err := s.checkRecallBounds(req.K, req.BudgetChars, req.Expand); err != nil {
		return err
	}
	scope, err := recallScope(ctx, req.Scope)
	if err != nil {
		return err
	}
	req.Scope = scope
	return nil
}

func (s *Server) checkRecallBounds(k, budget int32, expand *int32) error {
	if k < 0 || int(k) > s.cfg.Server.MaxK {
		return badRequest("invalid", "k must be within 0..%d (0 = default %d)", s.cfg.Server.MaxK, s.cfg.Recall.TopK)
	}
	if expand != nil && (*expand < 0 || int(*expand) > s.cfg.Server.MaxK) {
		return badRequest("invalid", "expand must be within 0..%d (absent = default: %d per hit)", s.cfg.Server.MaxK, s.cfg.Recall.ExpandPerHit)
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
func (s *Server) recallOp(ctx context.Context, rec *messages.Sona, req *messages.RecallRequest) ([]*recall.Recalled, []string, error) {
	if err := requireScope(ctx, ScopeRead); err != nil {
		return nil, nil, err
	}
	if err := allowSona(ctx, rec.Uuid); err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, nil, badRequest("invalid", "query must not be empty")
	}
	if err := s.checkRecallBounds(req.K, req.BudgetChars, req.Expand); err != nil {
		return nil, nil, err
	}
	scope, err := recallScope(ctx, req.Scope)
	if err != nil {
		return nil, nil, err
	}
	start := s.clock.Now()
	run := s.localRecall
	if s.recallRunner != nil {
		run = s.recallRunner
	}
	recalled, unanswered, err := run(ctx, recall.Query{
		Sona: rec.Uuid, Text: req.Query, K: int(req.K), Budget: int(req.BudgetChars), Expand: intPtr(req.Expand),
		AgentID: req.AgentId, Scope: scope, AsOf: req.AsOf, IncludeHidden: req.IncludeHidden,
	})
	s.metrics.ObserveRecall("recall", s.clock.Since(start))
	return recalled, unanswered, err
}

// RecallRunner runs the recalls of a server (the actors' chat steps and
// queries use the same, actors.Options.Recall). unanswered names what did
// not answer in time (in a cluster: members), the recall being made of
// the rest.
type RecallRunner = actors.RecallFunc

// RecallWith has fn run the recalls of this server (a cluster member
// gathers a self-scope recall from every member).
func (s *Server) RecallWith(fn RecallRunner) { s.recallRunner = fn }

// localRecall is a recall of this store, its trace submitted.
func (s *Server) localRecall(ctx context.Context, q recall.Query) ([]*recall.Recalled, []string, error) {
	recalled, trace, err := s.self.Recaller.Recall(ctx, q)
	trace.Submit(s.self.Store())
	return recalled, nil, err
}

// insertion is an insert as REST and MCP hand it to insertOp, in the
// domain's types: the memory is a model.Memory (the typed data union, CID
// edges), not the wire's untyped Struct.
type insertion struct {
	Sona      string
	Kind      string
	AgentID   string
	Labels    map[string]string
	Dedup     *bool
	RequestID string
	// Memory builds and checks the memory; insertOp calls it once the
	// principal and the sona are checked, so a bad memory is refused
	// after them, whichever transport it came by.
	Memory func() (*model.Memory, error)
	// File, when set, is a file memory's content, stored with it.
	File []byte
}

// insertOp stores a memory into a sona without calling the model: dedup
// first, then an append through the sona's actor. created is false when
// nothing new was appended (a duplicate, or a memory already there).
func (s *Server) insertOp(ctx context.Context, req insertion) (resp *messages.InsertResponse, created bool, err error) {
	if err := requireScope(ctx, ScopeWrite); err != nil {
		return nil, false, err
	}
	rec, err := s.resolveSona(ctx, req.Sona)
	if err != nil {
		return nil, false, err
	}
	m, err := req.Memory()
	if err != nil {
		return nil, false, err
	}
	if err := base.ValidateAgentID(req.AgentID); err != nil {
		return nil, false, err
	}
	if req.RequestID != "" {
		if err := chain.ValidateRequestID(req.RequestID); err != nil {
			return nil, false, err
		}
	}
	file := req.File
	var inline cid.Cid
	if file != nil {
		if inline, err = model.SumCID(model.CodecRaw, file); err != nil {
			return nil, false, err
		}
	}
	if err := s.checkLinksSeen(ctx, m, inline); err != nil {
		return nil, false, err
	}
	dedup := s.cfg.Recall.Dedup
	if req.Dedup != nil {
		dedup = *req.Dedup
	}
	meta := &messages.MemoryMeta{Kind: req.Kind, AgentId: req.AgentID, Labels: req.Labels}
	p, dup, err := s.self.Chains.PrepareInsert(ctx, rec.Uuid, m, meta, dedup, file)
	if err != nil {
		return nil, false, err
	}
	if dup != nil {
		if err := s.self.Memories.ReinforceDuplicate(ctx, dup.Existing); err != nil {
			return nil, false, err
		}
		return &messages.InsertResponse{
			Cid: dup.Existing.String(), Deduplicated: true,
			Similarity: &dup.Similarity, Threshold: &dup.Threshold.Value,
		}, false, nil
	}
	if req.RequestID != "" {
		p.Request = &model.Request{ID: req.RequestID}
	}
	res, err := s.sys.Append(ctx, rec.Uuid, p)
	if err != nil {
		return nil, false, err
	}
	return &messages.InsertResponse{Cid: res.Cid, Seq: res.Seq, Existed: res.Seq == nil, Replayed: res.Replayed}, res.Seq != nil, nil
}

// intPtr is an optional int32 of a request as an optional int.
func intPtr(v *int32) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

// cidStrings renders CIDs as strings ([] for none).
func cidStrings(cs []cid.Cid) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}
