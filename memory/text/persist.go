package text

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/base"
)

// The files' encoding: unsigned varints, strings as a length and bytes.
//
//	index:  "MTXI" version generation watermark
//	        terms (count, each a string) sonas (count, each a string)
//	        documents (count; each: id length sonas (count, each an index)
//	                   terms (count, each an index delta and a frequency))
//	        CRC-32C of all before it (4 bytes, big-endian)
//	log-G:  records, each: length (4 bytes) CRC-32C (4 bytes) payload;
//	        payload: kind (1 apply, 2 delete) watermark documents (count;
//	        apply: id length sonas (count, strings) terms (count, each a
//	        string and a frequency); delete: id)

const (
	recApply  = 1
	recDelete = 2
)

// enc appends the encoding's values to b.
type enc struct{ b []byte }

func (e *enc) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) strs(s []string) {
	e.uint(uint64(len(s)))
	for _, v := range s {
		e.str(v)
	}
}

var errShort = errors.New("text: truncated")

func encodeApply(as []analysed, watermark uint64) []byte {
	e := &enc{b: []byte{recApply}}
	e.uint(watermark)
	e.uint(uint64(len(as)))
	for _, a := range as {
		e.str(a.id)
		e.uint(uint64(a.length))
		e.strs(a.sonas)
		e.uint(uint64(len(a.terms)))
		for i, t := range a.terms {
			e.str(t)
			e.uint(uint64(a.freqs[i]))
		}
	}
	return e.b
}

func encodeDelete(ids []string, watermark uint64) []byte {
	e := &enc{b: []byte{recDelete}}
	e.uint(watermark)
	e.strs(ids)
	return e.b
}

// replay applies a log record to the index being opened.
func (x *Index) replay(rec []byte) error {
	if len(rec) == 0 {
		return errShort
	}
	d := &base.Decoder{B: rec[1:], Bad: errShort}
	wm := d.Uvarint()
	switch rec[0] {
	case recApply:
		as := make([]analysed, d.Count())
		for i := range as {
			a := &as[i]
			a.id, a.length = d.Str(), uint32(d.Uvarint())
			a.sonas = make([]string, d.Count())
			for k := range a.sonas {
				a.sonas[k] = d.Str()
			}
			n := d.Count()
			a.terms, a.freqs = make([]string, n), make([]uint16, n)
			for k := range n {
				a.terms[k], a.freqs[k] = d.Str(), uint16(d.Uvarint())
			}
		}
		if d.Err != nil {
			return d.Err
		}
		for _, a := range as {
			x.put(a)
		}
	case recDelete:
		ids := make([]string, d.Count())
		for i := range ids {
			ids[i] = d.Str()
		}
		if d.Err != nil {
			return d.Err
		}
		for _, id := range ids {
			x.remove(id)
		}
	default:
		return fmt.Errorf("text: log record of kind %d", rec[0])
	}
	x.watermark = wm
	x.compactSlots()
	return nil
}

