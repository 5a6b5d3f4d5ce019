package store

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/base"
	"golang.org/x/sys/unix"
)

// The integrity of the store's files, where Badger's own checks fall
// short or lose data without a word:
//
//   - Badger verifies a table's block when it reads it, but an iterator
//     that meets a bad block just ends (a scan of a key space stops short
//     and says nothing), a compaction that meets one drops the rest of the
//     table, and a table whose footer is damaged panics in one of Badger's
//     goroutines at open. So every table the manifest lists is verified
//     before Badger opens the store (verifyTables). A table is immutable:
//     one whose bytes are those of a table that passed this check at an
//     earlier open — the same size and CRC-32C of the whole file, recorded
//     in checkedFile — passes it again without its blocks being
//     decompressed (reading and summing the file costs a small part of
//     that), so a restart checks in full only the tables written since.
//   - At open Badger replays its write-ahead logs — the memtables' .mem
//     files and the newest value log — up to the first entry that fails
//     its checksum and cuts them there. A cut write-ahead log loses
//     acknowledged writes; a cut value log loses the values of every entry
//     after the bad one. So before Badger opens, the logs are scanned
//     (scanLog): a damaged .mem file is named and, when entries follow the
//     damage, copied aside; a damaged newest value log is kept whole, so
//     that only the values in the bad entry read as corrupt.
//   - Every commit counts itself in the store (x/commits), and after each
//     commit the store records the count it acknowledged in a small file
//     beside Badger's (ackFile). A store that opens with fewer commits than
//     it acknowledged lost acknowledged writes, and refuses to serve
//     (base.ErrLostWrites) until the operator accepts the loss.

// corruptFile marks err, met reading one of the store's files, as
// corruption of that file.
func corruptFile(path string, err error) error {
	return fmt.Errorf("%w store: %s: %v", base.ErrCorrupt, filepath.Base(path), err)
}

// manifestTables are the tables the manifest of the store in dir lists,
// each with the compression it was written with (none for a new store).
func manifestTables(dir string, bo badger.Options) (map[uint64]options.CompressionType, error) {
	f, err := os.Open(filepath.Join(dir, badger.ManifestFilename))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a new store
	}
	if err != nil {
		return nil, err
	}
	m, _, err := badger.ReplayManifestFile(f, bo.ExternalMagicVersion, bo)
	f.Close()
	if err != nil {
		return nil, corruptFile(badger.ManifestFilename, err)
	}
	tables := map[uint64]options.CompressionType{}
	for id, tm := range m.Tables {
		tables[id] = tm.Compression
	}
	return tables, nil
}

