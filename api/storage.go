package api

import (
	"context"
	"encoding/binary"
	"io"
	"net/http"

	"github.com/memoria-ai/memoria/internal/durable"

	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The store's upkeep (admin): POST /admin/gc runs a pass of the garbage
// collection, GET /admin/storage reports the store's size, POST
// /admin/backup streams a backup (memory/store/gc.go, backup.go).

func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	rep, err := s.self.Store().GC(r.Context(), true)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, GCReportMessage(rep))
}

func (s *Server) storage(w http.ResponseWriter, r *http.Request) {
	st, err := StorageStatus(r.Context(), s.self.Store())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// BackupContentType is the media type of a backup stream.
const BackupContentType = "application/vnd.memoria.backup"

// backup streams a backup of the store: full for an empty body, else
// incremental against the base the body names (messages.BackupRequest).
func (s *Server) backup(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, err)
		return
	}
	var bb *store.BackupBase
	if len(body) > 0 {
		var req messages.BackupRequest
		if err := UnmarshalJSON(body, &req); err != nil {
			s.fail(w, badRequest("malformed_json", "%s", jsonProblem("the body", body, err)))
			return
		}
		if len(req.KeyDigests) == 0 || len(req.KeyDigests)%8 != 0 || req.StoreId == "" {
			s.fail(w, badRequest("invalid", "an incremental backup needs the last backup's store_id, since_version and key_digests (8 bytes each)"))
			return
		}
		bb = &store.BackupBase{StoreID: req.StoreId, Version: req.SinceVersion, Digests: make([]uint64, len(req.KeyDigests)/8)}
		for i := range bb.Digests {
			bb.Digests[i] = binary.LittleEndian.Uint64(req.KeyDigests[i*8:])
		}
	}
	w.Header().Set("Content-Type", BackupContentType)
	cw := &durable.Counter{W: w}
	m, err := s.self.Store().Backup(r.Context(), cw, bb)
	if err == nil {
		s.log.Info("backup", "kind", m.Kind, "version", m.Version, "commits", m.Commits, "entries", m.Entries, "bytes", cw.N)
		return
	}
	if cw.N == 0 {
		w.Header().Del("Content-Type")
		s.fail(w, err)
		return
	}
	if r.Context().Err() != nil { // the client left, or the transfer timeout passed
		s.log.Info("backup stopped after its first byte: response cut short", "err", err)
	} else {
		s.log.Error("backup failed after its first byte: response cut short", "err", err)
	}
	panic(http.ErrAbortHandler)
}

// StorageStatus is the store's size and upkeep now (GET /admin/storage,
// and `memoria status` on a data directory).
func StorageStatus(ctx context.Context, st *store.Store) (*messages.StorageStatus, error) {
	disk, err := st.DiskUsage()
	if err != nil {
		return nil, err
	}
	spaces, err := st.Spaces(ctx)
	if err != nil {
		return nil, err
	}
	out := &messages.StorageStatus{Disk: diskMessage(disk), Spaces: spacesMessage(spaces), WritesRefused: st.CheckSpace() != nil}
	if err := st.View(func(r store.Reader) error {
		var err error
		if out.Commits, err = store.ReadU64(r, store.KeyCommits); err != nil {
			return err
		}
		out.Memseq, err = store.ReadU64(r, store.KeyMemSeq)
		return err
	}); err != nil {
		return nil, err
	}
	free, reserve, ok := st.FreeSpace()
	if ok {
		out.FreeBytes = int64(free)
	}
	out.ReserveBytes = int64(reserve)
	g := st.GCStats()
	out.Gc = &messages.GCStats{Passes: g.Passes, Rewritten: g.Rewritten, Skipped: g.Skipped, Failed: g.Failed, Reclaimed: g.Reclaimed}
	if g.Last != nil {
		out.Gc.Last = GCReportMessage(*g.Last)
	}
	return out, nil
}

// GCReportMessage renders a pass of the garbage collection.
func GCReportMessage(rep store.GCReport) *messages.GCReport {
	return &messages.GCReport{
		StartedAt:   rep.Started.UnixMilli(),
		TookSeconds: rep.Took.Seconds(),
		Compacted:   rep.Compacted,
		Rewritten:   int32(rep.Rewritten),
		Before:      diskMessage(rep.Before),
		After:       diskMessage(rep.After),
		Reclaimed:   rep.Reclaimed(),
		Spaces:      spacesMessage(rep.Spaces),
		Skipped:     rep.Skipped,
	}
}

func diskMessage(d store.DiskUsage) *messages.DiskUsage {
	return &messages.DiskUsage{Tables: d.Tables, ValueLog: d.ValueLog, Wal: d.WAL, Other: d.Other, Total: d.Total()}
}

func spacesMessage(spaces []store.SpaceUsage) []*messages.KeySpace {
	out := make([]*messages.KeySpace, len(spaces))
	for i, sp := range spaces {
		out[i] = &messages.KeySpace{Space: sp.Space, Keys: sp.Keys, Bytes: sp.Bytes, ValueLogBytes: sp.ValueLogBytes}
	}
	return out
}