// append writes a record to the log, and replaces snapshot and log when
// the log has outgrown the snapshot. A write that fails stops the log
// until the next snapshot (see the package doc). The caller holds pmu.
func (x *Index) append(rec []byte) {
	if x.log == nil || x.logErr != nil {
		return
	}
	b := make([]byte, 8, 8+len(rec))
	binary.BigEndian.PutUint32(b, uint32(len(rec)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(rec, castagnoli))
	n, err := x.log.Write(append(b, rec...))
	x.logSize += int64(n)
	if err != nil {
		x.logErr = err
		return
	}
	if x.logSize > max(x.snapSize, x.logMin) {
		x.snapshot() // on failure the log goes on
	}
}

// snapshot writes the index as the next generation's snapshot (aside,
// synced, renamed over the last) and starts that generation's log. The
// caller holds pmu.
func (x *Index) snapshot() error {
	x.mu.RLock()
	e := &enc{b: []byte(snapMagic)}
	e.str(Version)
	e.uint(x.gen + 1)
	e.uint(x.watermark)
	// Terms and sonas some document holds, renumbered.
	termIdx := make(map[uint32]uint64)
	var terms []string
	for id, df := range x.df {
		if df > 0 {
			termIdx[uint32(id)] = uint64(len(terms))
			terms = append(terms, x.names[id])
		}
	}
	e.strs(terms)
	e.strs(x.sonaNames)
	e.uint(uint64(x.docs.Len()))
	for i := range x.slots {
		s := &x.slots[i]
		if s.dead {
			continue
		}
		e.str(x.idOf(s))
		e.uint(uint64(s.length))
		sonas := x.sonasOf(s)
		e.uint(uint64(len(sonas)))
		for _, v := range sonas {
			e.uint(uint64(v))
		}
		// Term indexes follow the ids' order, which the renumbering
		// keeps: deltas from the previous.
		terms := x.termsOf(s)
		e.uint(uint64(terms.len()))
		prev := uint64(0)
		for i := range terms.len() {
			t := termIdx[terms.id(i)]
			e.uint(t - prev)
			e.uint(uint64(terms.freq(i)))
			prev = t
		}
	}
	x.mu.RUnlock()
	e.b = binary.BigEndian.AppendUint32(e.b, crc32.Checksum(e.b, castagnoli))

	next := x.gen + 1
	if _, err := durable.WriteFile(filepath.Join(x.dir, snapshotFile), bytes.NewReader(e.b)); err != nil {
		return fmt.Errorf("text: snapshot: %w", err)
	}
	log, err := os.OpenFile(filepath.Join(x.dir, logPrefix+strconv.FormatUint(next, 10)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil { // the snapshot holds everything: the log starts at the next open
		log = nil
	}
	if x.log != nil {
		x.log.Close()
		os.Remove(filepath.Join(x.dir, logPrefix+strconv.FormatUint(x.gen, 10)))
	}
	x.gen, x.log, x.logSize, x.logErr, x.snapSize = next, log, 0, err, int64(len(e.b))
	return nil
}

// decodeSnapshot loads a snapshot into the empty index x.
func (x *Index) decodeSnapshot(b []byte) error {
	if len(b) < len(snapMagic)+4 || string(b[:len(snapMagic)]) != snapMagic {
		return fmt.Errorf("%w: %s is not a full-text index", ErrCorrupt, snapshotFile)
	}
	d := &base.Decoder{B: b[len(snapMagic) : len(b)-4], Bad: errShort}
	if v := d.Str(); d.Err == nil && v != Version {
		return fmt.Errorf("%w: version %q, this build writes %s", ErrStale, v, Version)
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return fmt.Errorf("%w: %s does not match its checksum", ErrCorrupt, snapshotFile)
	}
	x.gen, x.watermark = d.Uvarint(), d.Uvarint()
	// Into the empty index, numbered as the snapshot numbers them: a
	// term's id is its index in the snapshot's list, a document's slot its
	// place (put would look every term of every document up by name).
	x.names = make([]string, d.Count())
	for i := range x.names {
		x.names[i] = d.Str()
		x.terms[x.names[i]] = uint32(i)
	}
	x.sonaNames = make([]string, d.Count())
	for i := range x.sonaNames {
		x.sonaNames[i] = d.Str()
		x.sonaIDs[x.sonaNames[i]] = uint32(i)
	}
	if d.Err == nil && (len(x.terms) != len(x.names) || len(x.sonaIDs) != len(x.sonaNames)) {
		d.Fail() // a name twice
	}
	x.df, x.post = make([]uint32, len(x.names)), make([][]posting, len(x.names))
	// The documents' ids, sonas, terms and frequencies go into the pools
	// (runs), a few large arrays, rather than allocated one by one (four
	// allocations a document: 4M at 1M memories).
	var (
		sonas []uint32
		ids   []uint32
		freqs []uint16
		total int
	)
	n := d.Count()
	x.slots = make([]slot, 0, n)
	if x.docs.Len() == 0 {
		x.docs.Reset(int(n)) // not grown 20 times at 1M
	}
	for range n {
		id, length := d.Bytes(), uint32(d.Uvarint())
		sonas = sonas[:0]
		for k := range d.Count() {
			sonas = append(sonas, uint32(d.Uvarint()))
			if uint64(sonas[k]) >= uint64(len(x.sonaNames)) || k > 0 && sonas[k] <= sonas[k-1] {
				d.Fail()
			}
		}
		ids, freqs = ids[:0], freqs[:0]
		t := uint64(0)
		for k := range d.Count() {
			delta := d.Uvarint()
			t += delta
			if t >= uint64(len(x.names)) || k > 0 && delta == 0 { // ids ascending
				d.Fail()
				break
			}
			ids, freqs = append(ids, uint32(t)), append(freqs, uint16(d.Uvarint()))
		}
		if d.Err != nil {
			break
		}
		x.slots = append(x.slots, x.newSlot(unsafe.String(unsafe.SliceData(id), len(id)), ids, freqs, length, sonas))
		if !x.docs.Add(x.idOf(&x.slots[len(x.slots)-1]), uint32(len(x.slots)-1)) { // a document twice
			d.Fail()
			break
		}
		for _, id := range ids {
			x.df[id]++
		}
		total += len(ids)
		x.tokens += uint64(length)
	}
	if d.Err != nil || len(d.B) != 0 {
		return fmt.Errorf("%w: %s does not decode", ErrCorrupt, snapshotFile)
	}
	x.relist()
	// The postings, each term's cut to its length from one array.
	posts := make([]posting, total)
	at := 0
	for id, df := range x.df {
		x.post[id] = posts[at : at : at+int(df)]
		at += int(df)
	}
	for i := range x.slots {
		o := postOwner(x.owner[i])
		p := posting{slot: uint32(i), owner: o}
		if s := &x.slots[i]; s.wide {
			addPostings(x.post, x.wideOf(s), p)
		} else {
			addPostings(x.post, x.narrowOf(s), p)
		}
	}
	return nil
}

// addPostings appends p to the postings of the terms of t, its slot's,
// with each term's frequency.
func addPostings[T uint16 | uint32](post [][]posting, t termRun[T], p posting) {
	for k := range t.n {
		p.freq = t.freq(k)
		post[t.id(k)] = append(post[t.id(k)], p)
	}
}

// Flush makes every batch applied so far durable: it syncs the log, or
// writes a snapshot when the log missed a batch.
func (x *Index) Flush() error {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	if x.logErr == errClosed {
		return errClosed
	}
	if x.log == nil || x.logErr != nil {
		return x.snapshot()
	}
	return x.log.Sync()
}

// Close writes what the log holds into a new snapshot, so that the next
// open reads one file, and closes the index.
func (x *Index) Close() error {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	if x.logErr == errClosed {
		return nil
	}
	var err error
	if x.log == nil || x.logSize > 0 || x.logErr != nil {
		err = x.snapshot()
	}
	if x.log != nil {
		if cerr := x.log.Close(); err == nil {
			err = cerr
		}
		x.log = nil
	}
	x.logErr = errClosed
	return err
}

var errClosed = errors.New("text: index closed")

// Discard closes the index without writing anything more (a damaged one,
// which its owner deletes).
func (x *Index) Discard() error {
	x.pmu.Lock()
	defer x.pmu.Unlock()
	var err error
	if x.log != nil {
		err = x.log.Close()
		x.log = nil
	}
	x.logErr = errClosed
	return err
}
