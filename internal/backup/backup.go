// Package backup keeps a directory of backups of a Memoria store — a full
// backup and the incremental ones that continue it, each a stream (the
// format of memory/store/backup.go) and its manifest — and restores them
// into a new data directory, verified before it is made live.
//
//	DIR/000001-full.mbak   the stream
//	DIR/000001.json        its manifest: the stream's own (store.BackupManifest)
//	                       plus its sequence number, file, size and SHA-256
//	DIR/000002-incr.mbak   an incremental backup continuing 000001
//	DIR/000002.json
//
// A backup is written to DIR/.NNNNNN.partial, checked as it arrives
// (store.ReadBackup: framing, checksum, every block against its CID) and
// renamed into place when whole; its manifest is written last, so a
// backup without its manifest does not exist.
package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Entry is one backup of a directory: its manifest file.
type Entry struct {
	Seq int `json:"seq"`
	// File is the stream's name in the directory, Bytes its size and
	// SHA256 its checksum (hex).
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	store.BackupManifest
}

var manifestName = regexp.MustCompile(`^(\d{6})\.json$`)

// List reads the backups of dir, by sequence number (none when dir does
// not exist).
func List(dir string) ([]Entry, error) {
	names, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, n := range names {
		m := manifestName.FindStringSubmatch(n.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n.Name()))
		if err != nil {
			return nil, err
		}
		var e Entry
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("%w backup: %s does not decode: %v", base.ErrCorrupt, n.Name(), err)
		}
		if seq, _ := strconv.Atoi(m[1]); e.Seq != seq || e.Format != store.BackupFormat {
			return nil, fmt.Errorf("%w backup: %s is not the manifest of backup %d in format %s", base.ErrCorrupt, n.Name(), seq, store.BackupFormat)
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Seq - b.Seq })
	return out, nil
}

// Source writes a backup stream to w: a full one for a nil base, else
// one continuing base.
type Source func(ctx context.Context, base *store.BackupBase, w io.Writer) error

// FromStore takes backups of an open store (`memoria backup --data`).
func FromStore(st *store.Store) Source {
	return func(ctx context.Context, bb *store.BackupBase, w io.Writer) error {
		_, err := st.Backup(ctx, w, bb)
		return err
	}
}

// FromServer takes backups from a server (POST /admin/backup).
func FromServer(c *client.Client) Source {
	return func(ctx context.Context, bb *store.BackupBase, w io.Writer) error {
		var req *messages.BackupRequest
		if bb != nil {
			req = &messages.BackupRequest{StoreId: bb.StoreID, SinceVersion: bb.Version, KeyDigests: make([]byte, 0, 8*len(bb.Digests))}
			for _, d := range bb.Digests {
				req.KeyDigests = binary.LittleEndian.AppendUint64(req.KeyDigests, d)
			}
		}
		rc, err := c.Backup(ctx, req)
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(w, rc)
		return err
	}
}

// Take writes a new backup into dir (created if needed) from src: an
// incremental one continuing the last backup of dir, or a full one when
// full is set or dir holds none.
func Take(ctx context.Context, dir string, full bool, src Source) (Entry, error) {
	entries, err := List(dir)
	if err != nil {
		return Entry{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Entry{}, err
	}
	e := Entry{Seq: 1}
	var bb *store.BackupBase
	if n := len(entries); n > 0 {
		last := entries[n-1]
		e.Seq = last.Seq + 1
		if !full {
			if bb, err = baseOf(dir, last); err != nil {
				return e, err
			}
		}
	}
	kind := "full"
	if bb != nil {
		kind = "incr"
	}
	e.File = fmt.Sprintf("%06d-%s.mbak", e.Seq, kind)
	partial := filepath.Join(dir, fmt.Sprintf(".%06d.partial", e.Seq))
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return e, fmt.Errorf("another backup into %s is running, or one was cut short: remove %s if none runs", dir, partial)
	}
	if err != nil {
		return e, err
	}
	keep := false
	defer func() {
		f.Close()
		if !keep {
			os.Remove(partial)
		}
	}()

	pr, pw := io.Pipe()
	srcErr := make(chan error, 1)
	go func() {
		err := src(ctx, bb, pw)
		pw.CloseWithError(err)
		srcErr <- err
	}()
	sum := sha256.New()
	counted := &durable.Counter{W: io.MultiWriter(f, sum)}
	m, _, err := store.ReadBackup(io.TeeReader(pr, counted), nil)
	pr.CloseWithError(errStreamRead) // stops src if it still writes
	if serr := <-srcErr; serr != nil && err != nil && !errors.Is(serr, errStreamRead) {
		return e, serr // the source's failure (the server's answer) says more than the cut it left
	}
	if err != nil {
		return e, err
	}
	switch {
	case bb == nil && m.Kind != "full":
		return e, fmt.Errorf("%w backup: asked for a full backup, got %s", base.ErrCorrupt, m.Kind)
	case bb != nil && (m.Kind != "incremental" || m.StoreID != bb.StoreID || m.Since != bb.Version):
		return e, fmt.Errorf("%w backup: asked for an incremental backup of store %s since version %d, got a %s backup of store %s since %d",
			base.ErrCorrupt, bb.StoreID, bb.Version, m.Kind, m.StoreID, m.Since)
	}
	if err := f.Sync(); err != nil {
		return e, err
	}
	if err := f.Close(); err != nil {
		return e, err
	}
	e.Bytes, e.SHA256, e.BackupManifest = counted.N, hex.EncodeToString(sum.Sum(nil)), m
	if err := os.Rename(partial, filepath.Join(dir, e.File)); err != nil {
		return e, err
	}
	keep = true
	js, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return e, err
	}
	if _, err := durable.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.json", e.Seq)), bytes.NewReader(append(js, '\n'))); err != nil {
		return e, err
	}
	return e, durable.SyncDir(dir)
}

// errStreamRead stops a source that writes past what the reader took.
var errStreamRead = errors.New("backup: the stream was read")

// baseOf is what an incremental backup continuing e needs: its store,
// version and key digests (read from its stream).
func baseOf(dir string, e Entry) (*store.BackupBase, error) {
	f, err := os.Open(filepath.Join(dir, e.File))
	if err != nil {
		return nil, fmt.Errorf("backup: the last backup's stream: %w", err)
	}
	defer f.Close()
	d, err := store.ReadBackupDigests(f, e.BackupManifest)
	if err != nil {
		return nil, fmt.Errorf("backup: %s: %w", e.File, err)
	}
	return &store.BackupBase{StoreID: e.StoreID, Version: e.Version, Digests: d}, nil
}
