package vector

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/memoria-ai/memoria/memory/base"
)

// A snapshot is the index written whole — keys, float32 vectors, int8
// records and the graph — so that a restart reads it back instead of
// building the graph again. It is derived state like the index: the
// caller describes what it covers in an opaque tag (the store position it
// was taken at) and brings a restored index up to date itself.
//
// The file, in the machine's byte order (little-endian; a big-endian
// machine neither writes nor reads snapshots):
//
//	"MEMVSNP3"
//	u32 dims, u32 m, u32 ef_construction, u64 seed
//	u64 n (ids), u64 graph slots, u32 entry, i32 top level
//	u32 tag length, the tag
//	n keys: u32 length, the key's bytes (length 0: a removed key)
//	graph: the inserted bit set (u64 words), then each slot's layer-0
//	       record (u32 count, 2m u32 links; an alias: count 1<<31, then
//	       its representative), then each slot's upper
//	       layers (u32 level, level × (u32 count, m u32 links))
//	zero bytes up to a multiple of 4096, n × dims float32,
//	zero bytes up to a multiple of 4096, n × (dims + 4) int8 records
//	packs: u32 count, then each: u32 name length, the name, u64 ids;
//	       then, each after zero bytes up to a multiple of 64 (of the
//	       file's offset), every pack's ids (u64) one pack after the
//	       other, their records' int8 components (dims each), their
//	       scales (float32)
//	u64 offset of the packs
//	u32 CRC-32C of every byte before it
//
// The packs are those of the runs given to SnapshotRuns (of the runs
// the index would pack: named, long and spread out enough; Options.
// PackBytes not negative), each the longest prefix of a run the snapshot
// holds: a restore from a file maps them as the runs' packs, outside the
// budget (packs.go), so that a restarted index screens every large sona
// in sequence without a copy of its records in the heap, and reads an id
// of a pack from there (record): the records by id then lie untouched,
// out of the process's memory, where every id is in a pack.
// The vectors start on page boundaries: a restore from a file reads them
// once, to check the CRC, and keeps none of them in the heap — it maps the
// quantised records (mmap, copy-on-write), which the graph's searches
// read, and reads each float32 vector from the file when one is needed
// (floats.go; see Restore). Version 3 ("MEMVSNP3", the same without
// packs nor their offset) and version 2 ("MEMVSNP2", nor aliases) are
// still read, and version 1 ("MEMVSNP1", without aliases nor the
// padding), into the heap.
//
// A snapshot whose checksum, layout or parameters (dims, m,
// ef_construction, seed) do not match is refused with ErrSnapshot.

// ErrSnapshot means a snapshot cannot be restored: damaged, truncated, of
// another layout, or built with other parameters.
var ErrSnapshot = errors.New("vector: unusable snapshot")

const snapAlign = 4096

