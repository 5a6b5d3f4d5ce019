package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	sonas, mems := s.self.Counts()
	h := &messages.Health{Status: "ok", Sonas: sonas, Memories: mems, Indexed: int64(s.self.Index().Len())}
	if err := s.self.Store().CheckSpace(); err != nil {
		h.Status, h.Reason = "degraded", proto.String("disk_full") // writes are refused; reads go on
	}
	writeJSON(w, http.StatusOK, h)
}

// parseCID reads a CID path or query value.
func parseCID(v string) (cid.Cid, error) {
	c, err := cid.Decode(v)
	if err != nil {
		return cid.Undef, badRequest("invalid_cid", "malformed CID %q: %v", v, err)
	}
	return c, nil
}

// sonaParam reads the sona of a route's path — its uuid, or a name that
// one sona the principal may use has, as POST /memories accepts — and
// checks the principal may use it.
func (s *Server) sonaParam(r *http.Request) (*messages.Sona, error) {
	return s.resolveSona(r.Context(), r.PathValue("uuid"))
}

func (s *Server) limit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return min(50, s.cfg.Server.MaxListLimit), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > s.cfg.Server.MaxListLimit {
		return 0, badRequest("invalid_limit", "limit must be an integer within 1..%d", s.cfg.Server.MaxListLimit)
	}
	return n, nil
}

// renderMemory turns a stored memory into its API form: its block fields
// as an export writes them, and its metadata as the principal of ctx may
// see it.
func (s *Server) renderMemory(ctx context.Context, c cid.Cid, m *model.Memory, meta *messages.MemoryMeta) (*messages.Memory, error) {
	e, err := transfer.ExportedMemory(c, m)
	if err != nil {
		return nil, err
	}
	return &messages.Memory{Cid: e.Cid, Data: e.Data, Timestamp: e.Timestamp, Edges: e.Edges, Meta: s.metaView(ctx, meta)}, nil
}

func (s *Server) loadRendered(ctx context.Context, c cid.Cid) (*messages.Memory, error) {
	m, meta, err := s.self.Memories.Get(c)
	if err != nil {
		return nil, err
	}
	return s.renderMemory(ctx, c, m, meta)
}

