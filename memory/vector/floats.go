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
// microsecond).
//
// Vectors added after the restore are in the heap until the heap holds
// more than Options.HeapVectors bytes of them: then the oldest chunks the
// graph holds move to a scratch file of the index's (spill, Options.SpillDir),
// read the same way — until a snapshot's file holds them (AdoptFloats). The
// heap's chunks are always the last ones (from heapFrom).
//
// A copy of a floats made under the Index's kmu stays valid for the ids
// it covers: chunks never move, the file's ids are fixed at the restore,
// a chunk's vectors are in the spill before it leaves the heap, and gone
// has a bit for each removed id out of the heap from then on.
type floats struct {
	chunked[float32] // by id; a nil chunk's vectors are in file, or beyond fileEnd in spill
	// file holds the vectors of the nil chunks below fileEnd, id 0's at
	// offset base.
	file    *os.File
	base    int64
	fileEnd uint32
	// spill holds the nil chunks' vectors from fileEnd on, id i's at
	// offset i·stride·4 (a sparse file, unlinked: it goes with the process).
	spill *os.File
	// heapFrom is the first chunk in the heap: those before it are
	// file's or spill's.
	heapFrom int
	// gone marks the ids out of the heap removed since they left it (or
	// before it: their vectors in the file are zero anyway): they read as
	// zeros, as a removed vector in the heap is zeroed. Set under both gmu
	// and kmu, read under either.
	gone []uint64
}

// isGone reports whether id, one out of the heap, was removed.
func (f *floats) isGone(id uint32) bool {
	return int(id/64) < len(f.gone) && f.gone[id/64]&(1<<(id%64)) != 0
}

// markGone records that id, one out of the heap, was removed.
func (f *floats) markGone(id uint32) {
	if n := int(id/64) + 1; n > len(f.gone) {
		f.gone = append(f.gone, make([]uint64, n-len(f.gone))...)
	}
	f.gone[id/64] |= 1 << (id % 64)
}

// where is the file and offset of id's vector, one out of the heap.
func (f *floats) where(id uint32) (*os.File, int64) {
	if id < f.fileEnd {
		return f.file, f.base + int64(id)*int64(f.stride)*4
	}
	return f.spill, int64(id) * int64(f.stride) * 4
}

// inHeap reports whether id's vector is in the heap.
func (f *floats) inHeap(id uint32) bool { return f.chunks[id>>chunkBits] != nil }

// get returns id's vector: its heap copy (shared: do not modify) or,
// when it is out of the heap, read into buf (of at least stride elements;
// a removed one as zeros). A read error is a fault of a file the index
// checked or wrote and keeps open, as a mapping's would be (SIGBUS): it
// panics.
func (f *floats) get(id uint32, buf []float32) []float32 {
	if f.inHeap(id) {
		return f.at(id)
	}
	buf = buf[:f.stride:f.stride]
	if f.isGone(id) {
		clear(buf)
		return buf
	}
	file, at := f.where(id)
	if _, err := file.ReadAt(asBytes(buf), at); err != nil {
		panic(fmt.Sprintf("vector: reading vector %d from %s: %v", id, file.Name(), err))
	}
	return buf
}

