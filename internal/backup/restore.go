package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/llm/providers"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// Restored is what a restore restored.
type Restored struct {
	// Chain are the backups applied, the full one first.
	Chain []Entry
	// Sonas and Memories are the restored self's counts; ACTs the chain
	// steps walked and verified.
	Sonas, Memories, ACTs int64
	// How long each step took: the files' checksums, the store written
	// and checked against the snapshot, opened as the server opens it
	// (the full-text index rebuilt), its chains walked.
	Checked, Written, Opened, Walked time.Duration
}

// ErrNotEmpty: a restore writes only into a new or empty directory.
var ErrNotEmpty = errors.New("backup: the target is not empty")

// Restore restores the backups of in — the last full backup and the
// incremental ones after it, up to backup upto when it is above 0 — into
// the data directory out, which must not exist or be empty: it never
// deletes or overwrites data. In order, before anything is made live:
// every stream's size and SHA-256 against its manifest; then, writing a
// temporary directory beside out, every block against its CID and the
// result against the snapshot (store.Restore); then the store's own
// invariants, opening it as the server does (its tables, its acknowledged
// mark, every record it loads, its embedding space against cfg's
// embedder, the full-text index rebuilt) and walking every sona's chain
// from its head through its ACT blocks. Only then is the directory
// renamed to out.
func Restore(ctx context.Context, cfg config.Config, in, out string, upto int, log *slog.Logger) (Restored, error) {
	var res Restored
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := emptyOrAbsent(out); err != nil {
		return res, err
	}
	chain, err := pickChain(in, upto)
	if err != nil {
		return res, err
	}
	res.Chain = chain
	start := time.Now()
	step := func(d *time.Duration) { *d, start = time.Since(start), time.Now() }
	for _, e := range chain {
		if err := checkFile(in, e); err != nil {
			return res, err
		}
	}
	step(&res.Checked)

	out = filepath.Clean(out)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return res, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".restore-")
	if err != nil {
		return res, err
	}
	live := false
	defer func() {
		if !live {
			os.RemoveAll(tmp)
		}
	}()
	var files []io.Reader
	for _, e := range chain {
		f, err := os.Open(filepath.Join(in, e.File))
		if err != nil {
			return res, err
		}
		defer f.Close()
		files = append(files, f)
	}
	so := store.OptionsOf(cfg.Store)
	so.Logger = log
	if _, err := store.Restore(ctx, filepath.Join(tmp, "store"), so, files); err != nil {
		return res, err
	}
	step(&res.Written)

	cfg.DataDir = tmp
	cfg.Store.VerifyTables = true // whatever the configuration says
	emb, err := providers.Embedder(cfg, providers.Options{})
	if err != nil {
		return res, err
	}
	self, err := memory.Open(ctx, memory.Options{Config: cfg, Embedder: emb, Logger: log})
	if err != nil {
		return res, fmt.Errorf("backup: the restored store does not open: %w", err)
	}
	res.Sonas, res.Memories = self.Counts()
	step(&res.Opened)
	res.ACTs, err = VerifyChains(ctx, self)
	step(&res.Walked)
	if cerr := self.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("backup: the restored store: %w", err)
	}

	if err := emptyOrAbsent(out); err != nil { // again: it may have been made meanwhile
		return res, err
	}
	if err := durable.SyncDir(tmp); err != nil {
		return res, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return res, err
	}
	live = true
	return res, durable.SyncDir(filepath.Dir(out))
}

// emptyOrAbsent refuses a directory that holds anything (or a file).
func emptyOrAbsent(dir string) error {
	names, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s: %v", ErrNotEmpty, dir, err)
	case len(names) > 0:
		return fmt.Errorf("%w: %s holds %d entries; a restore writes only into a new or empty directory (it never replaces data)", ErrNotEmpty, dir, len(names))
	}
	return nil
}

// pickChain is the backups a restore up to upto applies: the last full
// one at or before it and those after it, each continuing the one before.
func pickChain(in string, upto int) ([]Entry, error) {
	entries, err := List(in)
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%w: %s holds no backup", base.ErrNotFound, in)
	}
	if upto > 0 {
		i := slices.IndexFunc(entries, func(e Entry) bool { return e.Seq == upto })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s holds no backup %d", base.ErrNotFound, in, upto)
		}
		entries = entries[:i+1]
	}
	start := -1
	for i, e := range entries {
		if e.Kind == "full" {
			start = i
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("%w backup: %s holds no full backup to start from", base.ErrCorrupt, in)
	}
	chain := entries[start:]
	for i := 1; i < len(chain); i++ {
		prev, e := chain[i-1], chain[i]
		if e.Seq != prev.Seq+1 || e.StoreID != prev.StoreID || e.Since != prev.Version {
			return nil, fmt.Errorf("%w backup: backup %d does not continue backup %d (a backup is missing, or they are of different stores)", base.ErrCorrupt, e.Seq, prev.Seq)
		}
	}
	return chain, nil
}

