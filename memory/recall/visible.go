package recall

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/memoria-ai/memoria/memory/eumas"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// plainMemories remembers, by vector id, the memories whose metadata a
// recall last read as plain — not archived, not expiring, not an insight,
// so visible to every recall that may see their sona — and which sona
// they were read a member of, so that the context evidence (place) can
// tell a neighbour visible without reading and decoding its metadata:
// with its time kept by bodyFacts, a warm recall reads nothing of
// the memories around its candidates. (Those reads were the larger part
// of a recall's CPU over HTTP at 100k memories, issue 15: about 190 a
// recall, each a Badger lookup and a protobuf decode, half of them missing
// the metadata cache.) 32 bytes a memory (32 MB at 1M), never evicted.
//
// Metadata is mutable: every committed write of a memory's metadata key
// replaces what is kept of it by what the record written says, a delete
// forgets it (Recaller.Committed, from the store's commit events), and a
// read in a view begun before that write does not record (generations).
// The open's scan of every memory's metadata fills it (Recaller.KnowPlain),
// and so does a committed append (Recaller.Appended), so that neither a
// restarted server nor the one that grew the store reads a neighbour's
// metadata.
type plainMemories struct {
	mu     sync.RWMutex // recalls read it (visible) many times each
	seed   maphash.Seed
	gen    uint64      // bumped by every forget
	facts  []plainFact // by vector id
	scores []scoreFact // by vector id, as far as one was recorded
	// The sonas and kinds the scores name, by number (their index plus
	// one): a fact holds no string, whose pointer the collector would
	// follow a memory.
	sonas, kinds   []string
	sonaNo, kindNo map[string]uint32
	sonaSlices     [][]string // a one-sona Sonas of each sona, shared
}

// plainFact is what is kept of one memory; the zero value knows nothing.
type plainFact struct {
	plain    bool
	backbone bool
	sona     uint64 // hash of the sona it was read a member of (0: none)
	created  int64  // MemoryMeta.created_at: its time when its body has none
	forgot   uint64 // the generation of its last forget
}

// scoreFact is the rest of what a candidate's score takes of a plain
// memory's metadata (scorer.candidate): recall scores a known candidate
// without reading its metadata, and reads the records of those it
// returns only (scorer.complete). At 1M memories the reads of ~77
// candidates' records a recall were a fifth of its CPU, and the pages of
// the metadata's tables they touched much of its RSS (issue 15, stop
// 85). Kept for a memory of one sona or none, with its plain fact — by
// recall's reads (record), the open's scan (KnowPlain), its append
// (Appended) and the commits of its record (Recaller.Committed) — and
// dropped by a commit that deletes either record. Its access tick is the
// stored one with the touches buffered when it was read: a candidate's
// takes the buffer's since (meta.Store.TouchedTick).
// 32 bytes a memory.
type scoreFact struct {
	importance float64
	decay      float64 // the evaluation's multiplier of the decay rate (eumas.DecayMultiplier)
	access     int64   // MemoryMeta.last_access_tick
	sona       uint32  // its sona's number; 0: none
	kind       uint16  // its kind's number; 0: nothing is known
	// fromRecord: read from the record alone (the open's scan), whose
	// importance and access tick are the memory's only while it has no
	// hot state's record (meta.Store.HotAbsent); recall's reads merge it.
	fromRecord bool
}

// takeHot has s take the importance and access tick of h, the memory's
// hot state as its o/ record holds it — what a read of its metadata
// would give the score now — from the record alone no longer.
func (s *scoreFact) takeHot(h meta.Hot) {
	s.importance, s.access, s.fromRecord = h.Importance, h.LastAccessTick, false
}

func newPlainMemories() *plainMemories {
	return &plainMemories{seed: maphash.MakeSeed(), sonaNo: map[string]uint32{}, kindNo: map[string]uint32{}}
}

// number is name's number in names (adding it): its index plus one.
func number[S string | []byte](names *[]string, nos map[string]uint32, name S) uint32 {
	if n, ok := nos[string(name)]; ok {
		return n
	}
	*names = append(*names, string(name))
	n := uint32(len(*names))
	nos[string(name)] = n
	return n
}