// readRange reads the vectors of ids from..from+len(buf)/stride-1, all of
// one chunk out of the heap, into buf (removed ones as zeros).
func (f *floats) readRange(from uint32, buf []float32) {
	file, at := f.where(from)
	if _, err := file.ReadAt(asBytes(buf), at); err != nil {
		panic(fmt.Sprintf("vector: reading vectors from %d from %s: %v", from, file.Name(), err))
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
// read from its file from now on instead of the heap or the spill, as if
// restored from it: info is what Snapshot returned, f the file it was
// written to (durable; the index keeps a handle of its own, so the caller
// closes f). Only whole chunks move, and only when the snapshot's vectors
// are more than Options.HeapVectors, the bound under which a restore
// reads them into the heap. It returns the bytes of heap the index let go.
//
// A growing store would otherwise keep every vector added since its
// start in the heap until the next restart (1.5 KB a memory at 384
// dimensions), or in the spill, though its last snapshot has them. The
// file it read before, if any, is closed when no copy of its floats is
// left (its *os.File's finalizer); Unmap closes it if it is still open
// then. The spill's blocks of the vectors the snapshot holds are freed.
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
	x.smu.Lock()
	defer x.smu.Unlock()
	x.gmu.Lock()
	defer x.gmu.Unlock()
	x.kmu.Lock()
	defer x.kmu.Unlock()
	if whole > len(x.vecs.chunks) {
		return 0, fmt.Errorf("vector: adopting the snapshot's vectors: it has %d ids, the index %d", info.IDs, x.keys.Len())
	}
	if uint32(whole<<chunkBits) <= x.vecs.fileEnd {
		return 0, nil // its file holds them already
	}
	var freed int64
	for _, c := range x.vecs.chunks[:whole] {
		if c != nil {
			freed += int64(len(c)) * 4
		}
	}
	file, err := reopen(f)
	if err != nil {
		return 0, fmt.Errorf("vector: adopting the snapshot's vectors: %w", err)
	}
	v := floats{chunked: chunked[float32]{stride: x.dims, chunks: make([][]float32, len(x.vecs.chunks))},
		file: file, base: info.FloatsAt, fileEnd: uint32(whole << chunkBits),
		spill: x.vecs.spill, heapFrom: max(x.vecs.heapFrom, whole)}
	copy(v.chunks[whole:], x.vecs.chunks[whole:])
	for id := range x.removed {
		if id < uint64(v.heapFrom<<chunkBits) {
			v.markGone(uint32(id))
		}
	}
	if x.vecs.file != nil {
		x.retired = slices.DeleteFunc(x.retired, func(p weak.Pointer[os.File]) bool { return p.Value() == nil })
		x.retired = append(x.retired, weak.Make(x.vecs.file))
	}
	x.vecs, x.graph.vecs = v, v
	if v.spill != nil {
		// Nothing reads the spill's first whole chunks any more: every
		// read is of x.vecs under kmu, and the graph's copy is replaced.
		if v.heapFrom == whole {
			err = v.spill.Truncate(0)
		} else {
			err = punchHole(v.spill, 0, int64(whole)*x.chunkBytes())
		}
		if err != nil { // its blocks would stay taken: no more spilling
			x.stopSpilling(fmt.Errorf("vector: freeing the vectors out of the heap a snapshot holds in %s: %w", v.spill.Name(), err))
		}
	}
	return freed, nil
}

// chunkBytes is the bytes of a chunk of float32 vectors.
func (x *Index) chunkBytes() int64 { return int64(x.dims) << chunkBits * 4 }

// spillOld moves the heap's oldest chunks of float32 vectors, those the
// graph holds (any, while a lazy index's graph is not wanted), into the
// spill file while the heap holds more than Options.HeapVectors bytes of
// them and Options.SpillRoom allows. The builder calls it between
// insertions. A chunk is written before it leaves the heap; a failed
// write leaves it there and ends spilling (FloatBytes and
// Options.SpillStopped say why).
func (x *Index) spillOld() {
	if x.spillDir == "" {
		return
	}
	x.smu.Lock()
	defer x.smu.Unlock()
	cb := x.chunkBytes()
	for x.spillErr == nil {
		select {
		case <-x.stop: // Close waits for the builder
			return
		default:
		}
		x.gmu.RLock()
		placed := x.graph.n
		x.gmu.RUnlock()
		x.kmu.RLock()
		if !x.wanted.Load() {
			placed = x.keys.Len() // no graph to wait for (Options.Lazy)
		}
		c := x.vecs.heapFrom // moved only under smu (or by a restore, into an empty index)
		over := int64(len(x.vecs.chunks)-c)*cb > x.heapVecs && (c+1)<<chunkBits <= placed
		file := x.vecs.spill // set only under smu
		x.kmu.RUnlock()
		if !over || (x.spillRoom != nil && !x.spillRoom(cb)) {
			return
		}
		x.kmu.RLock() // Remove zeroes a vector in the heap under kmu
		x.spillBuf = append(x.spillBuf[:0], x.vecs.chunks[c]...)
		x.kmu.RUnlock()
		created := file == nil
		if created {
			var err error
			if file, err = tempFile(x.spillDir); err != nil {
				x.stopSpilling(fmt.Errorf("vector: creating a file for the vectors out of the heap in %s: %w", x.spillDir, err))
				return
			}
		}
		if _, err := file.WriteAt(asBytes(x.spillBuf), int64(c)*cb); err != nil {
			x.stopSpilling(fmt.Errorf("vector: writing vectors out of the heap to %s: %w", file.Name(), err))
			if created {
				file.Close()
			}
			return
		}
		x.kmu.Lock()
		v := x.vecs
		v.chunks = slices.Clone(v.chunks) // copies keep theirs
		v.chunks[c] = nil
		v.heapFrom, v.spill = c+1, file
		for id := uint64(c) << chunkBits; id < uint64(c+1)<<chunkBits; id++ {
			if x.removed[id] { // one removed since the copy is not zero in the file
				v.markGone(uint32(id))
			}
		}
		x.vecs = v
		x.kmu.Unlock()
	}
}

// FloatBytes reports where the float32 vectors are: the bytes of them in
// the heap and in the spill file, and why spilling stopped (nil while it
// goes on, or when there is no Options.SpillDir).
func (x *Index) FloatBytes() (heap, spilled int64, err error) {
	x.smu.Lock()
	err = x.spillErr
	x.smu.Unlock()
	x.kmu.RLock()
	defer x.kmu.RUnlock()
	v := &x.vecs
	cb := x.chunkBytes()
	heap = int64(len(v.chunks)-v.heapFrom) * cb
	if first := int(v.fileEnd >> chunkBits); v.heapFrom > first {
		spilled = int64(v.heapFrom-first) * cb
	}
	return heap, spilled, err
}

// stopSpilling records why spilling stops (under smu), and says it.
func (x *Index) stopSpilling(err error) {
	if x.spillErr != nil {
		return
	}
	x.spillErr = err
	if x.spillStop != nil {
		x.spillStop(err)
	}
}

// tempFile creates a file in dir that no name reaches: it goes with its
// last descriptor, a crash's included.
func tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".floats-*.spill")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
