package store

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/base"
)

// Online backups of the store, full and incremental, and their restore.
//
// A backup is one stream, read from one snapshot (a Badger read
// transaction: everything committed before it began, nothing after,
// while writes go on):
//
//	"MEMORIA-BACKUP/1\n"
//	'S' key value        an entry to set (uvarint lengths before each)
//	'L' bucket keys…     every key of one bucket of the snapshot (incremental)
//	'D' digests          the key digest of each bucket of the snapshot
//	'E' manifest         JSON (BackupManifest), its Data the SHA-256 of every byte before the JSON
//
// A full backup sets every entry. An incremental one, taken against the
// last backup (its BackupBase), sets the entries written since that
// backup's snapshot (Badger's versions say which). Deletions leave no
// trace Badger is sure to keep (a compaction drops a deletion marker once
// nothing older remains below it), so they are found by the keys
// themselves: the keys are spread over buckets by hash, each bucket has a
// digest (the sum of its keys' hashes), and every bucket whose digest
// moved since the base is listed whole ('L'), so that a restore drops the
// keys of that bucket the list does not name. A small change moves a few
// buckets of a few dozen keys.
//
// The manifest records the snapshot's commit count and insertion-log end
// (what the acknowledged mark of a restored store starts from) and a
// digest of every entry of the snapshot (State), which a restore checks
// its result against: the restored store holds exactly the snapshot.
// Values of 64 KiB and more (file blocks, in the value log) enter State
// by their key alone, so that an incremental backup reads no value it
// does not send; their bytes are checked against their CIDs instead, and
// the stream's and its file's checksums cover them.

// BackupFormat is the format of the stream and its manifest.
const BackupFormat = "memoria-backup/1"

const backupMagic = "MEMORIA-BACKUP/1\n"

// Record tags.
const (
	recSet    = 'S'
	recList   = 'L'
	recDigest = 'D'
	recEnd    = 'E'
)

// Limits a reader holds a stream to before allocating what it claims.
const (
	maxBackupKey   = 1 << 16
	maxBackupValue = 64 << 20
	maxBuckets     = 1 << 20
	minBuckets     = 256
	keysPerBucket  = 32
)

// BackupBase is the backup an incremental backup continues: the last of
// its chain.
type BackupBase struct {
	// StoreID is the store it backed up (Store.ID).
	StoreID string
	// Version is its snapshot's version (BackupManifest.Version).
	Version uint64
	// Digests are its snapshot's key digests by bucket (its 'D' record).
	Digests []uint64
}

