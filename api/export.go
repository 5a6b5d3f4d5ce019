package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// Routes that move a whole self (Living Memory's JSON export and its
// import) and XmetaV's anchor list.

// export streams the JSON export (or, with ?format=car, the CAR export:
// car.go) of one sona (?sona=uuid|name) or of every sona (?all=1). Errors
// found before the first byte are JSON errors; a failure after it cuts
// the response short, so a client never holds a complete-looking document
// that is not.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	format := q.Get("format")
	if format != "" && format != "json" && format != "car" {
		s.fail(w, badRequest("invalid", "format %q is not served: ask for json or car", format))
		return
	}
	all := false
	switch v := q.Get("all"); v {
	case "", "0", "false":
	case "1", "true":
		all = true
	default:
		s.fail(w, badRequest("invalid", "all must be 1 or 0, got %q", v))
		return
	}
	ref := q.Get("sona")
	if all == (ref != "") {
		s.fail(w, badRequest("invalid", "name what to export: ?sona=<uuid or name> or ?all=1"))
		return
	}
	sona := ""
	if ref != "" {
		rec, err := s.self.Sonas.Resolve(ref)
		if err != nil {
			s.fail(w, err)
			return
		}
		sona = rec.Uuid
	}
	if format == "car" {
		s.exportCAR(w, r, sona)
		return
	}
	jw := &jsonExport{rw: w}
	err := s.self.Transfer.Export(r.Context(), sona, jw)
	if err == nil {
		err = jw.finish()
	}
	if err != nil {
		if !jw.started {
			s.fail(w, err)
			return
		}
		if r.Context().Err() != nil { // the client left, or the transfer timeout passed
			s.log.Info("export stopped after its first byte: response cut short", "err", err)
		} else {
			s.log.Error("export failed after its first byte: response cut short", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
}

// jsonExport renders an export as one JSON object, a line per item.
type jsonExport struct {
	rw      http.ResponseWriter
	w       *bufio.Writer
	started bool
	section int  // index in memory.ExportSections of the open section
	first   bool // no item in the open section yet
}

func (j *jsonExport) Header(h *messages.ExportHeader) error {
	b, err := MarshalJSON(h)
	if err != nil {
		return err
	}
	j.rw.Header().Set("Content-Type", "application/json")
	j.rw.Header().Set("Content-Disposition", `attachment; filename="memoria-export.json"`)
	j.rw.WriteHeader(http.StatusOK)
	j.started = true
	j.w = bufio.NewWriterSize(j.rw, 64<<10)
	j.section = -1
	_, err = j.w.Write(b[:len(b)-1]) // the header's fields; the sections follow
	return err
}

// open closes the sections before section and opens it.
func (j *jsonExport) open(section string) error {
	idx := slices.Index(memory.ExportSections, section)
	if idx < j.section {
		return fmt.Errorf("api: export section %q after %q", section, memory.ExportSections[j.section])
	}
	for j.section < idx {
		if j.section >= 0 {
			j.w.WriteString("\n]")
		}
		j.section++
		fmt.Fprintf(j.w, ",\n%q: [", memory.ExportSections[j.section])
		j.first = true
	}
	return nil
}

func (j *jsonExport) Item(section string, m proto.Message) error {
	if err := j.open(section); err != nil {
		return err
	}
	b, err := MarshalJSON(m)
	if err != nil {
		return err
	}
	if j.first {
		j.w.WriteString("\n")
	} else {
		j.w.WriteString(",\n")
	}
	j.first = false
	_, err = j.w.Write(b)
	return err
}

func (j *jsonExport) finish() error {
	if err := j.open(memory.ExportSections[len(memory.ExportSections)-1]); err != nil {
		return err
	}
	j.w.WriteString("\n]}\n")
	return j.w.Flush()
}

// importExport imports a JSON export, or a CAR export (Content-Type
// application/vnd.ipld.car). The whole document is read and checked before
// anything is written.
func (s *Server) importExport(w http.ResponseWriter, r *http.Request) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == CARMediaType {
		s.importCAR(w, r)
		return
	}
	body, err := readJSON(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	if f, ok := peekFormat(body); ok && f != memory.ExportFormat {
		s.fail(w, badRequest("invalid", "format %q cannot be imported: this server reads %q", f, memory.ExportFormat))
		return
	}
	var doc messages.Export
	if err := UnmarshalJSON(body, &doc); err != nil {
		s.fail(w, badRequest("malformed_json", "not an export: %s", jsonProblem("the body", body, err)))
		return
	}
	res, err := s.sys.Import(r.Context(), &doc)
	if err != nil {
		s.fail(w, err)
		return
	}
	status := http.StatusOK
	if res.Appended > 0 || slices.ContainsFunc(res.Sonas, func(s *messages.ImportedSona) bool { return s.Created }) {
		status = http.StatusCreated
	}
	writeJSON(w, status, res)
}

// peekFormat reads the top-level "format" of a JSON object, which an
// export writes first, without parsing the rest when it comes first.
func peekFormat(body []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return "", false
		}
		if k == "format" {
			var f string
			if err := dec.Decode(&f); err != nil {
				return "", false
			}
			return f, true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

// anchors lists the anchor list in order; the cursor is the last
// anchor's position.
func (s *Server) anchors(w http.ResponseWriter, r *http.Request) {
	limit, err := s.limit(r)
	if err != nil {
		s.fail(w, err)
		return
	}
	var after uint64
	if c := r.URL.Query().Get("cursor"); c != "" {
		if after, err = strconv.ParseUint(c, 10, 64); err != nil {
			s.fail(w, badRequest("invalid_cursor", "cursor must be a next_cursor of this list, got %q", c))
			return
		}
	}
	page, err := s.self.Anchors.Page(after, limit)
	if err != nil {
		s.fail(w, err)
		return
	}
	resp := &messages.AnchorList{Items: []*messages.Anchor{}}
	for _, a := range page.Items {
		resp.Items = append(resp.Items, a.Proto())
	}
	if page.Next != "" {
		resp.NextCursor = &page.Next
	}
	writeJSON(w, http.StatusOK, resp)
}