// snapMagics are the layouts' magic strings, by version.
var snapMagics = map[string]int{
	"MEMVSNP1": 1, // no padding before the vectors, no aliases
	"MEMVSNP2": 2, // no aliases
	"MEMVSNP3": 3, // no packs
	"MEMVSNP4": 4,
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// SnapshotInfo says what a snapshot holds.
type SnapshotInfo struct {
	IDs     int // keys, removed ones included
	Removed int
	Pending int // ids not yet in the graph
	// Changes is the index's count of adds and removals when it was
	// taken (see Changes).
	Changes uint64
	// Mapped is the bytes of quantised records a restore mapped from the
	// file rather than read into the heap (its float32 vectors are read
	// from the file when needed).
	Mapped int64
	// Version is the snapshot's layout (SnapshotVersion when written).
	Version int
	// FloatsAt is the offset of the float32 vectors in a snapshot Snapshot
	// wrote (0 for older layouts): see AdoptFloats.
	FloatsAt int64
	// Packs is the runs' packs written, or mapped by a restore (their
	// records' bytes are in Mapped).
	Packs int
}

// SnapshotVersion is the layout Snapshot writes.
const SnapshotVersion = 4

// Changes counts the keys added and removed since the index was created or
// restored (a restored index starts at its snapshot's count): a snapshot
// taken at the same count would hold the same index.
func (x *Index) Changes() uint64 {
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	return x.changes
}

// Snapshot writes the index and tag to w. Searches and adds go on
// meanwhile; the graph builder waits while the graph is written, and a
// Remove until then. Every key added before Snapshot was called is in
// it; keys added meanwhile may be.
func (x *Index) Snapshot(w io.Writer, tag []byte) (SnapshotInfo, error) {
	return x.snapshot(w, tag, SnapshotVersion, nil)
}

// SnapshotRuns is Snapshot with the packs of runs (the sonas' members):
// of each run the index would pack, the records of its ids the snapshot
// holds, side by side. The runs' ids are only read.
func (x *Index) SnapshotRuns(w io.Writer, tag []byte, runs []Run) (SnapshotInfo, error) {
	return x.snapshot(w, tag, SnapshotVersion, runs)
}

// snapshot writes version 4, or an older one (for the tests of reading
// them: the graph must have no aliases before 3; runs are written from 4).
func (x *Index) snapshot(w io.Writer, tag []byte, version int, runs []Run) (SnapshotInfo, error) {
	if !littleEndian {
		return SnapshotInfo{}, fmt.Errorf("%w: snapshots are little-endian", ErrSnapshot)
	}
	sw := &snapWriter{w: bufio.NewWriterSize(w, 1<<20), crc: crc32.New(castagnoli)}

	// The graph and the keys, the graph frozen: every node of it is one
	// of the n keys, since a key is added before its node.
	x.bmu.Lock()
	x.gmu.RLock()
	x.kmu.RLock()
	keys := x.keys.Frozen() // a key is only ever cleared (Remove), under gmu
	n := keys.Len()
	info := SnapshotInfo{IDs: n, Removed: len(x.removed), Changes: x.changes, Version: version}
	x.kmu.RUnlock()
	g := x.graph
	sw.bytes(fmt.Appendf(nil, "MEMVSNP%d", version))
	sw.u32(uint32(x.dims))
	sw.u32(uint32(g.m))
	sw.u32(uint32(g.efc))
	sw.u64(uint64(g.seed))
	sw.u64(uint64(n))
	sw.u64(uint64(g.n))
	sw.u32(g.entry)
	sw.u32(uint32(int32(g.top)))
	sw.u32(uint32(len(tag)))
	sw.bytes(tag)
	for id := range n {
		k := keys.At(uint32(id))
		sw.u32(uint32(len(k)))
		sw.bytes(unsafe.Slice(unsafe.StringData(k), len(k)))
	}
	sw.bytes(asBytes(g.in))
	writeChunks(sw, &g.links0, g.n, nil)
	for id := range g.n {
		up := g.upper[id]
		sw.u32(uint32(len(up) / (1 + g.m)))
		sw.bytes(asBytes(up))
		if !g.inserted(uint32(id)) {
			info.Pending++
		}
	}
	info.Pending += n - g.n
	x.gmu.RUnlock()
	x.bmu.Unlock()

	// The vectors, a chunk at a time: they never move, and change only
	// when Remove zeroes one (under kmu).
	if version > 1 {
		sw.pad()
		info.FloatsAt = sw.off
	}
	writeFloats(sw, &x.vecs, n, &x.kmu)
	if version > 1 {
		sw.pad()
	}
	writeChunks(sw, &x.qv, n, &x.kmu)
	if version >= 4 {
		at := sw.off
		info.Packs = x.writePacks(sw, runs, n)
		sw.u64(uint64(at))
	}
	sw.u32(sw.crc.Sum32())
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	return info, sw.err
}

// writePacks writes the packs of runs (see the layout above), of the ids
// under n, and returns how many.
func (x *Index) writePacks(sw *snapWriter, runs []Run, n int) int {
	var packed []Run
	for _, r := range runs {
		if i := slices.IndexFunc(r.IDs, func(id uint64) bool { return id >= uint64(n) }); i >= 0 {
			r.IDs = r.IDs[:i]
		}
		if x.packs.packable(r) {
			packed = append(packed, r)
		}
	}
	sw.u32(uint32(len(packed)))
	for _, r := range packed {
		sw.u32(uint32(len(r.Name)))
		sw.bytes([]byte(r.Name))
		sw.u64(uint64(len(r.IDs)))
	}
	sw.padTo(packAlign)
	for _, r := range packed {
		sw.bytes(asBytes(r.IDs))
	}
	sw.padTo(packAlign)
	var scales []float32
	for _, r := range packed {
		x.kmu.RLock()
		for _, id := range r.IDs {
			rec := x.qv.at(uint32(id))
			sw.bytes(asBytes(rec[:x.dims]))
			scales = append(scales, recordScale(rec[x.dims:]))
		}
		x.kmu.RUnlock()
	}
	sw.padTo(packAlign)
	sw.bytes(asBytes(scales))
	return len(packed)
}

// packAlign aligns a pack's ids, components and scales in the file, and
// so in its mapping: each starts on a cache line.
const packAlign = 64

// writeChunks writes records 0..n-1 of c, each chunk under mu's read
// lock when mu is not nil.
func writeChunks[T float32 | uint32 | int8](sw *snapWriter, c *chunked[T], n int, mu *sync.RWMutex) {
	for i := 0; i<<chunkBits < n; i++ {
		recs := min(n-i<<chunkBits, 1<<chunkBits)
		if mu != nil {
			mu.RLock()
		}
		sw.bytes(asBytes(c.chunks[i][:recs*c.stride]))
		if mu != nil {
			mu.RUnlock()
		}
	}
}

// writeFloats is writeChunks of the float32 vectors, those of a restored
// snapshot read from its file a chunk at a time (removed ones as zeros).
func writeFloats(sw *snapWriter, f *floats, n int, mu *sync.RWMutex) {
	var buf []float32
	for i := 0; i<<chunkBits < n; i++ {
		recs := min(n-i<<chunkBits, 1<<chunkBits)
		mu.RLock()
		if c := f.chunks[i]; c != nil {
			sw.bytes(asBytes(c[:recs*f.stride]))
		} else if sw.err == nil {
			buf = slices.Grow(buf[:0], recs*f.stride)[:recs*f.stride]
			f.readRange(uint32(i<<chunkBits), buf)
			sw.bytes(asBytes(buf))
		}
		mu.RUnlock()
	}
}

type snapWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	err error
	off int64 // bytes written
	buf [8]byte
}

