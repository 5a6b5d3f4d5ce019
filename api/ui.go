package api

// The web explorer: a static single-page UI at /ui/ (api/ui/, embedded in
// the binary; vanilla JS modules and CSS, no build step, nothing from a
// CDN) over the REST API, and the one read route it needs that the API did
// not have, GET /memory/{cid}/links.
//
// The UI's files hold no data, so they are public like /healthz: a browser
// cannot send a bearer token when it navigates to a page. Every data call
// the UI makes goes through the API with the token the user gives it, under
// the same policies, browser guard and limits as any other client. The
// files are read once, served from memory with a strong ETag (304 on
// If-None-Match), gzip when the browser takes it, and a content security
// policy that lets the page load only its own scripts and styles and talk
// only to its own origin.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

//go:embed ui
var uiFS embed.FS

// uiCSP is the content security policy of the UI's files.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// uiAsset is one file of the UI, ready to serve.
type uiAsset struct {
	body, gz    []byte // gz: nil when gzip does not make it smaller
	etag, ctype string
}

// uiAssets reads the embedded files once.
var uiAssets = sync.OnceValue(func() map[string]*uiAsset {
	out := map[string]*uiAsset{}
	err := fs.WalkDir(uiFS, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := uiFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &uiAsset{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: uiContentType(p)}
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		if b.Len() < len(body) {
			a.gz = b.Bytes()
		}
		out[strings.TrimPrefix(p, "ui/")] = a
		return nil
	})
	if err != nil { // the files are compiled in: a broken build
		panic("api: reading the embedded UI: " + err.Error())
	}
	return out
})

func uiContentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8" // module scripts need a JavaScript type
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// uiRoutes registers the web explorer and its read route.
func (s *Server) uiRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /ui/{file...}", s.uiFile)
	m.HandleFunc("GET /memory/{cid}/links", s.memoryLinks)
}

// uiFile serves one of the UI's files (index.html for /ui/).
func (s *Server) uiFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "" {
		name = "index.html"
	}
	a := uiAssets()[name]
	if a == nil {
		writeError(w, http.StatusNotFound, "not_found", "the web explorer has no file "+name)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes that a 304
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	body, etag := a.body, a.etag
	if a.gz != nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether Accept-Encoding takes gzip (with a q above 0).
func acceptsGzip(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		v, err := strconv.ParseFloat(q, 64)
		return err == nil && v > 0
	}
	return false
}

// memoryLinks returns a memory's typed associations and its co-access
// partners for ?agent_id= (default ""), strongest first: the neighbourhood
// the explorer's graph draws beside the edges. A sona-scoped token sees
// only the partners it may read, and no co-access at all: co-access is the
// self's learning from every sona's recalls (as importance is, which it is
// not shown either).
func (s *Server) memoryLinks(w http.ResponseWriter, r *http.Request) {
	c, err := parseCID(r.PathValue("cid"))
	if err != nil {
		s.fail(w, err)
		return
	}
	agent := r.URL.Query().Get("agent_id")
	if err := memory.ValidateAgentID(agent); err != nil {
		s.fail(w, err)
		return
	}
	ctx := r.Context()
	if err := s.allowMemory(ctx, c); err != nil {
		s.fail(w, err)
		return
	}
	if _, err := s.self.Memories.Meta(c); err != nil { // a CID stored nowhere is a 404, not an empty list
		s.fail(w, err)
		return
	}
	p := principalFrom(ctx)
	out := &messages.MemoryLinks{Cid: c.String(), AgentId: agent, Associations: []*messages.MemoryLink{}, Coaccess: []*messages.MemoryLink{}}
	assoc, err := s.self.Assoc.Associations(c)
	if err != nil {
		s.fail(w, err)
		return
	}
	var co []memory.Link
	if !p.SonaScoped() {
		if co, err = s.self.Assoc.CoAccess(agent, c); err != nil {
			s.fail(w, err)
			return
		}
	}
	for _, l := range assoc {
		ok, err := s.sees(p, l.Target)
		if err != nil {
			s.fail(w, err)
			return
		}
		if ok {
			out.Associations = append(out.Associations, linkView(l))
		}
	}
	for _, l := range co {
		out.Coaccess = append(out.Coaccess, linkView(l))
	}
	writeJSON(w, http.StatusOK, out)
}

func linkView(l memory.Link) *messages.MemoryLink {
	return &messages.MemoryLink{Target: &messages.Link{Cid: l.Target.String()}, Type: l.Type, Strength: l.Strength}
}