// verifyTables checks every block of every table the store's manifest
// lists (tables, from manifestTables) against its checksum, before Badger
// opens the store: a damaged table is named (base.ErrCorrupt) instead of
// being read past or panicking. Tables unchanged since they passed at an
// earlier open pass again from their record (checkedFile); it reports how
// many tables it checked in full and how many it found unchanged.
func verifyTables(dir string, bo badger.Options, tables map[uint64]options.CompressionType) (full, unchanged int, err error) {
	known := readChecked(dir)
	checked, err := verifyTableFiles(dir, tables, bo.BlockSize, false, known)
	if err != nil {
		return 0, 0, err
	}
	for id, fp := range checked {
		if known[id] == fp {
			unchanged++
		}
	}
	if unchanged != len(checked) || len(known) != len(checked) {
		writeChecked(dir, checked) // a failure costs the next open a full check
	}
	return len(checked) - unchanged, unchanged, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkedFile records, in the store's directory, the tables that passed
// verifyTables: each one's size and the CRC-32C of its whole file.
const checkedFile = "memoria.tables"

const checkedFormat = "memoria-checked-tables/1"

// tableSum identifies a table file's bytes.
type tableSum struct {
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// checkedRecord is checkedFile's content.
type checkedRecord struct {
	Format string              `json:"format"`
	Tables map[uint64]tableSum `json:"tables"`
}

// readChecked reads checkedFile; anything unreadable is no record (every
// table is then checked in full).
func readChecked(dir string) map[uint64]tableSum {
	var rec checkedRecord
	parts, _ := filepath.Glob(filepath.Join(dir, "."+checkedFile+".part-*")) // a write a crash cut short
	for _, p := range parts {
		os.Remove(p)
	}
	b, err := os.ReadFile(filepath.Join(dir, checkedFile))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Format != checkedFormat || rec.Tables == nil {
		return map[uint64]tableSum{} // not nil: verifyTableFiles sums the tables
	}
	return rec.Tables
}

func writeChecked(dir string, tables map[uint64]tableSum) error {
	b, err := json.Marshal(checkedRecord{checkedFormat, tables})
	if err != nil {
		return err
	}
	_, err = durable.WriteFile(filepath.Join(dir, checkedFile), bytes.NewReader(b))
	return err
}

// sumTable reads the table file at path whole and sums it.
func sumTable(path string) (tableSum, error) {
	f, err := os.Open(path)
	if err != nil {
		return tableSum{}, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.CopyBuffer(h, f, make([]byte, 1<<20))
	return tableSum{Size: n, CRC32C: h.Sum32()}, err
}

// verifyTableFiles verifies the tables of dir, several at a time. With
// known (verifyTables), a table whose sum is the one known passes without
// its blocks being checked, and the sums of the tables that pass are
// returned; without (nil), every table is checked in full and nothing is
// summed.
func verifyTableFiles(dir string, tables map[uint64]options.CompressionType, blockSize int, missingOK bool, known map[uint64]tableSum) (map[uint64]tableSum, error) {
	ids := slices.Sorted(maps.Keys(tables))
	errs := make([]error, len(ids))
	sums := make([]tableSum, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				path := table.NewFilename(ids[i], dir)
				if k, ok := known[ids[i]]; ok {
					if sum, err := sumTable(path); err == nil && sum == k {
						sums[i] = sum
						continue
					}
				}
				var err error
				sums[i], err = checkTable(path, tables[ids[i]], blockSize, known != nil)
				if !(missingOK && errors.Is(err, os.ErrNotExist)) {
					errs[i] = err
				}
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	switch len(failed) {
	case 0:
		if known == nil {
			return nil, nil
		}
		out := make(map[uint64]tableSum, len(ids))
		for i, id := range ids {
			out[id] = sums[i]
		}
		return out, nil
	case 1:
		return nil, failed[0]
	}
	return nil, fmt.Errorf("%w (and %d more tables fail their checks)", failed[0], len(failed)-1)
}

// checkTable checks every block of the table at path against its
// checksum and, with sum, sums the file for the record (checkedFile).
func checkTable(path string, compression options.CompressionType, blockSize int, sum bool) (tableSum, error) {
	err := verifyTable(path, table.Options{ChkMode: options.OnTableRead, Compression: compression, BlockSize: blockSize})
	if err != nil || !sum {
		return tableSum{}, err
	}
	return sumTable(path)
}

// verifyTable opens one table read-only with checksum verification, in
// this goroutine, so that even a table that makes Badger panic is
// reported as corrupt.
func verifyTable(path string, topt table.Options) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w store: %s: the table is missing: %w", base.ErrCorrupt, filepath.Base(path), os.ErrNotExist)
	}
	if err != nil {
		return corruptFile(path, err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the table does not decode (Badger panicked reading it: %v)", r)
		}
		// OpenTable closes the file on some of its failures and not on
		// others; unmapping twice could unmap another mapping since made
		// at the same address.
		if _, serr := mf.Fd.Stat(); serr == nil {
			mf.Close(-1)
		}
		if err != nil {
			err = corruptFile(path, err)
		}
	}()
	_, err = table.OpenTable(mf, topt) // not DecrRef'd: that deletes the file
	return err
}

// vlogHeader is the size of a log file's header (Badger's vlogHeaderSize:
// an encryption key id and an IV), before the first entry.
const vlogHeader = 20

// logDamage is where a write-ahead or value log stops verifying.
type logDamage struct {
	path string
	at   int64 // offset of the first entry that fails its checksum
	end  int64 // where the file's data ends (its last byte not zero)
	// followed: data follows the bad entry (corruption), rather than the
	// log ending in it (a write cut short by a crash).
	followed bool
}

func (d logDamage) String() string {
	s := fmt.Sprintf("%s: the entry at byte %d fails its checksum", filepath.Base(d.path), d.at)
	if d.followed {
		s += fmt.Sprintf(" and about %d bytes of entries follow it", d.end-d.at)
	}
	return s
}

// scanLog verifies the entries of a Badger log file (a memtable's .mem
// file or a value log) as Badger's replay reads them: header (meta, user
// meta, uvarint key and value lengths, uvarint expiry), key, value,
// CRC-32C of all three. It returns nil when every entry up to the end of
// the data verifies (what follows is zeros: the unwritten rest of a
// preallocated file). entries is how many bytes of entries verify: what
// Badger replays.
func scanLog(path string) (_ *logDamage, entries int64, _ error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	end, err := DataEnd(f)
	if err != nil || end <= vlogHeader {
		return nil, 0, err
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(end), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, 0, fmt.Errorf("memory: map %s: %w", path, err)
	}
	defer unix.Munmap(data)
	off := int64(vlogHeader)
	for off < end {
		n, claimed := logEntryAt(data[off:])
		if n > 0 {
			off += n
			continue
		}
		if allZero(data[off:]) {
			break // the end of what was written
		}
		if claimed < 0 {
			claimed = maxEntryHeader // the header is damaged: assume the shortest entry
		}
		for end > off && data[end-1] == 0 {
			end--
		}
		return &logDamage{path: path, at: off, end: end, followed: off+claimed < end}, off - vlogHeader, nil
	}
	return nil, off - vlogHeader, nil
}

// maxEntryHeader is the longest entry header: two bytes and three uvarints.
const maxEntryHeader = 2 + 3*binary.MaxVarintLen64

// logEntryAt checks the entry at the start of b. It returns the entry's
// length (n) when it verifies, with size 0; or n 0 when it does not, with
// size the length its header claims (-1 when the header cannot be read).
func logEntryAt(b []byte) (n, size int64) {
	if len(b) < 2 {
		return 0, -1
	}
	i := 2
	var lens [3]uint64
	for j := range lens {
		v, k := binary.Uvarint(b[i:])
		if k <= 0 {
			return 0, -1
		}
		lens[j] = v
		i += k
	}
	kl, vl := lens[0], lens[1]
	if kl == 0 || kl > 1<<16 || vl > 1<<32 {
		return 0, -1
	}
	total := int64(i) + int64(kl) + int64(vl) + crc32.Size
	if total > int64(len(b)) {
		return 0, total
	}
	body := b[:total-crc32.Size]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[total-crc32.Size:]) {
		return 0, total
	}
	return total, 0
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	return !slices.ContainsFunc(b, func(c byte) bool { return c != 0 })
}

// DataEnd is where the data of f ends (the fault tests damage a log
// within it): Badger preallocates its log files
// as sparse files of twice their capacity, so their size says little.
// It is the end of the last data extent (SEEK_DATA/SEEK_HOLE), or the
// size where the file system cannot tell.
func DataEnd(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var end int64
	for off := int64(0); off < fi.Size(); {
		d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return fi.Size(), nil
		}
		h, err := unix.Seek(int(f.Fd()), d, unix.SEEK_HOLE)
		if err != nil {
			return fi.Size(), nil
		}
		end, off = h, h
	}
	return min(end, fi.Size()), nil
}