func (s *snapWriter) bytes(b []byte) {
	if s.err != nil {
		return
	}
	s.crc.Write(b)
	_, s.err = s.w.Write(b)
	s.off += int64(len(b))
}

// pad writes zero bytes up to the next multiple of snapAlign.
func (s *snapWriter) pad() { s.padTo(snapAlign) }

// padTo writes zero bytes up to the next multiple of align.
func (s *snapWriter) padTo(align int64) {
	s.bytes(make([]byte, paddingTo(s.off, align)))
}

// padding is the bytes from off to the next multiple of snapAlign.
func padding(off int64) int64 { return paddingTo(off, snapAlign) }

func paddingTo(off, align int64) int64 { return (align - off%align) % align }

func (s *snapWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(s.buf[:4], v)
	s.bytes(s.buf[:4])
}

func (s *snapWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(s.buf[:8], v)
	s.bytes(s.buf[:8])
}

// asBytes is v's memory as bytes (the machine's byte order).
func asBytes[T float32 | uint32 | int8 | uint64](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(v[0])))
}

// Restore reads a snapshot of size bytes from r into x, which must be
// empty (just made by New with the options the snapshot was taken with).
// When r is an *os.File at its start, the vectors are read once, to check
// the CRC, but not kept in the heap: the quantised records are mapped
// from it (private, copy-on-write: a removal zeroes the process's copy,
// never the file) where the platform can, and the float32 vectors read
// from it when needed, through a descriptor of the index's own (a removal
// is remembered, never written). The mapping and the descriptor last
// until Unmap (the file may be replaced meanwhile: they keep the old
// one's blocks until then).
// Once the snapshot is read and checked, accept is given its tag: an
// error from it leaves x empty and is returned. Ids not in the snapshot's
// graph are pending again: the builder adds them (a lazy index's once its
// graph is wanted). On an error x is left empty; errors of the snapshot
// itself are ErrSnapshot.
func (x *Index) Restore(r io.Reader, size int64, accept func(tag []byte) error) (SnapshotInfo, error) {
	info, err := x.restore(r, size, accept)
	if err != nil {
		info = SnapshotInfo{}
	}
	return info, err
}