func (s *Server) getMemory(w http.ResponseWriter, r *http.Request) {
	c, err := parseCID(r.PathValue("cid"))
	if err != nil {
		s.fail(w, err)
		return
	}
	out, err := s.memoryOp(r.Context(), c)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// getEvaluation returns a memory's EUMAS evaluation: every archetype's
// metrics, justifications, annotations and priority, and the failures.
func (s *Server) getEvaluation(w http.ResponseWriter, r *http.Request) {
	c, err := parseCID(r.PathValue("cid"))
	if err != nil {
		s.fail(w, err)
		return
	}
	if err := s.allowMemory(r.Context(), c); err != nil {
		s.fail(w, err)
		return
	}
	e, err := s.self.Evals.Evaluation(c)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// listMemories lists all memories in CID order, or with ?sona= one sona's
// memories in chain order (the cursor is then an ACT seq).
func (s *Server) listMemories(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limit(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	cursor := r.URL.Query().Get("cursor")
	var ids []cid.Cid
	var next string
	if ref := r.URL.Query().Get("sona"); ref != "" {
		rec, err := s.resolveSona(r.Context(), ref)
		if err != nil {
			s.fail(w, err)
			return
		}
		if ids, next, err = s.chainPage(rec.Uuid, cursor, limit); err != nil {
			s.fail(w, err)
			return
		}
	} else {
		if err := requireUnscoped(r.Context(), "listing every memory (name one with ?sona=)"); err != nil {
			s.fail(w, err)
			return
		}
		if cursor != "" {
			if _, err := parseCID(cursor); err != nil {
				s.fail(w, badRequest("invalid_cursor", "cursor must be a memory CID from next_cursor, got %q", cursor))
				return
			}
		}
		page, err := s.self.Memories.List(cursor, limit)
		if err != nil {
			s.fail(w, err)
			return
		}
		ids, next = page.Items, page.Next
	}
	s.writeMemories(w, r, ids, next)
}

// chainPage reads a page of a sona's chain: the cursor is an ACT seq.
func (s *Server) chainPage(id, cursor string, limit int) ([]cid.Cid, string, error) {
	from, err := seqCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	page, err := s.self.Sonas.Chain(id, from, limit)
	if err != nil {
		return nil, "", err
	}
	ids := make([]cid.Cid, len(page.Items))
	for i, e := range page.Items {
		ids[i] = e.Memory
	}
	return ids, page.Next, nil
}

// seqCursor parses the cursor of a chain listing: an ACT seq, 0 when empty.
func seqCursor(cursor string) (int64, error) {
	if cursor == "" {
		return 0, nil
	}
	from, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || from < 0 {
		return 0, badRequest("invalid_cursor", "cursor of a chain listing is an ACT seq, got %q", cursor)
	}
	return from, nil
}

// writeMemories renders a page of memories.
func (s *Server) writeMemories(w http.ResponseWriter, r *http.Request, ids []cid.Cid, next string) {
	resp := &messages.ListMemoriesResponse{Items: []*messages.Memory{}}
	for _, c := range ids {
		m, err := s.loadRendered(r.Context(), c)
		if errors.Is(err, base.ErrForgotten) {
			continue // a chain keeps a forgotten memory's CID, not the memory (GET /forgotten lists it)
		}
		if err != nil {
			s.fail(w, err)
			return
		}
		resp.Items = append(resp.Items, m)
	}
	if next != "" {
		resp.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) getSona(w http.ResponseWriter, r *http.Request) {
	rec, err := s.sonaParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// getTiers shows the sona's MemoryOS tiers: STM pages, MTM segments
// hottest first with their pages, the work between the tiers, and the
// persona.
func (s *Server) getTiers(w http.ResponseWriter, r *http.Request) {
	rec, err := s.sonaParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	v, err := s.self.Tiers.View(rec.Uuid)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) listSonas(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limit(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	q := r.URL.Query()
	resp, unanswered, err := s.listSonasOp(r.Context(), q.Get("name"), q.Get("cursor"), limit)
	if err != nil {
		s.fail(w, err)
		return
	}
	setUnanswered(w, unanswered)
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) createSona(w http.ResponseWriter, r *http.Request) {
	var req messages.CreateSonaRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	rec, err := s.createSonaOp(r.Context(), req.Name, req.AllowDuplicate)
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Location", "/sona/"+rec.Uuid)
	writeJSON(w, http.StatusCreated, rec)
}

// chatRequest decodes a chat or query body (chatOp and queryOp check it).
func (s *Server) chatRequest(r *http.Request) (*messages.Sona, *messages.ChatRequest, error) {
	rec, err := s.sonaParam(r)
	if err != nil {
		return nil, nil, err
	}
	var req messages.ChatRequest
	if err := decode(r, &req); err != nil {
		return nil, nil, err
	}
	if err := requestID(r, &req.RequestId); err != nil {
		return nil, nil, err
	}
	return rec, &req, nil
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	rec, req, err := s.chatRequest(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	if req.Stream || acceptsEventStream(r) {
		s.chatStream(w, r, rec, req)
		return
	}
	ctx, unanswered := actors.CollectUnanswered(r.Context())
	resp, err := s.chatOp(ctx, rec, req)
	if err != nil {
		s.fail(w, err)
		return
	}
	setUnanswered(w, unanswered())
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	rec, req, err := s.chatRequest(r)
	if err == nil && req.Stream {
		err = badRequest("invalid", "stream is for chat only")
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	ctx, unanswered := actors.CollectUnanswered(r.Context())
	resp, err := s.queryOp(ctx, rec, req)
	if err != nil {
		s.fail(w, err)
		return
	}
	setUnanswered(w, unanswered())
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) recall(w http.ResponseWriter, r *http.Request) {
	rec, err := s.sonaParam(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	var req messages.RecallRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	recalled, unanswered, err := s.recallOp(r.Context(), rec, &req)
	if err != nil {
		s.fail(w, err)
		return
	}
	setUnanswered(w, unanswered)
	resp := &messages.RecallResponse{Memories: []*messages.RecalledMemory{}}
	for _, rc := range recalled {
		m, err := s.renderMemory(r.Context(), rc.CID, rc.Memory, rc.Meta)
		if err != nil {
			s.fail(w, err)
			return
		}
		out := &messages.RecalledMemory{Cid: m.Cid, Score: rc.Score, Via: rc.Via, Memory: m, Collapsed: cidStrings(rc.Collapsed)}
		if rc.Rank > 0 {
			out.Rank = proto.Int32(int32(rc.Rank))
		}
		if req.Explain {
			out.Explain = renderExplain(rc.Explain)
		}
		resp.Memories = append(resp.Memories, out)
	}
	writeJSON(w, http.StatusOK, resp)
}

func renderExplain(e recall.Explain) *messages.Explain {
	out := &messages.Explain{
		Dense: e.Evidence.Dense, Bm25: e.Evidence.BM25, Affinity: e.Evidence.Affinity,
		DenseRank: int32(e.Evidence.DenseRank), Bm25Rank: int32(e.Evidence.BM25Rank), AffinityRank: int32(e.Evidence.AffinityRank),
		Metric: e.Evidence.Metric, MetricRank: int32(e.Evidence.MetricRank),
		Context: e.Evidence.Context, Time: e.Evidence.Time, Speaker: e.Evidence.Speaker,
		Session: e.Evidence.Session, Feedback: e.Evidence.Feedback, FeedbackRank: int32(e.Evidence.FeedbackRank), Reply: e.Evidence.Reply,
		Relevance: e.Fused.Relevance, KindWeight: e.KindWeight, Recency: e.Recency,
		Importance: e.Importance, SonaSimilarity: e.SonaSimilarity, PriorUnit: e.PriorUnit, Coaccess: e.CoAccess,
		Contributions: &messages.Contributions{
			Dense: e.Contrib.Dense, Bm25: e.Contrib.BM25, Affinity: e.Contrib.Affinity, Metric: e.Contrib.Metric,
			Context: e.Contrib.Context, Time: e.Contrib.Time, Speaker: e.Contrib.Speaker,
			Session: e.Contrib.Session, Feedback: e.Contrib.Feedback, Reply: e.Contrib.Reply,
			Recency: e.Contrib.Recency, Importance: e.Contrib.Importance, SonaSimilarity: e.Contrib.SonaSimilarity, Path: e.Contrib.Path,
		},
	}
	if e.RerankRank > 0 {
		out.Rerank, out.RerankRank, out.Contributions.Rerank = proto.Float64(e.Rerank), proto.Int32(int32(e.RerankRank)), proto.Float64(e.Contrib.Rerank)
	}
	return out
}

// insert stores a memory into a sona without calling the model.
func (s *Server) insert(w http.ResponseWriter, r *http.Request) {
	var req messages.InsertRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	if err := requestID(r, &req.RequestId); err != nil {
		s.fail(w, err)
		return
	}
	resp, created, err := s.insertOp(r.Context(), insertFromRequest(&req))
	if err != nil {
		s.fail(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, resp)
}

// IdempotencyHeader carries a request's id (its idempotency key), as the
// request_id of the body does.
const IdempotencyHeader = "Idempotency-Key"

// requestID takes the Idempotency-Key header into a body's request_id
// (id), refusing the two when they differ.
func requestID(r *http.Request, id *string) error {
	k := r.Header.Get(IdempotencyHeader)
	if k == "" {
		return nil
	}
	if *id != "" && *id != k {
		return badRequest("invalid", "the %s header (%q) and request_id (%q) differ", IdempotencyHeader, k, *id)
	}
	*id = k
	return nil
}

// insertFromRequest is the insert a REST request describes: its data
// union, a JSON object on the wire, becomes model.Data once the principal
// and the sona are checked.
func insertFromRequest(req *messages.InsertRequest) insertion {
	return insertion{Sona: req.Sona, Kind: req.Kind, AgentID: req.AgentId, Labels: req.Labels, Dedup: req.Dedup, RequestID: req.RequestId,
		Memory: func() (*model.Memory, error) {
			if req.Data == nil {
				return nil, badRequest("invalid", `data is required, e.g. {"kind":"text","content":"..."}`)
			}
			data, err := transfer.DataFromStruct(req.Data)
			if err != nil {
				return nil, err
			}
			edges := make([]EdgeInput, len(req.Edges))
			for i, e := range req.Edges {
				edges[i] = EdgeInput{Target: e.GetTarget().GetCid(), Weight: e.Weight}
			}
			return newMemory(data, req.Timestamp, edges)
		}}
}

// newMemory is the memory of an insert: data, a timestamp and edges whose
// targets are CIDs still to parse. It is checked whole (model.Memory's
// Validate).
func newMemory(data model.Data, timestamp *int64, edges []EdgeInput) (*model.Memory, error) {
	if f := data.File; f != nil && f.Content.Prefix().Codec != model.CodecRaw {
		return nil, badRequest("invalid", "a file memory's content must be a raw block (a CID from POST /files), not %s", f.Content)
	}
	m := &model.Memory{Data: data, Timestamp: timestamp}
	for i, e := range edges {
		if e.Target == "" {
			return nil, badRequest("invalid", `edge %d needs a target {"/": "<cid>"}`, i)
		}
		c, err := parseCID(e.Target)
		if err != nil {
			return nil, err
		}
		m.Edges = append(m.Edges, model.Edge{Target: c, Weight: e.Weight})
	}
	model.SortEdges(m.Edges)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// putFile stores a file as a raw block; ?sona= (a uuid or unambiguous
// name) records it as that sona's file, which a sona-scoped token must
// name (its only sona when it has one).
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) {
	sona, err := s.fileSona(r.Context(), r.URL.Query().Get("sona"))
	if err != nil {
		s.fail(w, err)
		return
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(data) > s.cfg.Store.MaxBlockBytes {
		s.fail(w, &apiError{base.ErrTooLarge, "too_large",
			fmt.Sprintf("file of %d bytes exceeds the block limit of %d bytes", len(data), s.cfg.Store.MaxBlockBytes)})
		return
	}
	c, err := s.self.Chains.PutFile(r.Context(), data, sona)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, &messages.FileResponse{Cid: c.String(), Size: int64(len(data))})
}

// immutable marks a response as never changing (it is addressed by CID).
func immutable(w http.ResponseWriter, etag string) {
	w.Header().Set("Cache-Control", "public, max-age=29030400, immutable")
	w.Header().Set("ETag", `"`+etag+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// getFile serves a file: a raw block by its CID, or the content of a file
// memory with its mimeType and name.
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	c, err := parseCID(r.PathValue("cid"))
	if err != nil {
		s.fail(w, err)
		return
	}
	data, mimeType, name, err := s.fileOp(r.Context(), c)
	if err != nil {
		s.fail(w, err)
		return
	}
	immutable(w, c.String())
	// Files are user content served from the API's origin: never let one
	// run as a page of that origin.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.Header().Set("Content-Type", mimeType)
	if name != "" {
		w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": name}))
	}
	w.Write(data)
}

// unansweredHeader names the cluster members that did not answer a
// gathering request (a self-scope recall, GET /sonas/list) in time: the
// answer is made of the others'.
const unansweredHeader = "X-Memoria-Unanswered"

func setUnanswered(w http.ResponseWriter, members []string) {
	if len(members) > 0 {
		w.Header().Set(unansweredHeader, strings.Join(members, ","))
	}
}