// checkFile checks a backup's stream against its manifest's size and
// checksum.
func checkFile(in string, e Entry) error {
	f, err := os.Open(filepath.Join(in, e.File))
	if err != nil {
		return fmt.Errorf("%w backup: backup %d: %v", base.ErrCorrupt, e.Seq, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != e.Bytes || sum != e.SHA256 {
		return fmt.Errorf("%w backup: %s is %d bytes with SHA-256 %s; its manifest says %d bytes, %s", base.ErrCorrupt, e.File, n, sum, e.Bytes, e.SHA256)
	}
	return nil
}

// VerifyChains walks every sona's chain from its head back through its
// ACT blocks: each decodes, names its sona, counts its seq down by one to
// 0 with prev null only there, matches the chain index, and points at a
// stored memory that verifies (or a forgotten one, whose tombstone is
// stored); the chain is as long as the sona says. It
// returns the ACTs walked.
func VerifyChains(ctx context.Context, self *memory.Self) (int64, error) {
	var acts int64
	cursor := ""
	for {
		page, err := self.Sonas.List(cursor, 1000)
		if err != nil {
			return acts, err
		}
		for _, rec := range page.Items {
			n, err := verifyChain(ctx, self, rec)
			if err != nil {
				return acts, fmt.Errorf("sona %s (%s): %w", rec.Name, rec.Uuid, err)
			}
			acts += n
		}
		if page.Next == "" {
			return acts, nil
		}
		cursor = page.Next
	}
}

func verifyChain(ctx context.Context, self *memory.Self, stored *messages.Sona) (int64, error) {
	rec, err := model.SonaOf(stored)
	if err != nil {
		return 0, err
	}
	sona, length, head := rec.UUID, rec.Length, rec.Head
	if (head == nil) != (length == 0) {
		return 0, fmt.Errorf("%w: its head and its length (%d) disagree", base.ErrCorrupt, length)
	}
	if head == nil {
		return 0, nil
	}
	index := map[int64]chain.Entry{}
	for from := int64(0); ; {
		page, err := self.Sonas.Chain(sona, from, 1000)
		if err != nil {
			return 0, err
		}
		for _, e := range page.Items {
			index[e.Seq] = e
		}
		if page.Next == "" {
			break
		}
		if from, err = strconv.ParseInt(page.Next, 10, 64); err != nil {
			return 0, err
		}
	}
	if int64(len(index)) != length {
		return 0, fmt.Errorf("%w: its chain index holds %d ACTs, its length is %d", base.ErrCorrupt, len(index), length)
	}
	at := *head
	for seq := length - 1; seq >= 0; seq-- {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		block, err := self.Block(at)
		if err != nil {
			return 0, fmt.Errorf("ACT %d (%s): %w", seq, at, err)
		}
		act, err := model.DecodeAct(block)
		if err != nil {
			return 0, fmt.Errorf("%w: ACT %d (%s): %v", base.ErrCorrupt, seq, at, err)
		}
		e := index[seq]
		switch {
		case act.Sona != sona || act.Seq != seq:
			return 0, fmt.Errorf("%w: ACT %s is seq %d of sona %s, want seq %d of this sona", base.ErrCorrupt, at, act.Seq, act.Sona, seq)
		case !e.Act.Equals(at) || !e.Memory.Equals(act.Memory):
			return 0, fmt.Errorf("%w: ACT %d: the chain index names %s (memory %s), the chain %s (memory %s)", base.ErrCorrupt, seq, e.Act, e.Memory, at, act.Memory)
		case (act.Prev == nil) != (seq == 0):
			return 0, fmt.Errorf("%w: ACT %d: prev is null only at seq 0", base.ErrCorrupt, seq)
		}
		// A forgotten memory (its tombstone in the backup) is no damage:
		// the ACT keeps its CID, its bytes are gone.
		if _, _, err := self.Memories.Get(act.Memory); err != nil && !errors.Is(err, base.ErrForgotten) {
			return 0, fmt.Errorf("ACT %d: memory %s: %w", seq, act.Memory, err)
		}
		if act.Prev != nil {
			at = *act.Prev
		}
	}
	return length, nil
}