func (x *Index) restore(r io.Reader, size int64, accept func(tag []byte) error) (SnapshotInfo, error) {
	var info SnapshotInfo
	if !littleEndian {
		return info, fmt.Errorf("%w: snapshots are little-endian", ErrSnapshot)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrSnapshot, fmt.Sprintf(format, a...))
	}
	sr := &snapReader{r: bufio.NewReaderSize(r, 1<<20), crc: crc32.New(castagnoli)}
	file, _ := r.(*os.File)
	magic := make([]byte, len("MEMVSNP3"))
	sr.bytes(magic)
	version := snapMagics[string(magic)]
	v1, v4 := version == 1, version >= 4
	dims, m, efc, seed := sr.u32(), sr.u32(), sr.u32(), int64(sr.u64())
	n, gn, entry, top := sr.u64(), sr.u64(), sr.u32(), int(int32(sr.u32()))
	if sr.err != nil {
		return info, bad("header: %v", sr.err)
	}
	g := x.graph
	switch {
	case version == 0:
		return info, bad("not a vector snapshot")
	case int(dims) != x.dims || int(m) != g.m || int(efc) != g.efc || seed != g.seed:
		return info, bad("taken with dims %d, m %d, ef_construction %d, seed %d; the index has %d, %d, %d, %d",
			dims, m, efc, seed, x.dims, g.m, g.efc, g.seed)
	case n > uint64(size)/uint64(4*dims+1) || gn > n || top > maxLevel || top < -1 || (top >= 0) != (gn > 0) || top >= 0 && uint64(entry) >= gn:
		return info, bad("header out of range (%d ids, %d graph slots, entry %d, top %d, %d bytes)", n, gn, entry, top, size)
	}
	// From a file, the vectors (from vecsAt to the checksum) are summed
	// on another core (sumFile) while the rest is read, and not read
	// into the heap: the float32 ones are read from the file when needed
	// (floats.go), the quantised records mapped.
	var (
		vecsAt, qvAt int64
		summed       chan fileSum
		fromFile     = file != nil && !v1
		qstride      = int64(dims) + scaleBytes
		vecBytes     = int64(n) * int64(dims) * 4
		alignedVecs  = (vecBytes + snapAlign - 1) / snapAlign * snapAlign
	)
	// The packs' offset (version 4), from the end; the packs end there.
	packsAt, packsEnd := size-4, size-4
	if v4 {
		packsEnd = size - 12
		var foot [8]byte
		if file != nil {
			if _, err := file.ReadAt(foot[:], packsEnd); err != nil {
				return info, bad("the packs' offset: %v", err)
			}
			packsAt = int64(binary.LittleEndian.Uint64(foot[:]))
			if packsAt < 0 || packsAt > packsEnd {
				return info, bad("packs at %d in a file of %d bytes", packsAt, size)
			}
		}
	}
	if fromFile {
		qvAt = packsAt - int64(n)*qstride
		vecsAt = qvAt - alignedVecs
		if vecsAt < 0 || vecsAt%snapAlign != 0 {
			return info, bad("%d bytes cannot hold %d vectors of %d dims", size, n, dims)
		}
		summed = make(chan fileSum, 1)
		go func() { summed <- sumFile(file, vecsAt, size) }()
	}
	// fail returns err once the sum, if any, is done with the file.
	fail := func(err error) (SnapshotInfo, error) {
		if summed != nil {
			<-summed
		}
		return SnapshotInfo{}, err
	}

	tag := make([]byte, sr.len(size))
	sr.bytes(tag)

	var keys base.KeyTable
	ids := base.NewKeyIndex(int(n), keys.At)
	removed := map[uint64]bool{}
	var buf []byte
	for id := range n {
		l := sr.len(size)
		buf = slices.Grow(buf[:0], l)[:l]
		sr.bytes(buf)
		if sr.err != nil {
			return fail(bad("keys: %v", sr.err))
		}
		keys.Add(unsafe.String(unsafe.SliceData(buf), l)) // copied
		if l == 0 {
			removed[id] = true
			continue
		}
		if k := keys.At(uint32(id)); !ids.Add(k, uint32(id)) {
			return fail(bad("key %q twice", k))
		}
	}

	ng := newGraph(x.dims, g.m, g.efc, g.seed)
	ng.n, ng.entry, ng.top = int(gn), entry, top
	ng.in = make([]uint64, (gn+63)/64)
	sr.bytes(asBytes(ng.in))
	ng.links0.grow(ng.n)
	readChunks(sr, &ng.links0, ng.n)
	ng.upper = make([][]uint32, gn)
	ng.indeg = make([]uint32, gn)
	for id := range gn {
		levels := sr.u32()
		if sr.err != nil || levels > maxLevel {
			return fail(bad("node %d: %d levels (%v)", id, levels, sr.err))
		}
		if levels > 0 {
			ng.upper[id] = make([]uint32, int(levels)*(1+g.m))
			sr.bytes(asBytes(ng.upper[id]))
		}
	}
	if sr.err != nil {
		return fail(bad("graph: %v", sr.err))
	}
	if err := ng.check(version >= 3); err != nil {
		return fail(bad("%v", err))
	}

	// The vectors: read into the heap, or only checked (from vecsAt)
	// and left in the file once the checksum is.
	vecs := floats{chunked: chunked[float32]{stride: x.dims}}
	qv := chunked[int8]{stride: x.dims + scaleBytes}
	var sum uint32
	var trailer [4]byte
	var floatsAt int64
	if fromFile {
		sr.skip(padding(sr.off))
		if sr.err == nil && sr.off != vecsAt {
			sr.err = fmt.Errorf("the vectors start at byte %d, not %d", sr.off, vecsAt)
		}
		floatsAt = vecsAt
		fs := <-summed
		summed = nil // done with the file
		if sr.err == nil && fs.err != nil {
			sr.err = fs.err
		}
		sum = crc32Combine(sr.crc.Sum32(), fs.sum, size-4-vecsAt)
		trailer = fs.trailer
	} else {
		if !v1 {
			sr.skip(padding(sr.off))
			floatsAt = sr.off
		}
		vecs.grow(int(n))
		readChunks(sr, &vecs.chunked, int(n))
		if !v1 {
			sr.skip(padding(sr.off))
		}
		qv.grow(int(n))
		readChunks(sr, &qv, int(n))
		if v4 { // not kept: a restore from a file maps them
			at := sr.off
			if at > packsEnd && sr.err == nil {
				sr.err = fmt.Errorf("the records end at byte %d, past the packs' end %d", at, packsEnd)
			}
			sr.skip(packsEnd - at)
			if got := sr.u64(); sr.err == nil && int64(got) != at {
				sr.err = fmt.Errorf("packs at %d, not %d", got, at)
			}
		}
		sum = sr.crc.Sum32()
		if _, err := io.ReadFull(sr.r, trailer[:]); sr.err == nil && err != nil {
			sr.err = err
		}
		if _, err := sr.r.ReadByte(); sr.err == nil && err != io.EOF {
			sr.err = errors.New("bytes after the checksum")
		}
	}
	if sr.err != nil {
		return fail(bad("vectors: %v", sr.err))
	}
	if got := binary.LittleEndian.Uint32(trailer[:]); got != sum {
		return fail(bad("checksum %08x, the content's is %08x", got, sum))
	}
	if err := accept(tag); err != nil {
		return fail(err)
	}
	var mapping []byte
	var restored *mapped
	if fromFile {
		var err error
		if vecBytes <= x.heapVecs {
			vecs.grow(int(n))
			err = readFloats(file, vecsAt, &vecs.chunked, int(n))
		} else {
			vecs, err = fileFloats(file, vecsAt, x.dims, int(n), removed)
		}
		if err != nil {
			return info, err
		}
		mapAt := qvAt / int64(os.Getpagesize()) * int64(os.Getpagesize())
		if mapping, err = mapFile(file, mapAt, size-mapAt); err != nil {
			vecs.close()
			return info, fmt.Errorf("vector: mapping the snapshot: %w", err)
		}
		mapChunks(&qv, mapping, qvAt-mapAt, int(n))
		info.Mapped = int64(n) * int64(qv.stride)
		if v4 && x.packs.budget > 0 { // else none is wanted
			if restored, err = mappedPacks(mapping[packsAt-mapAt:packsEnd-mapAt], packsAt, n, x.dims); err != nil {
				unmapFile(mapping)
				vecs.close()
				return SnapshotInfo{}, bad("packs: %v", err)
			}
			info.Mapped += int64(len(restored.q)) + 4*int64(len(restored.scales))
			info.Packs = len(restored.byName)
		}
	}

	// The level source where the graph's insertions left it (one draw
	// each), so that the restored graph goes on as it would have: the
	// same adds in the same order give the same graph, restored or not.
	ng.rng = rand.New(rand.NewSource(g.seed))
	ng.qv = qv
	for id := range ng.n {
		if !ng.inserted(uint32(id)) {
			continue
		}
		ng.rng.Float64()
		if rep, ok := ng.aliasOf(uint32(id)); ok {
			if removed[uint64(id)] { // left so by an older binary
				ng.links0.at(uint32(id))[0] = 0
			} else {
				ng.aliases[rep] = append(ng.aliases[rep], uint32(id))
			}
			continue
		}
		for _, nb := range ng.links(uint32(id), 0) {
			ng.indeg[nb]++
		}
	}
	var pending []uint64
	for id := range n {
		if !ng.inserted(uint32(id)) {
			pending = append(pending, id)
		}
	}

	x.bmu.Lock()
	x.gmu.Lock()
	x.kmu.Lock()
	x.pmu.Lock()
	empty := x.keys.Len() == 0 && len(x.pending) == 0 && x.graph.top < 0
	if empty {
		x.graph = ng
		x.ids, x.keys, x.vecs, x.qv, x.removed, x.mapping = ids, keys, vecs, qv, removed, mapping
		x.packs.reset()
		x.packs.install(restored)
		ids.SetKey(x.keyOf) // keys grow in x.keys from now on
		x.pending = pending
		x.changes = uint64(n) + uint64(len(removed))
	}
	x.pmu.Unlock()
	x.kmu.Unlock()
	x.gmu.Unlock()
	x.bmu.Unlock()
	if !empty {
		if mapping != nil {
			unmapFile(mapping)
		}
		vecs.close()
		return info, errors.New("vector: Restore into an index that is not empty")
	}
	if len(pending) > 0 {
		if x.wanted.Load() {
			x.hurry.Store(int64(len(pending)))
		}
		x.wakeBuilder()
	}
	info = SnapshotInfo{IDs: int(n), Removed: len(removed), Pending: len(pending), Changes: x.changes, Mapped: info.Mapped, Version: version, FloatsAt: floatsAt, Packs: info.Packs}
	return info, nil
}

