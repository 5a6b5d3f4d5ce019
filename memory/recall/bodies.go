package recall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/memoria-ai/memoria/internal/durable"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// bodyFacts keeps, by vector id, what the evidence reads of a memory's
// body (body): its time (8 bytes), whether it asks a question and who
// speaks (4 bytes, the speaker's words kept once for all the memories).
// They never change — a memory's time is part of its content, else when
// it was first stored — and vector ids are never reused. They come from
// this process's appends (Recaller.Appended), from recall's reads of
// bodies, and at the open from the snapshot the last close wrote
// (Recaller.LoadBodies): a restarted server reads the body of no memory
// it knew before. Until stop 87 they were kept only per chain position
// of the sonas a recall had asked about, from recall's reads: at 1M
// memories a fresh server's recall read 66–90 bodies, the larger part of
// what it read.
type bodyFacts struct {
	mu       sync.Mutex
	times    []int64           // by vector id
	said     []uint32          // by vector id: saidKnown, saidQuestion and the speaker's id from bit saidSpeaker
	speakers [][]string        // by speaker id: a speaker's words (body.speaker); 0 is none; at most maxSpeakers more
	named    map[string]uint32 // a speaker's words, joined by spaces, → its id
	known    int               // ids with a body kept
	written  int               // known when the snapshot was last written or read
}

// maxSpeakers bounds the speakers kept: a body of another speaker is not
// kept, and is read again at each recall — where every memory names a
// speaker of its own, the table would grow with the memories.
const maxSpeakers = 1 << 16

// The bits of bodyFacts.said.
const (
	saidKnown    = 1 << 0
	saidQuestion = 1 << 1
	saidSpeaker  = 2 // the speaker's id is said >> saidSpeaker
)

func newBodyFacts() *bodyFacts {
	return &bodyFacts{speakers: [][]string{nil}, named: map[string]uint32{}}
}

// time is the time kept for the memory of vector id, if any.
func (f *bodyFacts) time(id uint64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id >= uint64(len(f.times)) {
		return 0, false
	}
	return f.times[id], f.said[id]&saidKnown != 0
}

// body is what is kept of the body of the memory of vector id, if any.
func (f *bodyFacts) body(id uint64) (body, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id >= uint64(len(f.times)) || f.said[id]&saidKnown == 0 {
		return body{}, false
	}
	said := f.said[id]
	return body{time: f.times[id], question: said&saidQuestion != 0, speaker: f.speakers[said>>saidSpeaker]}, true
}