// numbered is s with the numbers of kind and sona (none when !hasSona),
// p.mu held; ok false past the kinds a fact can number.
func numbered[S string | []byte](p *plainMemories, s scoreFact, kind, sona S, hasSona bool) (scoreFact, bool) {
	k := number(&p.kinds, p.kindNo, kind)
	if k > math.MaxUint16 {
		return s, false
	}
	s.kind = uint16(k)
	if hasSona {
		s.sona = number(&p.sonas, p.sonaNo, sona)
		for len(p.sonaSlices) < len(p.sonas) {
			p.sonaSlices = append(p.sonaSlices, []string{p.sonas[len(p.sonaSlices)]})
		}
	}
	return s, true
}

// setScore keeps s as vector id's score fact, p.mu held.
func (p *plainMemories) setScore(id uint64, s scoreFact) {
	p.scores = upTo(p.scores, id)
	p.scores[id] = s
}

func (p *plainMemories) hash(sona string) uint64 {
	if sona == "" {
		return 0
	}
	return maphash.String(p.seed, sona) | 1 // never 0
}

// generation is to be taken before the view that reads a memory's
// metadata begins, and given to record.
func (p *plainMemories) generation() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.gen
}

// record keeps what m, the metadata of vector id read in a view begun at
// generation gen, says, unless a write of it was committed since; sona
// is the recalling sona (the memory's first, for the open's scan).
func (p *plainMemories) record(id uint64, m *messages.MemoryMeta, sona string, gen uint64) {
	p.keepMeta(id, m, sona, gen, false)
}

// stored keeps what m, the metadata a commit stored with the new memory
// of vector id, says (Recaller.Appended): its own importance and access
// tick are the memory's while it has no hot state's record, as a record
// the open's scan reads.
func (p *plainMemories) stored(id uint64, m *messages.MemoryMeta) {
	p.keepMeta(id, m, firstOr(m.Sonas), math.MaxUint64, true)
}