// mappedPacks are the packs of a snapshot's packs section b, at offset at
// of its file (b mapped from it: aligned as the file's offsets are), of a
// snapshot of n ids.
func mappedPacks(b []byte, at int64, n uint64, dims int) (*mapped, error) {
	// The header through a snapReader (its checksum unused: the file's
	// covers it), the arrays sliced from b where they lie.
	sr := &snapReader{r: bufio.NewReader(bytes.NewReader(b)), crc: crc32.New(castagnoli)}
	count := sr.len(int64(len(b)) / 12) // a pack's name length and size
	if sr.err != nil {
		return nil, fmt.Errorf("the header at %d: %w", at, sr.err)
	}
	names := make([]string, count)
	sizes := make([]uint64, count)
	var total uint64
	for i := range count {
		name := make([]byte, sr.len(int64(len(b))))
		sr.bytes(name)
		sizes[i] = sr.u64()
		if sr.err != nil {
			return nil, fmt.Errorf("the header at %d: %w", at, sr.err)
		}
		if sizes[i] == 0 || sizes[i] > n {
			return nil, fmt.Errorf("pack %q: %d ids of %d", name, sizes[i], n)
		}
		names[i], total = string(name), total+sizes[i]
	}
	if total > uint64(len(b)) {
		return nil, fmt.Errorf("%d ids in %d bytes", total, len(b))
	}
	off := uint64(sr.off)
	aligned := func(k uint64) []byte {
		off += uint64(paddingTo(at+int64(off), packAlign))
		if off > uint64(len(b)) || k > uint64(len(b))-off {
			return nil
		}
		off += k
		return b[off-k : off]
	}
	rawIDs, rawQ, rawScales := aligned(8*total), aligned(total*uint64(dims)), aligned(4*total)
	if rawIDs == nil || rawQ == nil || rawScales == nil {
		return nil, fmt.Errorf("%d ids' arrays past the end %d", total, at+int64(len(b)))
	}
	if off != uint64(len(b)) {
		return nil, fmt.Errorf("%d bytes after the packs", uint64(len(b))-off)
	}
	m := &mapped{byName: make(map[string]*pack, count)}
	if count > 0 {
		m.slot = make([]uint32, n)
	}
	if total > 0 {
		m.ids = unsafe.Slice((*uint64)(unsafe.Pointer(&rawIDs[0])), total)
		m.q = unsafe.Slice((*int8)(unsafe.Pointer(&rawQ[0])), total*uint64(dims))
		m.scales = unsafe.Slice((*float32)(unsafe.Pointer(&rawScales[0])), total)
	}
	var from uint64
	for i, name := range names {
		k, to := sizes[i], from+sizes[i]
		if m.byName[name] != nil {
			return nil, fmt.Errorf("pack %q twice", name)
		}
		for s, id := range m.ids[from:to] {
			if id >= n {
				return nil, fmt.Errorf("pack %q: id %d of %d", name, id, n)
			}
			if m.slot[id] == 0 { // a memory of several sonas: its first
				m.slot[id] = uint32(from) + uint32(s) + 1
			}
		}
		m.byName[name] = &pack{
			ids:    m.ids[from:to:to], // extended in the heap
			mapped: int(k),
			mq:     m.q[from*uint64(dims) : to*uint64(dims)],
			ms:     m.scales[from:to],
		}
		from = to
	}
	return m, nil
}