// BackupManifest describes a backup: the stream's last record.
type BackupManifest struct {
	Format  string `json:"format"`
	StoreID string `json:"store_id"`
	// Kind is "full" or "incremental".
	Kind string `json:"kind"`
	// Since is, for an incremental backup, its base's Version: it holds
	// what was written after it.
	Since uint64 `json:"since_version,omitempty"`
	// Version is the snapshot's version (Badger's read timestamp).
	Version   uint64    `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	// Commits and MemSeq are the store's commit count and insertion-log
	// end in the snapshot: every write acknowledged before the backup
	// began is covered.
	Commits uint64 `json:"commits"`
	MemSeq  uint64 `json:"memseq"`
	// Keys are the snapshot's keys; Entries the entries the stream sets,
	// Blocks how many of them are blocks; KeyLists the buckets listed.
	Keys     int64 `json:"keys"`
	Entries  int64 `json:"entries"`
	Blocks   int64 `json:"blocks"`
	KeyLists int64 `json:"key_lists"`
	Buckets  int   `json:"buckets"`
	// State is the digest of every entry of the snapshot (hex).
	State string `json:"state"`
	// DigestsAt is the offset of the 'D' record in the stream.
	DigestsAt int64 `json:"digests_at"`
	// Data is the SHA-256 of the stream up to its manifest's JSON (hex).
	Data string `json:"data_sha256"`
}

// IDFileName holds the store's identity, beside Badger's files: written
// by the first backup, never restored (a restored store is another store,
// whose backups start a chain of their own).
const IDFileName = "memoria.id"

// ID is the store's identity (IDFileName), made on first use.
func (s *Store) ID() (string, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	path := filepath.Join(s.dir, IDFileName)
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); len(id) == 32 {
			return id, nil
		}
		return "", fmt.Errorf("%w store: %s does not hold a store identity", base.ErrCorrupt, IDFileName)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [16]byte
	if _, err := crand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	return id, writeSynced(path, []byte(id+"\n"))
}

// keyHash gives a key's bucket selector and its digest addend.
func keyHash(k []byte) (sel, add uint64) {
	h := sha256.Sum256(k)
	return binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16])
}

// stateDigest sums entry hashes lane by lane (an order-free digest of a
// set of entries).
type stateDigest [4]uint64

// add counts the entry k, v; a value of 64 KiB or more (large) counts by
// its key alone.
func (d *stateDigest) add(h hash.Hash, k, v []byte, large bool) {
	h.Reset()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
	h.Write(k)
	if large {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
		h.Write(v)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	for i := range d {
		d[i] += binary.LittleEndian.Uint64(sum[i*8:])
	}
}

func (d stateDigest) String() string {
	b := make([]byte, 0, 32)
	for _, x := range d {
		b = binary.BigEndian.AppendUint64(b, x)
	}
	return hex.EncodeToString(b)
}

// largeValue: a value that enters the state digest by its key alone. The
// size is Badger's estimate for a value in the value log (a few bytes
// off), hence the margin: the same value classes alike in any store.
func largeValue(size int64) bool { return size >= valueThreshold-64 }

// largeItem is largeValue of item's value. The size Badger gives of a
// value in its value log is an estimate (its entry header's length is
// not kept), and a value of any size may be there (valueLogSpaces), so
// one near the bound is read for its length: a value classes alike
// wherever a store keeps it.
func largeItem(item *badger.Item) (bool, error) {
	size := item.ValueSize()
	if bound := int64(valueThreshold - 64); size < bound-16 || size >= bound+16 {
		return largeValue(size), nil
	}
	n := 0
	err := item.Value(func(v []byte) error { n = len(v); return nil })
	return largeValue(int64(n)), classifyBadger(err)
}

// skipInBackup are keys a backup leaves out: the marker a pass of the
// collection writes and drops in one operation (gc.go).
func skipInBackup(k []byte) bool { return bytes.Equal(k, keyFlush) }

// backupWriter frames records and hashes what it writes.
type backupWriter struct {
	w   *bufio.Writer
	sum hash.Hash
	n   int64
	err error
	buf [binary.MaxVarintLen64]byte
}

func (b *backupWriter) write(p []byte) {
	if b.err != nil {
		return
	}
	_, b.err = b.w.Write(p)
	b.sum.Write(p)
	b.n += int64(len(p))
}

func (b *backupWriter) uvarint(x uint64) { b.write(b.buf[:binary.PutUvarint(b.buf[:], x)]) }

func (b *backupWriter) bytes(p []byte) {
	b.uvarint(uint64(len(p)))
	b.write(p)
}

// Backup writes a backup of the store to w from one snapshot, while
// writes go on: a full one, or with base an incremental one holding what
// changed since base (see the file's comment). Nothing is written to w
// before base is checked. A block whose bytes do not match its CID fails
// the backup (ErrCorrupt), as does any value that cannot be read.
func (s *Store) Backup(ctx context.Context, w io.Writer, bb *BackupBase) (BackupManifest, error) {
	m := BackupManifest{Format: BackupFormat, Kind: "full"}
	db := s.DB()
	if db == nil {
		return m, fmt.Errorf("%w: only a store on disk can be backed up", base.ErrInvalid)
	}
	id, err := s.ID()
	if err != nil {
		return m, err
	}
	m.StoreID = id
	buckets := maxBuckets
	if bb != nil {
		n := len(bb.Digests)
		switch {
		case bb.StoreID != id:
			return m, fmt.Errorf("%w: the backup to continue is of store %s, this is store %s: take a full backup", base.ErrInvalid, bb.StoreID, id)
		case n < minBuckets || n > maxBuckets || n&(n-1) != 0:
			return m, fmt.Errorf("%w: the backup to continue has %d key digests, want a power of two within %d..%d", base.ErrInvalid, n, minBuckets, maxBuckets)
		}
		m.Kind, m.Since, buckets = "incremental", bb.Version, n
	}
	txn, done := s.eng.(*badgerEngine).read(false)
	defer done()
	m.Version = txn.ReadTs()
	if bb != nil && bb.Version > m.Version {
		return m, fmt.Errorf("%w: the backup to continue is of version %d, the store is at %d: take a full backup", base.ErrInvalid, bb.Version, m.Version)
	}
	m.CreatedAt = s.gc.clock.Now().UTC()
	r := badgerReader{txn: txn}
	if m.Commits, err = ReadU64(r, KeyCommits); err != nil {
		return m, err
	}
	if m.MemSeq, err = ReadU64(r, KeyMemSeq); err != nil {
		return m, err
	}

	bw := &backupWriter{w: bufio.NewWriterSize(w, 1<<20), sum: sha256.New()}
	bw.write([]byte(backupMagic))
	digests := make([]uint64, buckets)
	var state stateDigest
	h := sha256.New()
	it := txn.NewIterator(badger.IteratorOptions{})
	var val []byte
	for it.Rewind(); it.Valid(); it.Next() {
		if m.Keys%4096 == 0 {
			if err := ctx.Err(); err != nil {
				it.Close()
				return m, err
			}
		}
		item := it.Item()
		k := item.Key()
		if skipInBackup(k) {
			continue
		}
		m.Keys++
		sel, add := keyHash(k)
		digests[sel&uint64(buckets-1)] += add
		send := bb == nil || item.Version() > bb.Version
		large, err := largeItem(item)
		if err != nil {
			it.Close()
			return m, fmt.Errorf("memory: backup: reading %q: %w", k, err)
		}
		if !send && large {
			state.add(h, k, nil, true)
			continue
		}
		if val, err = item.ValueCopy(val[:0]); err != nil {
			it.Close()
			return m, fmt.Errorf("memory: backup: reading %q: %w", k, classifyBadger(err))
		}
		state.add(h, k, val, large)
		if !send {
			continue
		}
		if bytes.HasPrefix(k, PrefixBlock) {
			if err := verifyBlockKey(k, val); err != nil {
				it.Close()
				return m, err
			}
			m.Blocks++
		}
		bw.write([]byte{recSet})
		bw.bytes(k)
		bw.bytes(val)
		m.Entries++
		if bw.err != nil {
			it.Close()
			return m, bw.err
		}
	}
	it.Close()
	if bb == nil {
		buckets = bucketsFor(m.Keys)
		digests = foldDigests(digests, buckets)
	} else if err := s.backupKeyLists(ctx, txn, bw, digests, bb.Digests, &m); err != nil {
		return m, err
	}
	m.Buckets = buckets
	m.State = state.String()
	m.DigestsAt = bw.n
	bw.write([]byte{recDigest})
	bw.uvarint(uint64(buckets))
	for _, d := range digests {
		bw.write(binary.LittleEndian.AppendUint64(nil, d))
	}
	bw.write([]byte{recEnd})
	m.Data = hex.EncodeToString(bw.sum.Sum(nil))
	js, err := json.Marshal(m)
	if err != nil {
		return m, err
	}
	bw.bytes(js)
	if bw.err != nil {
		return m, bw.err
	}
	return m, bw.w.Flush()
}

// backupKeyLists writes, for every bucket whose key digest moved since
// the base, the bucket's keys: a second walk of the snapshot, reading no
// value.
func (s *Store) backupKeyLists(ctx context.Context, txn *badger.Txn, bw *backupWriter, now, was []uint64, m *BackupManifest) error {
	moved := map[uint64][][]byte{}
	for b := range now {
		if now[b] != was[b] {
			moved[uint64(b)] = nil
		}
	}
	if len(moved) == 0 {
		return nil
	}
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k := it.Item().Key()
		if skipInBackup(k) {
			continue
		}
		sel, _ := keyHash(k)
		b := sel & uint64(len(now)-1)
		if keys, ok := moved[b]; ok {
			moved[b] = append(keys, it.Item().KeyCopy(nil))
		}
	}
	for _, b := range slices.Sorted(maps.Keys(moved)) {
		bw.write([]byte{recList})
		bw.uvarint(b)
		bw.uvarint(uint64(len(moved[b])))
		for _, k := range moved[b] {
			bw.bytes(k)
		}
		m.KeyLists++
	}
	return bw.err
}

// bucketsFor is the bucket count of a full backup of n keys: about
// keysPerBucket keys a bucket, a power of two.
func bucketsFor(n int64) int {
	want := max(n/keysPerBucket, minBuckets)
	b := 1 << bits.Len64(uint64(want-1))
	return min(b, maxBuckets)
}

// foldDigests folds digests (of maxBuckets buckets) into n buckets: a
// key's bucket is its selector's low bits.
func foldDigests(d []uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i, x := range d {
		out[i&(n-1)] += x
	}
	return out
}

// verifyBlockKey checks a block's bytes against the multihash its key
// holds.
func verifyBlockKey(k, v []byte) error {
	mh := k[len(PrefixBlock):]
	dec, err := multihash.Decode(mh)
	if err != nil {
		return fmt.Errorf("%w: block key %x: %v", base.ErrCorrupt, k, err)
	}
	sum, err := multihash.Sum(v, dec.Code, dec.Length)
	if err != nil || !bytes.Equal(sum, mh) {
		return fmt.Errorf("%w: block %s: its bytes do not match its hash", base.ErrCorrupt, multihash.Multihash(mh).B58String())
	}
	return nil
}

// BackupRecord is one record of a backup stream, as ReadBackup hands it
// over: an entry to set (Key, Value) or a bucket's key list (Bucket,
// Keys). The slices are the reader's own: it does not reuse them.
type BackupRecord struct {
	Set        bool
	Key, Value []byte
	Bucket     uint64
	Keys       [][]byte
}

// ReadBackup reads a backup stream to its end, checking it as it goes:
// its framing and lengths, every block against its CID, the checksum of
// its data, and that nothing follows its manifest. visit (if not nil)
// gets each entry and key list. A damaged or truncated stream is
// ErrCorrupt.
func ReadBackup(r io.Reader, visit func(*BackupRecord) error) (BackupManifest, []uint64, error) {
	var m BackupManifest
	br := &backupReader{r: bufio.NewReaderSize(r, 1<<20), sum: sha256.New()}
	magic := make([]byte, len(backupMagic))
	if br.full(magic); br.err != nil || string(magic) != backupMagic {
		return m, nil, corruptBackup("not a Memoria backup (it does not start with %q)", strings.TrimSpace(backupMagic))
	}
	var digests []uint64
	var digestsAt int64
	for {
		at := br.n
		tag := br.byte()
		if br.err != nil {
			return m, nil, br.fail("a record tag")
		}
		switch tag {
		case recSet:
			rec := &BackupRecord{Set: true, Key: br.bytes(maxBackupKey), Value: br.bytes(maxBackupValue)}
			if br.err != nil {
				return m, nil, br.fail("an entry")
			}
			if bytes.HasPrefix(rec.Key, PrefixBlock) {
				if err := verifyBlockKey(rec.Key, rec.Value); err != nil {
					return m, nil, fmt.Errorf("memory: backup at byte %d: %w", at, err)
				}
			}
			if visit != nil {
				if err := visit(rec); err != nil {
					return m, nil, err
				}
			}
		case recList:
			rec := &BackupRecord{Bucket: br.uvarint()}
			n := br.uvarint()
			if br.err == nil && n > 1<<24 {
				br.err = fmt.Errorf("a key list of %d keys", n)
			}
			for i := uint64(0); i < n && br.err == nil; i++ {
				rec.Keys = append(rec.Keys, br.bytes(maxBackupKey))
			}
			if br.err != nil {
				return m, nil, br.fail("a key list")
			}
			if visit != nil {
				if err := visit(rec); err != nil {
					return m, nil, err
				}
			}
		case recDigest:
			n := br.uvarint()
			if br.err == nil && (n < minBuckets || n > maxBuckets || n&(n-1) != 0) {
				br.err = fmt.Errorf("%d key digests", n)
			}
			digests, digestsAt = make([]uint64, 0, min(n, maxBuckets)), at
			for i := uint64(0); i < n && br.err == nil; i++ {
				var b [8]byte
				br.full(b[:])
				digests = append(digests, binary.LittleEndian.Uint64(b[:]))
			}
			if br.err != nil {
				return m, nil, br.fail("the key digests")
			}
		case recEnd:
			data := hex.EncodeToString(br.sum.Sum(nil))
			js := br.bytes(1 << 20)
			if br.err != nil {
				return m, nil, br.fail("the manifest")
			}
			if err := json.Unmarshal(js, &m); err != nil {
				return m, nil, corruptBackup("its manifest does not decode: %v", err)
			}
			if _, err := br.r.ReadByte(); err != io.EOF {
				return m, nil, corruptBackup("bytes follow its manifest")
			}
			switch {
			case m.Format != BackupFormat:
				return m, nil, corruptBackup("format %q, want %q", m.Format, BackupFormat)
			case m.Data != data:
				return m, nil, corruptBackup("its data does not match its checksum (SHA-256 %s, the manifest says %s)", data, m.Data)
			case digests == nil || m.DigestsAt != digestsAt || len(digests) != m.Buckets:
				return m, nil, corruptBackup("its key digests are missing or not where its manifest says")
			}
			return m, digests, nil
		default:
			return m, nil, corruptBackup("unknown record %q at byte %d", tag, at)
		}
	}
}

func corruptBackup(format string, args ...any) error {
	return fmt.Errorf("%w backup: %s", base.ErrCorrupt, fmt.Sprintf(format, args...))
}

// backupReader reads records and hashes what it reads.
type backupReader struct {
	r   *bufio.Reader
	sum hash.Hash
	n   int64
	err error
}

func (b *backupReader) fail(what string) error {
	if errors.Is(b.err, io.EOF) || errors.Is(b.err, io.ErrUnexpectedEOF) {
		return corruptBackup("it ends in %s at byte %d (cut short)", what, b.n)
	}
	return corruptBackup("%s at byte %d: %v", what, b.n, b.err)
}

func (b *backupReader) full(p []byte) {
	if b.err != nil {
		return
	}
	var n int
	n, b.err = io.ReadFull(b.r, p)
	b.sum.Write(p[:n])
	b.n += int64(n)
}

func (b *backupReader) byte() byte {
	var p [1]byte
	b.full(p[:])
	return p[0]
}

func (b *backupReader) uvarint() uint64 {
	if b.err != nil {
		return 0
	}
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c := b.byte()
		if b.err != nil {
			return 0
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	b.err = errors.New("a length overflows")
	return 0
}

// bytes reads a length and that many bytes, refusing a length over limit
// before allocating it.
func (b *backupReader) bytes(limit uint64) []byte {
	n := b.uvarint()
	if b.err == nil && n > limit {
		b.err = fmt.Errorf("a length of %d bytes, over %d", n, limit)
	}
	if b.err != nil {
		return nil
	}
	p := make([]byte, n)
	b.full(p)
	return p
}

// ReadBackupDigests reads the key digests of a backup whose manifest is
// m, from its file (what an incremental backup against it needs).
func ReadBackupDigests(f io.ReaderAt, m BackupManifest) ([]uint64, error) {
	br := &backupReader{r: bufio.NewReader(io.NewSectionReader(f, m.DigestsAt, 1+binary.MaxVarintLen64+8*maxBuckets)), sum: sha256.New()}
	if br.byte() != recDigest || br.err != nil {
		return nil, corruptBackup("no key digests at byte %d", m.DigestsAt)
	}
	n := br.uvarint()
	if br.err != nil || int(n) != m.Buckets {
		return nil, corruptBackup("%d key digests at byte %d, the manifest says %d", n, m.DigestsAt, m.Buckets)
	}
	d := make([]uint64, n)
	var b [8]byte
	for i := range d {
		br.full(b[:])
		d[i] = binary.LittleEndian.Uint64(b[:])
	}
	if br.err != nil {
		return nil, br.fail("the key digests")
	}
	return d, nil
}

// Restore writes into dir — a store directory that does not exist or is
// empty — the store a chain of backups holds: a full backup, then the
// incremental ones that follow it, in order. It checks each stream as
// ReadBackup does (framing, checksums, every block against its CID), that
// each continues the one before, and at the end that the store holds
// exactly the last backup's snapshot (its keys, their digests and the
// digest of every entry); then it records the snapshot's commit count and
// insertion-log end as the store's acknowledged mark, so that the store
// opens as having lost nothing. Anything wrong is ErrCorrupt. dir is
// left for the caller to remove on failure: make it a temporary directory
// and rename it into place once it is verified.
func Restore(ctx context.Context, dir string, o Options, chain []io.Reader) (BackupManifest, error) {
	var last BackupManifest
	if err := o.check(); err != nil {
		return last, err
	}
	if len(chain) == 0 {
		return last, fmt.Errorf("%w: no backup to restore", base.ErrInvalid)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return last, fmt.Errorf("%w: %s is not empty: a restore writes only into an empty directory", base.ErrInvalid, dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return last, err
	}
	notes := &badgerNotes{}
	db, err := badger.Open(badgerOptions(dir, o, notes))
	if err != nil {
		return last, fmt.Errorf("memory: restore: open %s: %w", dir, classifyBadger(err))
	}
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	var digests []uint64
	for i, r := range chain {
		if err := ctx.Err(); err != nil {
			return last, err
		}
		m, d, err := restoreOne(db, r)
		if err != nil {
			return last, fmt.Errorf("memory: restore: backup %d of %d: %w", i+1, len(chain), err)
		}
		if err := continues(i, last, m); err != nil {
			return last, fmt.Errorf("memory: restore: backup %d of %d: %w", i+1, len(chain), err)
		}
		last, digests = m, d
	}
	if err := checkRestored(db, last, digests); err != nil {
		return last, fmt.Errorf("memory: restore: %w", err)
	}
	if why := notes.unsynced.Load(); why != nil {
		return last, fmt.Errorf("memory: restore: the value log was not synced: %s", *why)
	}
	err = db.Close()
	db = nil
	if err != nil {
		return last, classifyBadger(err)
	}
	a, _, _, err := openAckFile(dir)
	if err != nil {
		return last, err
	}
	if err := a.record(ackMark{commits: last.Commits, memSeq: last.MemSeq}); err != nil {
		a.close()
		return last, err
	}
	if err := a.close(); err != nil {
		return last, err
	}
	return last, durable.SyncDir(dir)
}

// continues checks that m, the i-th backup of a chain, follows prev.
func continues(i int, prev, m BackupManifest) error {
	switch {
	case i == 0 && m.Kind != "full":
		return corruptBackup("a chain starts with a full backup, this one is %s", m.Kind)
	case i > 0 && m.Kind != "incremental":
		return corruptBackup("a %s backup cannot continue a chain", m.Kind)
	case i > 0 && (m.StoreID != prev.StoreID || m.Since != prev.Version || m.Buckets != prev.Buckets):
		return corruptBackup("it does not continue the backup before it (store %s since version %d, %d buckets; the one before is store %s at version %d, %d buckets)",
			m.StoreID, m.Since, m.Buckets, prev.StoreID, prev.Version, prev.Buckets)
	}
	return nil
}

// restoreOne applies one backup stream to db: its entries, then the key
// lists of its moved buckets (the keys they do not name are dropped).
func restoreOne(db *badger.DB, r io.Reader) (BackupManifest, []uint64, error) {
	wb := db.NewWriteBatch()
	lists := map[uint64]map[string]bool{}
	m, digests, err := ReadBackup(r, func(rec *BackupRecord) error {
		if rec.Set {
			return wb.SetEntry(newEntry(rec.Key, rec.Value))
		}
		set := make(map[string]bool, len(rec.Keys))
		for _, k := range rec.Keys {
			set[string(k)] = true
		}
		lists[rec.Bucket] = set
		return nil
	})
	if err != nil {
		wb.Cancel()
		return m, nil, err
	}
	if err := wb.Flush(); err != nil {
		return m, nil, classifyBadger(err)
	}
	if len(lists) == 0 {
		return m, digests, nil
	}
	var drop [][]byte
	found := 0
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			sel, _ := keyHash(k)
			set, ok := lists[sel&uint64(len(digests)-1)]
			switch {
			case !ok:
			case set[string(k)]:
				found++
			default:
				drop = append(drop, it.Item().KeyCopy(nil))
			}
		}
		return nil
	})
	if err != nil {
		return m, nil, classifyBadger(err)
	}
	listed := 0
	for _, set := range lists {
		listed += len(set)
	}
	if found != listed {
		return m, nil, corruptBackup("%d keys its key lists name are in no backup of the chain", listed-found)
	}
	wb = db.NewWriteBatch()
	for _, k := range drop {
		if err := wb.Delete(k); err != nil {
			wb.Cancel()
			return m, nil, classifyBadger(err)
		}
	}
	return m, digests, classifyBadger(wb.Flush())
}

// checkRestored checks that db holds exactly the snapshot m describes.
func checkRestored(db *badger.DB, m BackupManifest, want []uint64) error {
	digests := make([]uint64, len(want))
	var state stateDigest
	var keys int64
	var commits, memSeq uint64
	err := db.View(func(txn *badger.Txn) error {
		var err error
		r := badgerReader{txn: txn}
		if commits, err = ReadU64(r, KeyCommits); err != nil {
			return err
		}
		if memSeq, err = ReadU64(r, KeyMemSeq); err != nil {
			return err
		}
		h := sha256.New()
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		var val []byte
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			keys++
			sel, add := keyHash(k)
			digests[sel&uint64(len(digests)-1)] += add
			large, err := largeItem(item)
			if err != nil {
				return err
			}
			if large {
				state.add(h, k, nil, true)
				continue
			}
			if val, err = item.ValueCopy(val[:0]); err != nil {
				return err
			}
			state.add(h, k, val, false)
		}
		return nil
	})
	switch {
	case err != nil:
		return classifyBadger(err)
	case keys != m.Keys:
		return corruptBackup("the restored store holds %d keys, the backup's snapshot %d", keys, m.Keys)
	case !slices.Equal(digests, want):
		return corruptBackup("the restored store's keys are not the snapshot's")
	case state.String() != m.State:
		return corruptBackup("the restored store's entries are not the snapshot's")
	case commits != m.Commits || memSeq != m.MemSeq:
		return corruptBackup("the restored store counts %d commits and ends its insertion log at %d, the manifest says %d and %d", commits, memSeq, m.Commits, m.MemSeq)
	}
	return nil
}
