package memory

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
)

// The metadata snapshot (<data>/meta.snap) is what the open's scan of
// every memory's metadata took from it — for each memory, the fields
// recall's KnowPlain reads and, when its evaluation gives a metric
// profile, that evaluation (recall.TrimPlain, eumas.Store.TrimProfile; TestPlainFieldsAgreeWithProto, TestMetaSnapshotTakesWhatAFullScanTakes) —
// with the store's version of the view it was read in (store.ReadVersion).
// An open reads it and then only the metadata written after that version
// (store.IterOptions.Since: Badger passes over every table older than it),
// instead of every record: at 1M memories the scan was ~8 s of CPU before
// /healthz, about half a start's. Derived state: it is checked (CRC-32C),
// versioned, tied to the store (the insertion log's end and the memory
// there, the version no later than the store's) and to the metrics of the
// profiles; anything off and the open scans every record, as before, and
// writes it again. Deletions since are not read: a memory of the snapshot
// the vector index (caught up with the store first) no longer holds is
// counted only if its record is still there.
//
// Layout, integers big-endian: magic "MMETASNP", version u32 (3), store
// version u64, insertion-log end u64, uvarint length and CID bytes of the
// memory there, hash of the metric names u64, entries u64; each entry:
// uvarint length and CID bytes, a flag byte (1: its record has a profile),
// uvarint of its vector id + 1 when it had one (else 0: an open checks it
// against the index's key of that id, which is cheaper than looking the
// key up), uvarint length and the trimmed record; last the CRC-32C of all
// before.
const (
	metaSnapMagic   = "MMETASNP"
	metaSnapVersion = 3 // 3: the trimmed records hold what a score reads (stop 86)
	// metaSnapRewrite: an open whose snapshot is older than this many
	// changed records (or a tenth of the memories, when more) writes it
	// again, after a full scan in the background.
	metaSnapRewrite = 50_000
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MetaSnapshotPath is the metadata snapshot's file in data directory dir.
func MetaSnapshotPath(dir string) string { return filepath.Join(dir, "meta.snap") }

// metaSnapHead is what ties a snapshot to the store and the settings.
type metaSnapHead struct {
	version uint64 // the store's version of the scan's view
	logEnd  uint64
	logCID  []byte // the memory at logEnd (none when 0)
	metrics uint64
	entries uint64
}

// metricsHash identifies the profiles' metrics, in their order.
func metricsHash(names []string) uint64 {
	h := fnv.New64a()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// metaSnapHeadOf is the head of a snapshot of what r sees (ok false when
// its engine has no versions: no snapshot then).
func (s *Self) metaSnapHeadOf(r store.Reader) (metaSnapHead, bool, error) {
	v, ok := store.ReadVersion(r)
	if !ok {
		return metaSnapHead{}, false, nil
	}
	h := metaSnapHead{version: v, metrics: metricsHash(s.Evals.MetricNames())}
	end, err := chain.LogEnd(r)
	if err != nil {
		return h, false, err
	}
	h.logEnd = end
	if end > 0 {
		item, err := r.Item(chain.LogKey(end))
		if err != nil {
			return h, false, err
		}
		_, c, err := chain.LogEntry(item)
		if err != nil {
			return h, false, err
		}
		h.logCID = c.Bytes()
	}
	return h, true, nil
}

// metaSnapEntry appends memory key's entry, from its encoded metadata raw
// and its vector id (if isID), to dst.
func (s *Self) metaSnapEntry(dst, key, raw []byte, id uint64, isID bool) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	flag := len(dst)
	dst = append(dst, 0)
	if isID {
		dst = binary.AppendUvarint(dst, id+1)
	} else {
		dst = append(dst, 0)
	}
	// The trimmed record goes after a length written when it is known:
	// room for a 3-byte uvarint, moved if it is shorter.
	at := len(dst)
	dst = append(dst, 0, 0, 0)
	// (The profile's evaluation first: LoadProfile takes the first, and
	// TrimPlain's keeps only what the decay reads.)
	dst, prof, err := s.Evals.TrimProfile(dst, raw)
	if err != nil {
		return dst, err
	}
	dst, err = recall.TrimPlain(dst, raw)
	if err != nil {
		return dst, err
	}
	if prof {
		dst[flag] = 1
	}
	n := len(dst) - at - 3
	var l [binary.MaxVarintLen64]byte
	ln := binary.PutUvarint(l[:], uint64(n))
	if ln != 3 {
		copy(dst[at+ln:], dst[at+3:])
		dst = dst[:at+ln+n]
	}
	copy(dst[at:], l[:ln])
	return dst, nil
}

// writeMetaSnap writes the snapshot of head and the entries of parts (in
// turn) to path.
func writeMetaSnap(path string, head metaSnapHead, parts ...[]byte) error {
	var n uint64
	for _, p := range parts {
		for b := p; len(b) > 0; n++ {
			b = skipMetaSnapEntry(b)
		}
	}
	head.entries = n
	_, err := durable.Write(path, func(w io.Writer) error {
		crc := crc32.New(castagnoli)
		mw := io.MultiWriter(w, crc)
		b := append([]byte(metaSnapMagic), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(b[len(metaSnapMagic):], metaSnapVersion)
		b = binary.BigEndian.AppendUint64(b, head.version)
		b = binary.BigEndian.AppendUint64(b, head.logEnd)
		b = binary.AppendUvarint(b, uint64(len(head.logCID)))
		b = append(b, head.logCID...)
		b = binary.BigEndian.AppendUint64(b, head.metrics)
		b = binary.BigEndian.AppendUint64(b, head.entries)
		if _, err := mw.Write(b); err != nil {
			return err
		}
		for _, p := range parts {
			if _, err := mw.Write(p); err != nil {
				return err
			}
		}
		_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
		return err
	})
	return err
}

// skipMetaSnapEntry is what follows the well-formed entry b starts with.
func skipMetaSnapEntry(b []byte) []byte {
	k, n := binary.Uvarint(b)
	b = b[n+int(k)+1:]
	_, n = binary.Uvarint(b)
	b = b[n:]
	t, n := binary.Uvarint(b)
	return b[n+int(t):]
}

var errMetaSnap = errors.New("memory: metadata snapshot")

// readMetaSnap reads and checks the snapshot at path: its head and its
// entries.
func readMetaSnap(path string) (metaSnapHead, []byte, error) {
	var h metaSnapHead
	b, err := os.ReadFile(path)
	if err != nil {
		return h, nil, err
	}
	if len(b) < len(metaSnapMagic)+4+8+8+1+8+8+4 || string(b[:len(metaSnapMagic)]) != metaSnapMagic {
		return h, nil, fmt.Errorf("%w: not one", errMetaSnap)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return h, nil, fmt.Errorf("%w: its checksum does not match", errMetaSnap)
	}
	b = body[len(metaSnapMagic):]
	if v := binary.BigEndian.Uint32(b); v != metaSnapVersion {
		return h, nil, fmt.Errorf("%w: layout %d, this binary reads %d", errMetaSnap, v, metaSnapVersion)
	}
	b = b[4:]
	h.version, h.logEnd = binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	b = b[16:]
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l+16 {
		return h, nil, fmt.Errorf("%w: a bad head", errMetaSnap)
	}
	h.logCID = b[n : n+int(l)]
	b = b[n+int(l):]
	h.metrics, h.entries = binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])
	b = b[16:]
	// Every entry well formed, and as many as the head says.
	var count uint64
	for rest := b; len(rest) > 0; count++ {
		k, n := binary.Uvarint(rest)
		if n <= 0 || uint64(len(rest)-n) < k+1 {
			return h, nil, fmt.Errorf("%w: a bad entry", errMetaSnap)
		}
		rest = rest[n+int(k)+1:]
		if _, n = binary.Uvarint(rest); n <= 0 {
			return h, nil, fmt.Errorf("%w: a bad entry", errMetaSnap)
		}
		rest = rest[n:]
		t, n := binary.Uvarint(rest)
		if n <= 0 || uint64(len(rest)-n) < t {
			return h, nil, fmt.Errorf("%w: a bad entry", errMetaSnap)
		}
		rest = rest[n+int(t):]
	}
	if count != h.entries {
		return h, nil, fmt.Errorf("%w: %d entries, its head says %d", errMetaSnap, count, h.entries)
	}
	return h, b, nil
}