// check checks a restored graph's structure: every link within the
// graph's nodes and within its layer's capacity, an alias's
// representative a node that is no alias (when aliases may be), the entry
// a node of the top level.
func (g *graph) check(aliases bool) error {
	for id := range g.n {
		if !g.inserted(uint32(id)) {
			if g.links0.at(uint32(id))[0] != 0 || g.upper[id] != nil {
				return fmt.Errorf("slot %d: links but no node", id)
			}
			continue
		}
		if rep, ok := g.aliasOf(uint32(id)); ok && aliases {
			// A representative is an earlier node, itself no alias.
			if rep >= uint32(id) || !g.inserted(rep) || g.upper[id] != nil || uint32(id) == g.entry {
				return fmt.Errorf("node %d: an alias of %d, no earlier node", id, rep)
			}
			if _, chained := g.aliasOf(rep); chained {
				return fmt.Errorf("node %d: an alias of %d, itself an alias", id, rep)
			}
			continue
		}
		levels := len(g.upper[id]) / (1 + g.m)
		if levels > g.top {
			return fmt.Errorf("node %d: level %d above the top %d", id, levels, g.top)
		}
		for layer := 0; layer <= levels; layer++ {
			var rec []uint32
			if layer == 0 {
				rec = g.links0.at(uint32(id))
			} else {
				rec = g.upper[id][(layer-1)*(1+g.m) : layer*(1+g.m)]
			}
			if int(rec[0]) > g.capacity(layer) {
				return fmt.Errorf("node %d: %d links on layer %d", id, rec[0], layer)
			}
			for _, nb := range rec[1 : 1+rec[0]] {
				if !g.inserted(nb) || layer > 0 && len(g.upper[nb])/(1+g.m) < layer {
					return fmt.Errorf("node %d: a link to %d, no node of layer %d", id, nb, layer)
				}
			}
		}
	}
	if g.top >= 0 && (!g.inserted(g.entry) || len(g.upper[g.entry])/(1+g.m) != g.top) {
		return fmt.Errorf("entry %d is no node of the top level %d", g.entry, g.top)
	}
	for w := g.n; w < len(g.in)*64; w++ {
		if g.in[w/64]&(1<<(w%64)) != 0 {
			return fmt.Errorf("a node %d beyond the %d slots", w, g.n)
		}
	}
	return nil
}

type snapReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	err error
	off int64 // bytes read
	buf [8]byte
}

func (s *snapReader) bytes(b []byte) {
	if s.err != nil {
		return
	}
	if _, s.err = io.ReadFull(s.r, b); s.err == nil {
		s.crc.Write(b)
		s.off += int64(len(b))
	}
}

// skip reads n bytes into the checksum only.
func (s *snapReader) skip(n int64) {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 && s.err == nil {
		k := min(n, int64(len(buf)))
		s.bytes(buf[:k])
		n -= k
	}
}

func (s *snapReader) u32() uint32 {
	s.bytes(s.buf[:4])
	return binary.LittleEndian.Uint32(s.buf[:4])
}

func (s *snapReader) u64() uint64 {
	s.bytes(s.buf[:8])
	return binary.LittleEndian.Uint64(s.buf[:8])
}

// len reads a length, bounded by the file's size.
func (s *snapReader) len(size int64) int {
	n := s.u32()
	if s.err == nil && int64(n) > size {
		s.err = fmt.Errorf("a length of %d in a file of %d bytes", n, size)
	}
	if s.err != nil {
		return 0
	}
	return int(n)
}

// fileSum is sumFile's result.
type fileSum struct {
	sum     uint32
	trailer [4]byte // the file's last four bytes
	err     error
}