// checkLogs scans the store's write-ahead logs before Badger opens it:
// every memtable's .mem file and the newest value log (the files Badger
// replays and cuts at their first bad entry). A damaged .mem file whose
// damage is followed by entries is copied aside (damagedDir), since
// Badger will cut it; a damaged newest value log is kept whole by giving
// it an empty successor, since Badger cuts only the newest — its other
// values stay readable, and the bad entry's reads as corrupt. It returns
// the damaged .mem files, for the report of what was lost (if any was:
// see Store.openAcked), and the most bytes of entries one of them replays.
func checkLogs(dir string, log *slog.Logger) (_ []logDamage, replay int64, _ error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var wals []logDamage
	var lastVlog uint64
	haveVlog := false
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".mem"):
			d, n, err := scanLog(filepath.Join(dir, name))
			if err != nil {
				return nil, 0, err
			}
			replay = max(replay, n)
			if d == nil {
				continue
			}
			if d.followed { // Badger will cut it: keep a copy
				if err := copyAside(d.path, damagedDir(dir)); err != nil {
					return nil, 0, err
				}
			}
			wals = append(wals, *d)
		case strings.HasSuffix(name, ".vlog"):
			if fid, ok := valueLogFid(name); ok && (!haveVlog || fid > lastVlog) {
				lastVlog, haveVlog = fid, true
			}
		}
	}
	if !haveVlog {
		return wals, replay, nil
	}
	d, _, err := scanLog(vlogPath(dir, lastVlog))
	if err != nil || d == nil {
		return wals, replay, err
	}
	// An empty successor makes it an older value log, which Badger
	// neither replays nor cuts (and deletes at the next open, as empty).
	iv := make([]byte, vlogHeader)
	if _, err := crand.Read(iv[8:]); err != nil {
		return nil, 0, err
	}
	if err := writeSynced(vlogPath(dir, lastVlog+1), iv); err != nil {
		return nil, 0, err
	}
	if d.followed {
		log.Error("the value log is corrupt: the values in the bad entry read as corrupt, the rest are kept", "damage", d.String())
	} else {
		log.Warn("the value log ends in an entry cut short (a crash while writing it, never acknowledged); kept", "damage", d.String())
	}
	return wals, replay, nil
}