// fits reports why a snapshot of head cannot stand for the metadata of
// now (the head of what the open's view sees), or nil.
func (head metaSnapHead) fits(now metaSnapHead) error {
	switch {
	case head.version > now.version:
		return fmt.Errorf("%w: of version %d, the store's is %d", errMetaSnap, head.version, now.version)
	case head.metrics != now.metrics:
		return fmt.Errorf("%w: of other metrics", errMetaSnap)
	case head.logEnd > now.logEnd:
		return fmt.Errorf("%w: at insertion %d, the store's log ends at %d", errMetaSnap, head.logEnd, now.logEnd)
	}
	return nil
}

// loadMetaSnap takes the metadata's state from the snapshot and the
// records written after it, as scanMeta does from every record; ok is
// false, with why, when the snapshot does not fit (nothing is taken
// then). changed is how many records were written after it.
func (s *Self) loadMetaSnap(txn store.Reader, t *metaTaker, head metaSnapHead, entries []byte, now metaSnapHead) (n int64, changed int, why, err error) {
	if why := head.fits(now); why != nil {
		return 0, 0, why, nil
	}
	if head.logEnd > 0 {
		item, err := txn.Item(chain.LogKey(head.logEnd))
		if err != nil {
			return 0, 0, fmt.Errorf("%w: the insertion log's entry %d: %v", errMetaSnap, head.logEnd, err), nil
		}
		_, c, err := chain.LogEntry(item)
		if err != nil || !bytes.Equal(c.Bytes(), head.logCID) {
			return 0, 0, fmt.Errorf("%w: another memory at insertion %d", errMetaSnap, head.logEnd), nil
		}
	}
	// What was written since, first: it replaces the snapshot's entry.
	since := map[string]struct{}{}
	it := txn.NewIterator(store.IterOptions{Prefix: meta.Prefix, PrefetchValues: true, PrefetchSize: 100, Since: head.version})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		k := item.Key()[len(meta.Prefix):]
		c, err := cid.Cast(k)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("%w: metadata key: %v", base.ErrCorrupt, err)
		}
		err = item.Value(func(v []byte) error {
			t.take(c, v)
			return nil
		})
		if err != nil {
			return 0, 0, nil, err
		}
		since[string(k)] = struct{}{}
		n++
	}
	changed = len(since)
	for b := entries; len(b) > 0; {
		l, m := binary.Uvarint(b)
		kb := b[m : m+int(l)]
		b = b[m+int(l):]
		prof := b[0] == 1
		id, m := binary.Uvarint(b[1:])
		b = b[1+m:]
		l, m = binary.Uvarint(b)
		rec := b[m : m+int(l)]
		b = b[m+int(l):]
		key := unsafe.String(unsafe.SliceData(kb), len(kb)) // not kept
		if _, ok := since[key]; ok {
			continue
		}
		inIndex := false
		if k, ok := s.index.Key(id - 1); id > 0 && ok && k == key {
			s.Recaller.KnowPlainAt(id-1, rec, t.gen)
			inIndex = true
		} else {
			_, inIndex = s.Recaller.KnowPlainKey(key, rec, t.gen)
		}
		if !inIndex {
			// Forgotten since (deletions are not read), or a memory the
			// vector index lacks: counted if its record is there, so
			// that the open's check of the index against the count sees it.
			if ok, err := txn.Has(base.Join(meta.Prefix, kb)); err != nil {
				return 0, 0, nil, err
			} else if !ok {
				continue
			}
		}
		n++
		if prof {
			c, err := cid.Cast(kb)
			if err != nil {
				return 0, 0, fmt.Errorf("%w: a key: %v", errMetaSnap, err), nil
			}
			t.profile(c, rec)
		}
	}
	return n, changed, nil, nil
}