// sumFile is the CRC-32C of f's bytes from at to the last four of its
// size, and those four. It reads f (the page cache's copies, not the
// process's), a few MB at a time.
func sumFile(f *os.File, at, size int64) fileSum {
	var r fileSum
	buf := make([]byte, 4<<20)
	for at < size-4 && r.err == nil {
		b := buf[:min(int64(len(buf)), size-4-at)]
		if _, r.err = f.ReadAt(b, at); r.err == nil {
			r.sum = crc32.Update(r.sum, castagnoli, b)
			at += int64(len(b))
		}
	}
	if r.err == nil {
		_, r.err = f.ReadAt(r.trailer[:], size-4)
	}
	return r
}

// fileFloats is the float32 vectors of a snapshot's n ids, from at in f:
// the whole chunks' left in the file, which it keeps open (a file of its
// own: f's owner closes f), the last chunk's, if partial, read into the
// heap (ids are added after it). removed ids read as zeros.
func fileFloats(f *os.File, at int64, dims, n int, removed map[uint64]bool) (floats, error) {
	whole := n >> chunkBits
	v := floats{chunked: chunked[float32]{stride: dims}, base: at, fileEnd: uint32(whole << chunkBits), heapFrom: whole}
	if whole > 0 {
		var err error
		if v.file, err = reopen(f); err != nil {
			return floats{}, fmt.Errorf("vector: keeping the snapshot's file open: %w", err)
		}
		v.chunks = make([][]float32, whole)
		v.gone = make([]uint64, (n+63)/64)
		for id := range removed {
			v.markGone(uint32(id))
		}
	}
	if recs := n - whole<<chunkBits; recs > 0 {
		last := make([]float32, dims<<chunkBits)
		if _, err := f.ReadAt(asBytes(last[:recs*dims]), at+int64(whole<<chunkBits)*int64(dims)*4); err != nil {
			v.close()
			return floats{}, fmt.Errorf("vector: reading the snapshot's last vectors: %w", err)
		}
		v.chunks = append(v.chunks, last)
	}
	return v, nil
}

// readFloats reads the float32 vectors of a snapshot's n ids, from at in
// f, into c (grown to hold them).
func readFloats(f *os.File, at int64, c *chunked[float32], n int) error {
	for i := 0; i<<chunkBits < n; i++ {
		recs := min(n-i<<chunkBits, 1<<chunkBits)
		if _, err := f.ReadAt(asBytes(c.chunks[i][:recs*c.stride]), at+int64(i<<chunkBits)*int64(c.stride)*4); err != nil {
			return fmt.Errorf("vector: reading the snapshot's vectors: %w", err)
		}
	}
	return nil
}

// close closes the file of v's vectors, if any.
func (v *floats) close() error {
	if v.file == nil {
		return nil
	}
	return v.file.Close()
}

// mapChunks makes records 0..n-1 of c those of m from offset at: every
// whole chunk in place, the last one, if partial, copied (records are
// added after it).
func mapChunks[T float32 | int8](c *chunked[T], m []byte, at int64, n int) {
	size := int64(c.stride) * int64(unsafe.Sizeof(T(0)))
	for i := 0; i<<chunkBits < n; i++ {
		recs := min(n-i<<chunkBits, 1<<chunkBits)
		b := m[at+int64(i<<chunkBits)*size : at+int64(i<<chunkBits+recs)*size]
		part := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), recs*c.stride)
		if recs < 1<<chunkBits {
			part = append(make([]T, 0, c.stride<<chunkBits), part...)[:c.stride<<chunkBits]
		}
		c.chunks = append(c.chunks, part)
	}
}

// readChunks reads records 0..n-1 of c (grown to hold them).
func readChunks[T float32 | uint32 | int8](sr *snapReader, c *chunked[T], n int) {
	for i := 0; i<<chunkBits < n; i++ {
		recs := min(n-i<<chunkBits, 1<<chunkBits)
		sr.bytes(asBytes(c.chunks[i][:recs*c.stride]))
	}
}