// set keeps b, the body of the memory of vector id (not when its speaker
// would be one past maxSpeakers).
func (f *bodyFacts) set(id uint64, b body) {
	name := strings.Join(b.speaker, " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	said, ok := f.saidLocked(b.question, name, b.speaker)
	if ok {
		f.setLocked(id, b.time, said)
	}
}

// saidLocked is the said bits of a body (its speaker's id given out when
// it is new) whose speaker has words speaker, name those joined by
// spaces; ok false past maxSpeakers.
func (f *bodyFacts) saidLocked(question bool, name string, speaker []string) (uint32, bool) {
	said := uint32(saidKnown)
	if question {
		said |= saidQuestion
	}
	if len(speaker) > 0 {
		id, ok := f.named[name]
		if !ok {
			if len(f.speakers) > maxSpeakers {
				return 0, false
			}
			id = uint32(len(f.speakers))
			f.named[name] = id
			f.speakers = append(f.speakers, speaker)
		}
		said |= id << saidSpeaker
	}
	return said, true
}

func (f *bodyFacts) setLocked(id uint64, time int64, said uint32) {
	f.times, f.said = upTo(f.times, id), upTo(f.said, id)
	if f.said[id]&saidKnown == 0 {
		f.known++
	}
	f.times[id], f.said[id] = time, said
}

// reserve makes room for n ids (the open knows how many the index holds).
func (f *bodyFacts) reserve(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times, f.said = reserved(f.times, n), reserved(f.said, n)
}

// Appended keeps the body of the memory of vector id (m, of metadata mt)
// as a committed append wrote it, and what mt says of whether recall may
// see it and of its score: recall reads neither (chain.Options.OnAppended,
// on the committer after the commit's events, which could not name the
// memory: its vector id is given out after them).
func (s *Recaller) Appended(id uint64, m *model.Memory, mt *messages.MemoryMeta) {
	s.bodies.set(id, bodyOf(m, mt))
	if s.plain != nil {
		s.plain.stored(id, mt)
	}
}

// The body snapshot (<data>/bodies.snap) is what bodyFacts knew at a
// close. Derived state, and a cache: each entry names its memory by its
// vector id and the CRC-32C of its CID's bytes, checked against the
// index's key of that id when it is read (an index rebuilt in another
// order, or a memory forgotten since, drops the entry); the file is
// checked whole (CRC-32C); anything off and the facts are read from the
// bodies again, as recall goes. Layout, integers big-endian: magic
// "MBODYSNP", version u32 (1), uvarint count of speakers and each one's
// uvarint length and words (joined by spaces), uvarint count of entries
// and each one's uvarint id (the first) or id gap (the next), varint
// time, uvarint said bits and u32 key checksum; last the CRC-32C of all
// before.
const (
	bodySnapMagic   = "MBODYSNP"
	bodySnapVersion = 1
)

var (
	errBodySnap = errors.New("recall: body snapshot")
	castagnoli  = crc32.MakeTable(crc32.Castagnoli)
)

// BodiesChanged reports whether the recaller knows bodies the snapshot it
// last wrote or read lacks: more than min(50,000, a tenth of them) when
// much is true, any when it is false.
func (s *Recaller) BodiesChanged(much bool) bool {
	f := s.bodies
	f.mu.Lock()
	defer f.mu.Unlock()
	grown := f.known - f.written
	if much {
		return grown > min(50_000, f.known/10)
	}
	return grown > 0
}

// WriteBodies writes the body snapshot to path and returns how many
// bodies it holds.
func (s *Recaller) WriteBodies(path string) (int, error) {
	f := s.bodies
	f.mu.Lock()
	times, said, speakers, known := append([]int64(nil), f.times...), append([]uint32(nil), f.said...), f.speakers, f.known
	f.mu.Unlock()
	n := 0
	_, err := durable.Write(path, func(w io.Writer) error {
		crc := crc32.New(castagnoli)
		mw := io.MultiWriter(w, crc)
		b := append([]byte(bodySnapMagic), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(b[len(bodySnapMagic):], bodySnapVersion)
		b = binary.AppendUvarint(b, uint64(len(speakers)-1))
		for _, sp := range speakers[1:] {
			name := strings.Join(sp, " ")
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
		}
		entries := make([]byte, 0, 16*known)
		prev := uint64(0)
		for id, sd := range said {
			if sd&saidKnown == 0 {
				continue
			}
			key, ok := s.index.Key(uint64(id))
			if !ok {
				continue // forgotten
			}
			entries = binary.AppendUvarint(entries, uint64(id)-prev)
			entries = binary.AppendVarint(entries, times[id])
			entries = binary.AppendUvarint(entries, uint64(sd))
			entries = binary.BigEndian.AppendUint32(entries, keySum(key))
			prev = uint64(id)
			n++
		}
		b = binary.AppendUvarint(b, uint64(n))
		if _, err := mw.Write(b); err != nil {
			return err
		}
		if _, err := mw.Write(entries); err != nil {
			return err
		}
		_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
		return err
	})
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.written = max(f.written, known)
	f.mu.Unlock()
	return n, nil
}

// LoadBodies reads the body snapshot at path into what the recaller
// knows: it returns how many entries it took and how many it dropped
// (their memory is not the index's at that id). A body known already is
// kept as it is.
func (s *Recaller) LoadBodies(path string) (took, dropped int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	if len(b) < len(bodySnapMagic)+4+1+1+4 || string(b[:len(bodySnapMagic)]) != bodySnapMagic {
		return 0, 0, fmt.Errorf("%w: not one", errBodySnap)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, 0, fmt.Errorf("%w: its checksum does not match", errBodySnap)
	}
	b = body[len(bodySnapMagic):]
	if v := binary.BigEndian.Uint32(b); v != bodySnapVersion {
		return 0, 0, fmt.Errorf("%w: layout %d, this binary reads %d", errBodySnap, v, bodySnapVersion)
	}
	r := snapReader{b: b[4:]}
	names := make([]string, r.count())
	for i := range names {
		names[i] = string(r.bytes(int(r.uvarint())))
	}
	type entry struct {
		id   uint64
		time int64
		said uint64
		key  uint32
	}
	entries := make([]entry, r.count())
	id := uint64(0)
	for i := range entries {
		id += r.uvarint()
		entries[i] = entry{id: id, time: r.varint(), said: r.uvarint()}
		if k := r.bytes(4); k != nil {
			entries[i].key = binary.BigEndian.Uint32(k)
		}
	}
	if r.bad || len(r.b) != 0 {
		return 0, 0, fmt.Errorf("%w: a bad entry", errBodySnap)
	}
	// Checked against the index's keys before the lock: recalls go on
	// meanwhile.
	valid := entries[:0]
	for _, e := range entries {
		key, ok := s.index.Key(e.id)
		if e.said&saidKnown == 0 || e.said>>saidSpeaker > uint64(len(names)) || !ok || keySum(key) != e.key {
			dropped++
			continue
		}
		valid = append(valid, e)
	}
	f := s.bodies
	f.mu.Lock()
	defer f.mu.Unlock()
	// The snapshot's speakers by this process's ids (they differ once a
	// recall or an append kept a speaker before the load); 0: past
	// maxSpeakers, its bodies not taken.
	ids := make([]uint32, len(names)+1)
	for i, name := range names {
		if said, ok := f.saidLocked(false, name, strings.Fields(name)); ok {
			ids[i+1] = said >> saidSpeaker
		}
	}
	for _, e := range valid {
		sp := e.said >> saidSpeaker
		if sp > 0 && ids[sp] == 0 {
			dropped++
			continue
		}
		if e.id < uint64(len(f.said)) && f.said[e.id]&saidKnown != 0 {
			continue // known already
		}
		f.setLocked(e.id, e.time, uint32(e.said&(saidKnown|saidQuestion))|ids[sp]<<saidSpeaker)
		took++
	}
	f.written = f.known
	return took, dropped, nil
}

// keySum is the CRC-32C of an index key (a CID's bytes).
func keySum(key string) uint32 {
	return crc32.Checksum(unsafe.Slice(unsafe.StringData(key), len(key)), castagnoli)
}

// snapReader reads a snapshot's integers and bytes; bad is set at the
// first that does not fit.
type snapReader struct {
	b   []byte
	bad bool
}

func (r *snapReader) uvarint() uint64 { v, n := binary.Uvarint(r.b); return consumed(r, v, n) }

func (r *snapReader) varint() int64 { v, n := binary.Varint(r.b); return consumed(r, v, n) }

// count is a count of what follows, each at least a byte.
func (r *snapReader) count() uint64 {
	v := r.uvarint()
	if v > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return 0
	}
	return v
}

// consumed is v, read from the next n bytes of r (n ≤ 0: none fit).
func consumed[T int64 | uint64](r *snapReader, v T, n int) T {
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) bytes(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.bad, r.b = true, nil
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}