// keepMeta is record, the score's importance and access tick from the
// record alone when fromRecord (scoreFact).
func (p *plainMemories) keepMeta(id uint64, m *messages.MemoryMeta, sona string, gen uint64, fromRecord bool) {
	f := plainFact{plain: !m.Archived && m.ExpiresAt == 0 && m.Insight == nil, backbone: m.Backbone, created: m.CreatedAt}
	if slices.Contains(m.Sonas, sona) {
		f.sona = p.hash(sona)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.keepLocked(id, f, gen) || !f.plain || len(m.Sonas) > 1 {
		return
	}
	s := scoreFact{importance: m.Importance, decay: eumas.DecayMultiplier(m.Evaluation), access: m.LastAccessTick, fromRecord: fromRecord}
	if s, ok := numbered(p, s, m.Kind, firstOr(m.Sonas), len(m.Sonas) == 1); ok {
		p.setScore(id, s)
	}
}

func firstOr(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

// keep keeps f as record does.
func (p *plainMemories) keep(id uint64, f plainFact, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keepLocked(id, f, gen)
}

// keepLocked is keep with p.mu held; false when a write since the view
// began forbids it. What was known of the memory's score goes.
func (p *plainMemories) keepLocked(id uint64, f plainFact, gen uint64) bool {
	p.grow(id)
	if f.forgot = p.facts[id].forgot; f.forgot > gen {
		return false // written since the view began
	}
	p.facts[id] = f
	if id < uint64(len(p.scores)) {
		p.scores[id] = scoreFact{}
	}
	return true
}

func (p *plainMemories) grow(id uint64) { p.facts = upTo(p.facts, id) }

// upTo is s long enough to hold index id, its new elements zero. (Grown
// an element at a time by the open's scan, the copies as the slices grew
// were most of its cost: reserve first.)
func upTo[T any](s []T, id uint64) []T {
	n := int(id) + 1
	if n <= len(s) {
		return s
	}
	if n > cap(s) {
		s = slices.Grow(s, max(n-len(s), len(s)/4))
	}
	return s[:n] // past its length a slice here holds zeros: none is ever shortened
}

// reserved is s with room for n elements.
func reserved[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s
	}
	return slices.Grow(s, n-len(s))
}

// reserve makes room for the facts of n memories.
func (p *plainMemories) reserve(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.facts, p.scores = reserved(p.facts, n), reserved(p.scores, n)
}

// ReserveKnown makes room for what recall keeps of n memories: the open
// calls it before its scan of their metadata (KnowPlain).
func (s *Recaller) ReserveKnown(n int) {
	if n <= 0 {
		return
	}
	s.bodies.reserve(n)
	if s.plain != nil {
		s.plain.reserve(n)
	}
}

// visible reports whether vector id is known plain and visible in a
// recall of sona — in sona scope (sonaScope) it must have been read a
// member of sona, or be the backbone's — and when it was stored.
func (p *plainMemories) visible(id uint64, sona string, sonaScope bool) (created int64, ok bool) {
	h := p.hash(sona)
	p.mu.RLock()
	defer p.mu.RUnlock()
	if id >= uint64(len(p.facts)) {
		return 0, false
	}
	f := p.facts[id]
	return f.created, f.plain && (!sonaScope || f.backbone || f.sona == h)
}

// known is what is kept of vector id for scoring it: its plain fact, its
// score fact, its kind and its Sonas (shared: not to be modified; nil for
// none); ok false when it is not known plain with a score.
func (p *plainMemories) known(id uint64) (f plainFact, s scoreFact, kind string, sonas []string, ok bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if id >= uint64(len(p.scores)) || p.scores[id].kind == 0 {
		return f, s, "", nil, false
	}
	f, s = p.facts[id], p.scores[id]
	if s.sona > 0 {
		sonas = p.sonaSlices[s.sona-1]
	}
	return f, s, p.kinds[s.kind-1], sonas, true
}

// written is a commit's write of a memory's metadata or hot state, as
// Committed passes them to plainMemories.commit.
type written struct {
	id  uint64
	hot bool     // of its hot state (else of its metadata)
	ok  bool     // h, or f and rs, hold what was written (else: deleted or unreadable)
	h   meta.Hot // hot and ok: the state written
	// !hot and ok: what the record written says (plainFields)
	f  plainFact
	rs recordScore
}

// commit takes a commit's writes, in order, under one lock (the touches'
// write is up to 1,024 memories' hot states, and recalls share the lock).
//
// A write of a memory's metadata has what is kept of it be what the
// record written says, as the open's scan reads a record (KnowPlain); a
// delete, or a record it cannot read, drops it. (Until stop 92 every
// such write dropped it, and a recall read the record again: the
// evaluator rewrites each new memory's record once it has evaluated it.)
// A write of its hot state drops its score when deleted; else a known
// score takes the importance and access tick written, which is what a
// read of the record would now give it (the touches still buffered are
// added at use): the touches' write changes no more than these, and
// Reinforce the importance. Until stop 88 any such write dropped the
// score, and every memory a recall returns has its touches written within
// recall.touch_flush (issue 15). Either way a read in a view begun before
// does not record.
func (p *plainMemories) commit(ws []written) {
	if len(ws) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range ws {
		p.gen++
		p.grow(w.id)
		if !w.hot {
			var s scoreFact
			if w.ok {
				s, _ = p.scoreOfRecord(w.f, w.rs)
			} else {
				w.f = plainFact{}
			}
			w.f.forgot = p.gen
			p.facts[w.id] = w.f
			if s.kind != 0 || w.id < uint64(len(p.scores)) {
				p.setScore(w.id, s)
			}
			continue
		}
		p.facts[w.id].forgot = p.gen
		if w.id >= uint64(len(p.scores)) {
			continue
		}
		switch s := &p.scores[w.id]; {
		case !w.ok:
			*s = scoreFact{}
		case s.kind != 0:
			s.takeHot(w.h)
		}
	}
}

// Committed takes a commit's events (store.Store.Subscribe, before the
// store's first write): what is known of a memory whose metadata a
// commit wrote is what the record written says, and nothing once deleted;
// one whose hot state it wrote (Reinforce, the touches' write) has its
// score take what was written (plainMemories.commit).
func (s *Recaller) Committed(e store.Event) {
	var ws []written
	for i, k := range e.Keys {
		var hot bool
		switch {
		case strings.HasPrefix(k, string(meta.Prefix)):
			k = k[len(meta.Prefix):]
		case strings.HasPrefix(k, string(meta.HotPrefix)):
			k, hot = k[len(meta.HotPrefix):], true
		default:
			continue
		}
		// (A memory without a vector id has nothing kept: ids are never
		// reused, and a forgotten memory's key no longer has one, which
		// knownVisible checks.)
		if id, ok := s.index.ID(k); ok {
			w := written{id: id, hot: hot}
			if hot {
				w.h, w.ok = meta.HotValue(e.Values[i])
			} else if v := e.Values[i]; v != nil {
				var err error
				w.f, w.rs, err = plainFields(v, s.plain)
				w.ok = err == nil
			}
			ws = append(ws, w)
		}
	}
	s.plain.commit(ws)
}

// knownVisible reports whether the memory of vector id, of index key key
// (its CID's KeyString), is known visible in this recall without reading
// its metadata — known plain, in the recall's sona and not excluded — and
// when it was stored (its time when its body has none). Time travel reads.
// (By the id its sona's chain holds: a lookup of its key's id was most of
// what this cost. Every chat's recall excludes the chat's input: until
// stop 66 any exclusion made every neighbour's metadata read, a fifth of
// a long-lived sona's recall.)
func (sc *scorer) knownVisible(id uint64, key string) (created int64, ok bool) {
	p := sc.self.plain
	if p == nil || sc.q.AsOf != nil || sc.excludes(id, key) {
		return 0, false
	}
	return p.visible(id, sc.q.Sona, sc.q.Scope == ScopeSona)
}

// excludes reports whether the recall excludes the memory of vector id and
// key key: by the excluded memories' ids, found at the first ask, not by
// key, whose bytes lie in the index's arena (a cache miss a neighbour). An
// excluded memory the index did not hold then (a chat's input, its append
// in flight) can only have an id given out since: only such an id's key
// is compared.
func (sc *scorer) excludes(id uint64, key string) bool {
	if len(sc.excluded) == 0 {
		return false
	}
	if sc.excludedIDs == nil {
		sc.excludedIDs = make([]uint64, 0, len(sc.excluded))
		sc.excludedFrom = uint64(sc.self.index.IDs())
		for c := range sc.excluded {
			if xid, ok := sc.self.index.ID(c.KeyString()); ok {
				sc.excludedIDs = append(sc.excludedIDs, xid)
			} else {
				sc.excludedKeys = append(sc.excludedKeys, c.KeyString())
			}
		}
	}
	return slices.Contains(sc.excludedIDs, id) || id >= sc.excludedFrom && slices.Contains(sc.excludedKeys, key)
}

// remember keeps what m, the metadata of the memory of vector id read in
// the recall's view, says. The generation is the one before the view
// began (scorer.plainGen): a commit's events come after its writes are
// visible to new views, so a write of the memory the view may not see
// forbids it.
func (sc *scorer) remember(id uint64, m *messages.MemoryMeta) {
	if sc.self.plain != nil {
		sc.self.plain.record(id, m, sc.q.Sona, sc.plainGen)
	}
}

// PlainGeneration is to be taken before the view of a scan that calls
// KnowPlain begins.
func (s *Recaller) PlainGeneration() uint64 {
	if s.plain == nil {
		return 0
	}
	return s.plain.generation()
}

// KnowPlain keeps what raw, the encoded metadata of memory c read in a
// view begun at generation gen (PlainGeneration), says of whether recall
// may see it and of its score: the open's scan of every memory's metadata
// calls it. It decodes only the fields it needs (the labels, joins and
// evaluation's metrics are skipped); a record it cannot decode is left to
// recall's own read, which names the damage. (The importance and access
// tick of a record count only while the memory has no hot state's record:
// knownCandidate asks, meta.Store.HotAbsent.)
func (s *Recaller) KnowPlain(c cid.Cid, raw []byte, gen uint64) {
	s.KnowPlainKey(c.KeyString(), raw, gen)
}

// KnowPlainKey is KnowPlain of the memory of CID key (cid.Cid.KeyString),
// and returns its vector id, ok false when the vector index does not hold
// the memory; it keeps nothing of key.
func (s *Recaller) KnowPlainKey(key string, raw []byte, gen uint64) (uint64, bool) {
	id, ok := s.index.ID(key)
	if ok {
		s.KnowPlainAt(id, raw, gen)
	}
	return id, ok
}

// KnowPlainAt is KnowPlain of the memory of vector id id (the caller
// knows it is the memory's).
func (s *Recaller) KnowPlainAt(id uint64, raw []byte, gen uint64) {
	if s.plain == nil {
		return
	}
	if f, rs, err := plainFields(raw, s.plain); err == nil {
		s.plain.keepRecord(id, f, rs, gen)
	}
}

// KnowHot takes what the open's load of the hot states' records
// (meta.Store.LoadHot) read of the memory of CID key, h, in a view begun
// at generation gen: a score KnowPlain kept from its metadata record takes
// the importance and access tick that h holds in the record's place, and
// is no longer read for them (knownCandidate asks meta.Store.HotAbsent of
// a score from the record alone). At 1M memories, a quarter with a hot
// state's record, a recall read ~10 candidates' records for nothing but
// this (issue 15, stop 88).
func (s *Recaller) KnowHot(key []byte, h meta.Hot, gen uint64) {
	if s.plain == nil {
		return
	}
	if id, ok := s.index.ID(string(key)); ok {
		s.plain.knowHot(id, h, gen)
	}
}

func (p *plainMemories) knowHot(id uint64, h meta.Hot, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id >= uint64(len(p.scores)) || p.facts[id].forgot > gen {
		return // nothing kept, or written since the view began
	}
	if s := &p.scores[id]; s.kind != 0 && s.fromRecord {
		s.takeHot(h)
	}
}

// keepRecord keeps what KnowPlain read: f, and rs as its score when it
// is one.
func (p *plainMemories) keepRecord(id uint64, f plainFact, rs recordScore, gen uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.keepLocked(id, f, gen) {
		return
	}
	if s, ok := p.scoreOfRecord(f, rs); ok {
		p.setScore(id, s)
	}
}

// scoreOfRecord is the score fact of a record plainFields read as f and rs,
// p.mu held; ok false when it makes none.
func (p *plainMemories) scoreOfRecord(f plainFact, rs recordScore) (scoreFact, bool) {
	if !f.plain || !rs.ok {
		return scoreFact{}, false
	}
	s := scoreFact{importance: rs.importance, decay: rs.decay, access: rs.access, fromRecord: true}
	if s, ok := numbered(p, s, rs.kind, rs.sona, rs.sona != nil); ok {
		return s, true
	}
	return scoreFact{}, false
}

// recordScore is what plainFields reads of a record's score fact.
type recordScore struct {
	ok         bool   // at most one sona: a score fact
	kind, sona []byte // sona nil: none
	importance float64
	decay      float64
	access     int64
}

// Plain metadata fields: the MemoryMeta field numbers plainFields reads.
const (
	plainSonas      = 1
	plainKind       = 3
	plainBackbone   = 4
	plainArchived   = 5
	plainExpires    = 6
	plainImportance = 7
	plainAccess     = 9
	plainCreated    = 10
	plainInsight    = 13
	plainEvaluation = 14
	// Within the evaluation (EvalSummary) and its priority (Priority).
	evalPriority  = 2
	evalFailed    = 3
	priorityDecay = 3
)

// TrimPlain appends to dst the fields of raw, an encoded MemoryMeta, that
// KnowPlain reads — its first two sonas (whether it has more than one),
// kind, backbone, archived, expires_at, importance, last_access_tick,
// created_at, insight as an empty message when set, and of its evaluation
// the priority's decay rate and failed — so that KnowPlain of the result
// keeps what KnowPlain of raw keeps (TestPlainFieldsAgreeWithProto). The
// metadata snapshot of the open stores these instead of the whole
// records.
func TrimPlain(dst, raw []byte) ([]byte, error) {
	sonas := 0
	var ev evalDecay
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == plainSonas && typ == protowire.BytesType:
			if sonas < 2 {
				dst = append(protowire.AppendTag(dst, num, typ), v...)
				sonas++
			}
		case num == plainKind && typ == protowire.BytesType,
			(num == plainBackbone || num == plainArchived || num == plainExpires || num == plainCreated || num == plainAccess) && typ == protowire.VarintType,
			num == plainImportance && typ == protowire.Fixed64Type:
			dst = append(protowire.AppendTag(dst, num, typ), v...)
		case num == plainInsight && typ == protowire.BytesType:
			dst = append(protowire.AppendTag(dst, num, typ), 0)
		case num == plainEvaluation && typ == protowire.BytesType:
			b, _ := protowire.ConsumeBytes(v)
			return ev.read(b)
		}
		return nil
	})
	if err != nil {
		return dst, err
	}
	return ev.append(dst), nil
}

