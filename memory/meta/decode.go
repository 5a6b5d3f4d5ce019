package meta

import (
	"hash/maphash"
	"math"
	"sync"
	"unicode/utf8"
	"unique"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/memoria-ai/memoria/messages"
)

// metaBox is a decoded record with the place of its first sona: one
// object where there were two, for the collector to mark while the
// metadata cache holds it (a record's sonas are nearly always one).
type metaBox struct {
	m    messages.MemoryMeta
	sona [1]string
}

// decodePlain decodes a metadata record by hand, as proto.Unmarshal would
// and with its strings interned (intern, internMetrics), when it holds
// only the fields most records hold: its sonas, agent, kind, flags, times,
// counters and evaluation summary (its metrics packed or not: Marshal).
// It returns false for any other record —
// one with labels, an insight mark, joins, a field it does not know, a
// message field given twice (which proto.Unmarshal merges), a string that
// is not UTF-8, or bytes it cannot parse —, which Unmarshal reads.
//
// A record read from the store is decoded at each metadata cache miss: at
// 1M memories, where the cache holds a tenth of them, proto.Unmarshal and
// the interning after it were 7% of a recall's CPU, and a record of a
// dozen metrics made 70 allocations (README, stop 51).
// TestDecodePlainIsUnmarshal and FuzzDecodePlain hold it to Unmarshal.
func decodePlain(b []byte) (*messages.MemoryMeta, bool) {
	box := &metaBox{}
	m := &box.m
	evaluated, packed := false, false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		b = b[n:]
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			switch num {
			case 1, 2, 3:
				s, ok := names.of(v)
				if !ok {
					return nil, false
				}
				switch num {
				case 1:
					if m.Sonas == nil {
						box.sona[0] = s
						m.Sonas = box.sona[:1:1]
					} else {
						m.Sonas = append(m.Sonas, s)
					}
				case 2:
					m.AgentId = s
				default:
					m.Kind = s
				}
			case 14:
				if evaluated || packed {
					return nil, false // proto.Unmarshal merges the two; the metrics come after
				}
				evaluated = true
				if m.Evaluation = decodeEvalSummary(v); m.Evaluation == nil {
					return nil, false
				}
			case PackedField:
				if packed {
					return nil, false
				}
				packed = true
				if unpackInto(m, v) != nil {
					return nil, false
				}
			default:
				return nil, false
			}
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			switch num {
			case 4:
				m.Backbone = v != 0
			case 5:
				m.Archived = v != 0
			case 6:
				m.ExpiresAt = int64(v)
			case 8:
				m.AccessCount = int64(v)
			case 9:
				m.LastAccessTick = int64(v)
			case 10:
				m.CreatedAt = int64(v)
			case 12:
				m.Seq = v
			default:
				return nil, false
			}
		case protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 || num != 7 {
				return nil, false
			}
			b = b[n:]
			m.Importance = math.Float64frombits(v)
		default:
			return nil, false
		}
	}
	return m, true
}

// decodeEvalSummary decodes a record's evaluation summary as
// decodePlain does a record; nil where decodePlain gives up.
func decodeEvalSummary(b []byte) *messages.EvalSummary {
	s := &messages.EvalSummary{}
	entries, prioritised := 0, false
	for rest := b; len(rest) > 0; { // the metrics first counted, to size their map
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return nil
		}
		rest = rest[n:]
		if n = protowire.ConsumeFieldValue(num, typ, rest); n < 0 {
			return nil
		}
		rest = rest[n:]
		if num == 1 {
			entries++
		}
	}
	if entries > 0 {
		s.Metrics = make(map[string]float64, entries)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:] // counted above: it parses
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			b = b[n:]
			name, value, ok := decodeMetric(v)
			if !ok {
				return nil
			}
			s.Metrics[name] = value
		case num == 2 && typ == protowire.BytesType && !prioritised:
			prioritised = true
			v, n := protowire.ConsumeBytes(b)
			b = b[n:]
			if s.Priority = decodePriority(v); s.Priority == nil {
				return nil
			}
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			b = b[n:]
			s.Failed = v != 0
		default:
			return nil
		}
	}
	return s
}

// decodeMetric decodes one entry of the metrics' map: its name (interned)
// and value, either missing being its zero value.
func decodeMetric(b []byte) (string, float64, bool) {
	var name string
	var value float64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", 0, false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return "", 0, false
			}
			b = b[n:]
			s, ok := names.of(v)
			if !ok {
				return "", 0, false
			}
			name = s
		case num == 2 && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return "", 0, false
			}
			b = b[n:]
			value = math.Float64frombits(v)
		default:
			return "", 0, false
		}
	}
	return name, value, true
}

// decodePriority decodes an evaluation's priority; nil where decodePlain
// gives up.
func decodePriority(b []byte) *messages.Priority {
	p := &messages.Priority{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 3) && typ == protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil
			}
			b = b[n:]
			if num == 1 {
				p.Score = math.Float64frombits(v)
			} else {
				p.DecayRate = math.Float64frombits(v)
			}
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return nil
			}
			b = b[n:]
			p.Factors = append(p.Factors, string(v))
		default:
			return nil
		}
	}
	return p
}

// names are the process's copies of the strings that records repeat — the
// sonas' uuids, the agents, the kinds, the metrics' names —, found from a
// record's bytes without making a string of them first (of), or from a
// string decoded by proto.Unmarshal (intern). At most namesPerShard a
// shard: past that, unique.Make gives the copy, which it keeps only while
// a handle of it lives.
var names = newNameTable()

const namesPerShard = 4096

type nameTable struct {
	seed   maphash.Seed
	shards [16]nameShard
}

type nameShard struct {
	mu sync.RWMutex
	m  map[string]string
}

func newNameTable() *nameTable {
	t := &nameTable{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = map[string]string{}
	}
	return t
}

// of is the copy of the string of b, false when b is not UTF-8 (which
// proto.Unmarshal refuses).
func (t *nameTable) of(b []byte) (string, bool) {
	sh := &t.shards[maphash.Bytes(t.seed, b)%uint64(len(t.shards))]
	sh.mu.RLock()
	s, ok := sh.m[string(b)]
	sh.mu.RUnlock()
	if ok {
		return s, true
	}
	if !utf8.Valid(b) {
		return "", false
	}
	return sh.add(string(b)), true
}

// intern is the copy of s.
func (t *nameTable) intern(s string) string {
	sh := &t.shards[maphash.String(t.seed, s)%uint64(len(t.shards))]
	sh.mu.RLock()
	c, ok := sh.m[s]
	sh.mu.RUnlock()
	if ok {
		return c
	}
	return sh.add(s)
}

func (sh *nameShard) add(s string) string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c, ok := sh.m[s]; ok {
		return c
	}
	c := unique.Make(s).Value()
	if len(sh.m) < namesPerShard {
		sh.m[c] = c
	}
	return c
}