// damagedDir is where the damaged logs of the store in dir are copied.
func damagedDir(dir string) string { return dir + ".damaged" }

func vlogPath(dir string, fid uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%06d.vlog", fid))
}

// copyAside copies the data of a damaged log file into dir.
func copyAside(path, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	end, err := DataEnd(src)
	if err != nil {
		return err
	}
	dst, err := os.CreateTemp(dir, filepath.Base(path)+"-*") // never over an earlier copy
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, io.NewSectionReader(src, 0, end)); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// writeSynced writes a new file and makes it and its name durable.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// ackFile is the acknowledged mark: the number of commits the store has
// acknowledged and its insertion-log end then, in a small file beside
// Badger's, rewritten in place and made durable after every commit,
// before the commit's operations are acknowledged.
type ackFile struct {
	f    *os.File
	path string
}

// ackMark is what an ackFile records.
type ackMark struct {
	commits uint64 // x/commits
	memSeq  uint64 // x/memseq: the insertion log's end
}

// AckFileName is the acknowledged mark's file, beside Badger's.
const AckFileName = "memoria.acked"

// The record has a fixed length, so that a rewrite covers the last.
const ackFormat = "memoria-acked/1 commits=%020d memseq=%020d"

func encodeAck(m ackMark) []byte {
	body := fmt.Sprintf(ackFormat, m.commits, m.memSeq)
	return fmt.Appendf(nil, "%s crc=%08x\n", body, crc32.Checksum([]byte(body), crcTable))
}

func decodeAck(b []byte) (ackMark, error) {
	body, sum, ok := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte(" crc="))
	var m ackMark
	var crc uint32
	if !ok {
		return m, errors.New("no checksum")
	}
	if _, err := fmt.Sscanf(string(sum), "%08x", &crc); err != nil || crc != crc32.Checksum(body, crcTable) {
		return m, errors.New("checksum mismatch")
	}
	if _, err := fmt.Sscanf(string(body), ackFormat, &m.commits, &m.memSeq); err != nil {
		return m, err
	}
	return m, nil
}

// openAckFile opens the acknowledged mark in dir: ok is false when there
// is none yet (a new store, or one from before the mark existed).
func openAckFile(dir string) (a *ackFile, m ackMark, ok bool, err error) {
	path := filepath.Join(dir, AckFileName)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, m, false, err
	default:
		if m, err = decodeAck(b); err != nil {
			return nil, m, false, fmt.Errorf("%w? the acknowledged mark %s is unreadable (%v): whether writes were lost cannot be told",
				base.ErrLostWrites, path, err)
		}
		ok = true
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, m, false, err
	}
	return &ackFile{f: f, path: path}, m, ok, nil
}

// record makes m the durable mark.
func (a *ackFile) record(m ackMark) error {
	if _, err := a.f.WriteAt(encodeAck(m), 0); err != nil {
		return err
	}
	return unix.Fdatasync(int(a.f.Fd()))
}

func (a *ackFile) close() error { return a.f.Close() }

// badgerFile names the file a Badger error is about, when it says: a
// table's path, a value pointer's value log, a memtable's log.
var (
	reFilePath = regexp.MustCompile(`[^\s:"']*?(\d+)\.(sst|vlog|mem)\b`)
	reVlogFid  = regexp.MustCompile(`Fid:(\d+)`)
)

func badgerFile(err error) string {
	msg := err.Error()
	if m := reFilePath.FindStringSubmatch(msg); m != nil {
		return filepath.Base(m[0])
	}
	if m := reVlogFid.FindStringSubmatch(msg); m != nil {
		fid, _ := strconv.ParseUint(m[1], 10, 32)
		return fmt.Sprintf("%06d.vlog", fid)
	}
	return ""
}