// evalDecay is what a record's evaluation (its occurrences merged, as
// proto merges them) says of the memory's decay (eumas.DecayMultiplier).
type evalDecay struct {
	set, priority, failed bool
	rate                  float64
}

// read merges the encoded EvalSummary b into e.
func (e *evalDecay) read(b []byte) error {
	e.set = true
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == evalFailed && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			e.failed = x != 0
		case num == evalPriority && typ == protowire.BytesType:
			e.priority = true
			p, _ := protowire.ConsumeBytes(v)
			return eachField(p, func(num protowire.Number, typ protowire.Type, v []byte) error {
				if num == priorityDecay && typ == protowire.Fixed64Type {
					x, _ := protowire.ConsumeFixed64(v)
					e.rate = math.Float64frombits(x)
				}
				return nil
			})
		}
		return nil
	})
}

// multiplier is eumas.DecayMultiplier of the evaluation e read.
// (Without making the message: at the open, a million of them.)
func (e *evalDecay) multiplier() float64 {
	if !e.set || !e.priority || e.failed {
		return eumas.DecayMultiplier(nil)
	}
	return eumas.RateMultiplier(e.rate)
}

// append appends to dst an evaluation field that reads as e does, none
// when e changes no decay.
func (e *evalDecay) append(dst []byte) []byte {
	if !e.set || !e.priority && !e.failed {
		return dst
	}
	var body []byte
	if e.priority {
		var p []byte
		if e.rate != 0 {
			p = protowire.AppendTag(p, priorityDecay, protowire.Fixed64Type)
			p = protowire.AppendFixed64(p, math.Float64bits(e.rate))
		}
		body = protowire.AppendTag(body, evalPriority, protowire.BytesType)
		body = protowire.AppendBytes(body, p)
	}
	if e.failed {
		body = protowire.AppendTag(body, evalFailed, protowire.VarintType)
		body = protowire.AppendVarint(body, 1)
	}
	dst = protowire.AppendTag(dst, plainEvaluation, protowire.BytesType)
	return protowire.AppendBytes(dst, body)
}

