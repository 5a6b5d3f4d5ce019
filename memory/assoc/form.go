package assoc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// A link list is stored in its compact form (since stop 83 of issue 15),
// and read in it or as the messages.Associations every earlier build
// wrote, which the first rewrite of the list replaces:
//
//	0x00 0x01                    the form: no protobuf message starts with
//	                             a 0 byte (field number 0 is invalid)
//	zigzag varint                the first link's updated_at (the base)
//	then each link:
//	  head byte                  bits 0–2 its type (typeCodes; 0: named,
//	                             a uvarint length and the name follow);
//	                             bit 3 set: the target is a CIDv1 DAG-CBOR
//	                             SHA2-256 CID, its 32-byte digest alone
//	                             follows; else a uvarint length and the
//	                             target's bytes; bits 4–7 zero
//	  8 bytes                    its strength (float64 bits, little endian)
//	  zigzag varint              its updated_at less the base (wrapping)
//	  the name, then the target, as the head says
//
// A link took ~64 bytes as a message — its type's name, a tag a field —
// and takes ~43 here: the lists of the memories a response drew on are
// rewritten with every response that draws on them, and at five minutes
// of advances they were half of the bytes written into Badger's tree.
// An empty list is no bytes in both forms.
const (
	formMark    = 0x00
	formCompact = 0x01

	headType    = 0x07
	headDigest  = 0x08
	headUnknown = 0xf0

	digestLen = 32
)

// typeCodes are the head's codes of the link types; 0 is a name given
// in full, 1 no type.
var typeCodes = [...]string{2: Similar, 3: CoAccess, 4: Sequential, 5: Causal, 6: Related}

// cidPrefix is what precedes the digest of a CIDv1 DAG-CBOR SHA2-256 CID:
// every memory's.
var cidPrefix = [4]byte{0x01, 0x71, 0x12, 0x20}

func typeCode(t string) byte {
	if t == "" {
		return 1
	}
	for c, name := range typeCodes {
		if name == t {
			return byte(c)
		}
	}
	return 0
}

// appendEntries appends the list of es to b in the compact form; none
// appends nothing.
func appendEntries(b []byte, es []Entry) []byte {
	if len(es) == 0 {
		return b
	}
	first := es[0].UpdatedAt
	b = append(b, formMark, formCompact)
	b = binary.AppendVarint(b, first)
	for _, e := range es {
		head := typeCode(e.Type)
		short := len(e.Target) == len(cidPrefix)+digestLen && [4]byte(e.Target) == cidPrefix
		if short {
			head |= headDigest
		}
		b = append(b, head)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.Strength))
		b = binary.AppendVarint(b, e.UpdatedAt-first)
		if head&headType == 0 {
			b = binary.AppendUvarint(b, uint64(len(e.Type)))
			b = append(b, e.Type...)
		}
		if short {
			b = append(b, e.Target[len(cidPrefix):]...)
		} else {
			b = binary.AppendUvarint(b, uint64(len(e.Target)))
			b = append(b, e.Target...)
		}
	}
	return b
}

// compact reports whether raw is a list in the compact form.
func compact(raw []byte) bool { return len(raw) > 0 && raw[0] == formMark }

// eachCompact calls fn with each link of raw, a list in the compact form,
// until fn returns false. A target whose prefix the form left out is
// built again in ts; any other aliases raw.
func eachCompact(raw []byte, ts *builtTargets, fn func(Entry) bool) error {
	if len(raw) < 2 || raw[1] != formCompact {
		return corruptForm("unknown form")
	}
	first, n := binary.Varint(raw[2:])
	if n <= 0 {
		return corruptForm("base time")
	}
	raw = raw[2+n:]
	if len(raw) == 0 {
		return corruptForm("no link") // an empty list is no bytes
	}
	for len(raw) > 0 {
		head := raw[0]
		if head&headUnknown != 0 || len(raw) < 9 {
			return corruptForm("link head")
		}
		var e Entry
		e.Strength = math.Float64frombits(binary.LittleEndian.Uint64(raw[1:9]))
		d, n := binary.Varint(raw[9:])
		if n <= 0 {
			return corruptForm("link time")
		}
		e.UpdatedAt = first + d
		raw = raw[9+n:]
		switch code := head & headType; {
		case code == 0:
			name, rest, err := lengthPrefixed(raw)
			if err != nil {
				return err
			}
			e.Type, raw = linkType(name), rest
		case int(code) < len(typeCodes) && typeCodes[code] != "":
			e.Type = typeCodes[code]
		case code != 1:
			return corruptForm("link type")
		}
		if head&headDigest != 0 {
			if len(raw) < digestLen {
				return corruptForm("target")
			}
			e.Target, raw = ts.cid(raw[:digestLen]), raw[digestLen:]
		} else {
			t, rest, err := lengthPrefixed(raw)
			if err != nil {
				return err
			}
			e.Target, raw = t, rest
		}
		if !fn(e) {
			return nil
		}
	}
	return nil
}

// builtTargets holds the targets a compact list's reader builds again
// from their digests: each until the next (a walk, in one), or all of
// them (keep: a decode, whose entries outlive the reading, in buf).
type builtTargets struct {
	one  [len(cidPrefix) + digestLen]byte
	buf  []byte
	keep bool
}

// cid is the CID of digest, built in t.
func (t *builtTargets) cid(digest []byte) []byte {
	if !t.keep {
		copy(t.one[len(cidPrefix):], digest)
		copy(t.one[:], cidPrefix[:])
		return t.one[:]
	}
	const size = len(cidPrefix) + digestLen
	if cap(t.buf)-len(t.buf) < size {
		// A new buffer: the targets built in the old one stay as they are.
		t.buf = make([]byte, 0, max(8*size, 2*cap(t.buf)))
	}
	t.buf = append(append(t.buf, cidPrefix[:]...), digest...)
	return t.buf[len(t.buf)-size:]
}

func lengthPrefixed(b []byte) (v, rest []byte, err error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, corruptForm("length")
	}
	return b[n : n+int(l)], b[n+int(l):], nil
}

func corruptForm(what string) error {
	return fmt.Errorf("%w: link list: %s", base.ErrCorrupt, what)
}

// Unmarshal reads a stored link list, in either form, as the message it
// stands for (export).
func Unmarshal(raw []byte) (*messages.Associations, error) {
	out := &messages.Associations{}
	err := eachEntry(raw, &builtTargets{}, func(e Entry) bool {
		out.Links = append(out.Links, &messages.Association{Type: e.Type, Strength: e.Strength, UpdatedAt: e.UpdatedAt, Target: append([]byte(nil), e.Target...)})
		return true
	})
	return out, err
}

// ReadList reads the link list under key in r as the message it stands
// for (an empty one when there is none).
func ReadList(r store.Reader, key []byte) (*messages.Associations, error) {
	raw, err := r.Get(key)
	if errors.Is(err, base.ErrNotFound) {
		return &messages.Associations{}, nil
	} else if err != nil {
		return nil, err
	}
	return Unmarshal(raw)
}

// Marshal is list as stored (import), in its order.
func Marshal(list *messages.Associations) []byte {
	es := make([]Entry, len(list.GetLinks()))
	for i, l := range list.GetLinks() {
		es[i] = Entry{Target: l.Target, Type: l.Type, Strength: l.Strength, UpdatedAt: l.UpdatedAt}
	}
	return appendEntries(nil, es)
}
