package vector

import (
	"fmt"
	"os"
	"slices"
	"weak"
)

// floats is the float32 vectors by id. Those a snapshot restored from a
// file (Restore) are not in memory, neither the heap nor a mapping: each
// read of one is a read of the file (pread) into the reader's buffer.
// The float32 vectors are read only to score a search's few candidates
// again and in exact scans of small sets, never by the graph's searches;
// mapped, each such read faulted in the pages around it (the kernel maps
// cached pages around a fault whatever the advice), so random searches
// made nearly all of them resident within seconds — 1.5 GB of a 1M
// store's resident set. Read, they stay in the page cache, which the
// kernel shares and takes back, and cost a system call each (about a
// microsecond). Vectors added after the restore are in the heap.
//
// A copy of a floats made under the Index's kmu stays valid for the ids
// it covers: chunks never move, the file's ids are fixed at the restore,
// and gone has a bit for each of them from then on.
type floats struct {
	chunked[float32] // by id; a nil chunk's vectors are in file
	// file holds the vectors of the nil chunks, id 0's at offset base.
	file *os.File
	base int64
	// gone marks the file's ids removed since the restore (or before it:
	// their vectors in the file are zero anyway): they read as zeros, as
	// a removed vector in the heap is zeroed. Set under both gmu and kmu,
	// read under either.
	gone []uint64
}

// isGone reports whether id, a file's, was removed.
func (f *floats) isGone(id uint32) bool { return f.gone[id/64]&(1<<(id%64)) != 0 }

// markGone records that id, a file's, was removed.
func (f *floats) markGone(id uint32) { f.gone[id/64] |= 1 << (id % 64) }

// inHeap reports whether id's vector is in the heap (not the file's).
func (f *floats) inHeap(id uint32) bool { return f.chunks[id>>chunkBits] != nil }

// get returns id's vector: its heap copy (shared: do not modify) or,
// when it is the file's, read into buf (of at least stride elements; a
// removed one as zeros). A read error is a fault of the file the restore
// checked and keeps open, as a mapping's would be (SIGBUS): it panics.
func (f *floats) get(id uint32, buf []float32) []float32 {
	if f.inHeap(id) {
		return f.at(id)
	}
	buf = buf[:f.stride:f.stride]
	if f.isGone(id) {
		clear(buf)
		return buf
	}
	if _, err := f.file.ReadAt(asBytes(buf), f.base+int64(id)*int64(f.stride)*4); err != nil {
		panic(fmt.Sprintf("vector: reading vector %d of the restored snapshot %s: %v", id, f.file.Name(), err))
	}
	return buf
}

// readRange reads the vectors of ids from..from+len(buf)/stride-1, every
// one of them the file's, into buf (removed ones as zeros).
func (f *floats) readRange(from uint32, buf []float32) {
	if _, err := f.file.ReadAt(asBytes(buf), f.base+int64(from)*int64(f.stride)*4); err != nil {
		panic(fmt.Sprintf("vector: reading vectors from %d of the restored snapshot %s: %v", from, f.file.Name(), err))
	}
	for i := range len(buf) / f.stride {
		if f.isGone(from + uint32(i)) {
			clear(buf[i*f.stride : (i+1)*f.stride])
		}
	}
}

// remove makes id's vector zeros (call with gmu and kmu held).
func (f *floats) remove(id uint32) {
	if f.inHeap(id) {
		clear(f.at(id))
		return
	}
	f.markGone(id)
}

// AdoptFloats has the float32 vectors of a snapshot this index wrote
// read from its file from now on instead of the heap, as if restored
// from it: info is what Snapshot returned, f the file it was written to
// (durable; the index keeps a handle of its own, so the caller closes f).
// Only whole chunks move, and only when the snapshot's vectors are more
// than Options.HeapVectors, the bound under which a restore reads them
// into the heap. It returns the bytes of heap the index let go.
//
// A growing store would otherwise keep every vector added since its
// start in the heap until the next restart (1.5 KB a memory at 384
// dimensions), though its last snapshot has them. The file it read
// before, if any, is closed when no copy of its floats is left (its
// *os.File's finalizer); Unmap closes it if it is still open then.
func (x *Index) AdoptFloats(f *os.File, info SnapshotInfo) (int64, error) {
	whole := info.IDs >> chunkBits
	if info.FloatsAt <= 0 || whole == 0 || int64(info.IDs)*int64(x.dims)*4 <= x.heapVecs {
		return 0, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if end := info.FloatsAt + int64(info.IDs)*int64(x.dims)*4; fi.Size() < end {
		return 0, fmt.Errorf("vector: adopting the snapshot's vectors: %s holds %d bytes, its vectors end at %d", f.Name(), fi.Size(), end)
	}
	x.gmu.Lock()
	defer x.gmu.Unlock()
	x.kmu.Lock()
	defer x.kmu.Unlock()
	if whole > len(x.vecs.chunks) {
		return 0, fmt.Errorf("vector: adopting the snapshot's vectors: it has %d ids, the index %d", info.IDs, len(x.keys))
	}
	var freed int64
	for _, c := range x.vecs.chunks[:whole] {
		if c != nil {
			freed += int64(len(c)) * 4
		}
	}
	if freed == 0 {
		return 0, nil
	}
	file, err := reopen(f)
	if err != nil {
		return 0, fmt.Errorf("vector: adopting the snapshot's vectors: %w", err)
	}
	v := floats{chunked: chunked[float32]{stride: x.dims, chunks: make([][]float32, len(x.vecs.chunks))},
		file: file, base: info.FloatsAt, gone: make([]uint64, (whole<<chunkBits+63)/64)}
	copy(v.chunks[whole:], x.vecs.chunks[whole:])
	for id := range x.removed {
		if id < uint64(whole<<chunkBits) {
			v.markGone(uint32(id))
		}
	}
	if x.vecs.file != nil {
		x.retired = slices.DeleteFunc(x.retired, func(p weak.Pointer[os.File]) bool { return p.Value() == nil })
		x.retired = append(x.retired, weak.Make(x.vecs.file))
	}
	x.vecs, x.graph.vecs = v, v
	return freed, nil
}