// eachField calls fn with each field of the encoded message b: its number,
// type and encoded value.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if err := fn(num, typ, b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// KnownPlain reports what recall knows of memory c without reading its
// metadata: whether it is known plain and visible in a recall of sona in
// sona scope, and when it was stored (tests compare an open's knowledge
// with another's).
func (s *Recaller) KnownPlain(c cid.Cid, sona string) (created int64, ok bool) {
	if s.plain == nil {
		return 0, false
	}
	id, ok := s.index.ID(c.KeyString())
	if !ok {
		return 0, false
	}
	return s.plain.visible(id, sona, true)
}

// KnownScore describes what recall knows of memory c's score without
// reading its metadata ("" for nothing): tests compare an open's
// knowledge with another's.
func (s *Recaller) KnownScore(c cid.Cid) string {
	if s.plain == nil {
		return ""
	}
	id, ok := s.index.ID(c.KeyString())
	if !ok {
		return ""
	}
	_, f, kind, sonas, ok := s.plain.known(id)
	if !ok {
		return ""
	}
	return fmt.Sprint(f.importance, f.decay, f.access, kind, sonas, f.fromRecord)
}

// plainFields decodes what KnowPlain keeps of an encoded MemoryMeta — its
// plain fact, and what its score fact would be — without decoding the
// record into a message: the open reads every memory's metadata this way
// (at 1M memories, a message and a string each was a second of CPU and
// garbage).
func plainFields(raw []byte, p *plainMemories) (plainFact, recordScore, error) {
	var (
		f                     plainFact
		rs                    recordScore
		sonas                 int
		isArchived, isInsight bool
		expiresAt             uint64
		ev                    evalDecay
	)
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == plainSonas && typ == protowire.BytesType:
			if sonas++; sonas == 1 {
				rs.sona, _ = protowire.ConsumeBytes(v)
			}
		case num == plainKind && typ == protowire.BytesType:
			rs.kind, _ = protowire.ConsumeBytes(v)
		case num == plainImportance && typ == protowire.Fixed64Type:
			x, _ := protowire.ConsumeFixed64(v)
			rs.importance = math.Float64frombits(x)
		case (num == plainBackbone || num == plainArchived || num == plainExpires || num == plainCreated || num == plainAccess) && typ == protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			switch num {
			case plainBackbone:
				f.backbone = x != 0
			case plainArchived:
				isArchived = x != 0
			case plainExpires:
				expiresAt = x
			case plainAccess:
				rs.access = int64(x)
			default:
				f.created = int64(x)
			}
		case num == plainInsight && typ == protowire.BytesType:
			isInsight = true // set: not plain, whatever it holds
		case num == plainEvaluation && typ == protowire.BytesType:
			b, _ := protowire.ConsumeBytes(v)
			return ev.read(b)
		}
		return nil
	})
	if err != nil {
		return plainFact{}, recordScore{}, err
	}
	f.plain = !isArchived && expiresAt == 0 && !isInsight
	if len(rs.sona) > 0 {
		f.sona = maphash.Bytes(p.seed, rs.sona) | 1 // p.hash of it
	}
	rs.ok, rs.decay = sonas <= 1, ev.multiplier()
	return f, rs, nil
}
