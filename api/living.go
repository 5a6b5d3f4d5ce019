package api

import (
	"net/http"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/consensus"
	"github.com/memoria-ai/memoria/messages"
)

// Routes of the self's upkeep: heartbeat and dream (XmetaV), the backbone
// and its consensus (Living Memory).

// heartbeat runs one tick now; ?dream=1 forces dream mode.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	dream := false
	switch v := r.URL.Query().Get("dream"); v {
	case "", "0", "false":
	case "1", "true":
		dream = true
	default:
		s.fail(w, badRequest("invalid", "dream must be 1 or 0, got %q", v))
		return
	}
	rep, err := s.sys.Heartbeat(r.Context(), dream)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// compact sweeps every memory and folds the cold branches now.
func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	rep, err := s.sys.Compact(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) insights(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limit(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	items, err := s.self.Living.Insights(limit)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := &messages.InsightList{Items: make([]*messages.Insight, len(items))}
	for i, in := range items {
		out.Items[i] = in.View()
	}
	writeJSON(w, http.StatusOK, out)
}

// writeBackbone writes one agent's memory straight to the backbone.
func (s *Server) writeBackbone(w http.ResponseWriter, r *http.Request) {
	var req messages.WriteBackbone
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	res, err := s.sys.WriteBackbone(r.Context(), &req)
	if err != nil {
		s.fail(w, err)
		return
	}
	status := http.StatusCreated
	if res.Existed {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

func (s *Server) contribute(w http.ResponseWriter, r *http.Request) {
	var req messages.Contribute
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	res, err := s.sys.Contribute(r.Context(), &req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// listBackbone lists the backbone's memories in the order they were written.
func (s *Server) listBackbone(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limit(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	cursor := r.URL.Query().Get("cursor")
	id := s.self.Backbone.Sona()
	if id == "" {
		// Nothing written yet; a bad cursor is still a bad request.
		if _, err := seqCursor(cursor); err != nil {
			s.fail(w, err)
			return
		}
		s.writeMemories(w, r, nil, "")
		return
	}
	ids, next, err := s.chainPage(id, cursor, limit)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.writeMemories(w, r, ids, next)
}

// versionViews drops the versions' embeddings from an API reply.
func versionViews(vs []*messages.Version) []*messages.VersionView {
	out := make([]*messages.VersionView, len(vs))
	for i, v := range vs {
		out[i] = &messages.VersionView{AgentId: v.AgentId, Content: v.Content, At: v.At}
	}
	return out
}

// conflictView is a conflict as the API shows it, field by field: its
// versions without their embeddings.
func conflictView(c consensus.Conflict) *messages.ConflictView {
	v := &messages.ConflictView{ConflictId: c.ID, ConceptKey: c.ConceptKey, Versions: make([]*messages.VersionView, len(c.Versions)),
		Signal: c.Signal, Threshold: c.Threshold, CreatedAt: c.CreatedAt}
	for i, x := range c.Versions {
		v.Versions[i] = &messages.VersionView{AgentId: x.AgentID, Content: x.Content, At: x.At}
	}
	return v
}

func (s *Server) conflicts(w http.ResponseWriter, r *http.Request) {
	items, err := s.self.Consensus.Conflicts()
	if err != nil {
		s.fail(w, err)
		return
	}
	out := &messages.ConflictList{Items: make([]*messages.ConflictView, len(items))}
	for i, c := range items {
		out.Items[i] = conflictView(c)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) {
	items, err := s.self.Consensus.PendingConcepts()
	if err != nil {
		s.fail(w, err)
		return
	}
	out := &messages.PendingList{Items: make([]*messages.PendingView, len(items))}
	for i, p := range items {
		v := &messages.PendingView{ConceptKey: p.ConceptKey, Versions: versionViews(p.Versions),
			HighStakes: p.HighStakes, CreatedAt: p.CreatedAt}
		if p.ConflictId != "" {
			v.ConflictId = proto.String(p.ConflictId)
		}
		out.Items[i] = v
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	var req messages.Resolve
	if err := decode(r, &req); err != nil {
		s.fail(w, err)
		return
	}
	if req.ConflictId != "" && req.ConflictId != r.PathValue("id") {
		s.fail(w, badRequest("invalid", "conflict_id in the body differs from the path"))
		return
	}
	req.ConflictId = strings.TrimSpace(r.PathValue("id"))
	res, err := s.sys.Resolve(r.Context(), &req)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, &messages.MemoryRef{Cid: res.Cid})
}
