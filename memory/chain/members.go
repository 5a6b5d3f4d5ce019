package chain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/vector"
)

// The sonas' members and centroids are derived from the chains: the open
// reads every chain entry and adds up every member's vector (LoadMembers),
// which at 1M memories is a scan of 1M entries and a pass over 1.5 GB of
// vectors. So they are kept in the vector snapshot beside the index whose
// vector ids they name (EncodeMembers, written just before the index), and
// a restart takes them from there (LoadMembersFrom): each sona's members,
// its centroid's running sum, and the chain length and head ACT they
// cover; then only the chain entries after that length are read. A head
// ACT names its whole chain (each ACT links its predecessor), so a chain
// whose entry at that length is another ACT, or shorter, or a sona the
// snapshot lacks, is read whole; any other disagreement — a member's
// vector id not in the index, a state that does not decode — reads every
// chain (LoadMembers). The result is LoadMembers': the same members in
// the same order, the same sums added in the same order.

// membersFormat names the layout of EncodeMembers; membersFormat1 is the
// one before it, whose sums were float64s, still read.
const (
	membersFormat  = "MSONAS2"
	membersFormat1 = "MSONAS1"
)

// EncodeMembers encodes every sona's members, centroid sum and the chain
// length and head they cover. Call it before the index's snapshot is
// taken: every vector id it names is then in the snapshot.
//
// The layout (unsigned varints unless said): "MSONAS2", dims, the number
// of sonas; each: its uuid (length, bytes), chain length, head ACT CID
// (length, bytes; 0 for none), the mean's count, dims little-endian
// float32 sums (when the count is not 0), the number of members, each a
// zig-zag varint of its difference from the previous one (from 0).
func (s *Sonas) EncodeMembers() []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	// Sized first: at 10,000 sonas the state is ~15 MB of means, and
	// growing it as it was written copied it over and over (3% of the
	// server's CPU while 10,000 sonas advanced, the snapshots taken).
	size := len(membersFormat) + 2*binary.MaxVarintLen64
	for id, st := range s.sonas {
		size += len(id) + len(st.rec.GetHead()) + 4*binary.MaxVarintLen64 + 4*s.dims + binary.MaxVarintLen64*len(st.members)
	}
	b := make([]byte, 0, size)
	b = append(b, membersFormat...)
	b = binary.AppendUvarint(b, uint64(s.dims))
	b = binary.AppendUvarint(b, uint64(len(s.sonas)))
	for id, st := range s.sonas {
		b = appendString(b, id)
		b = binary.AppendUvarint(b, uint64(st.rec.GetLength()))
		var head []byte
		if h := st.rec.GetHead(); h != "" {
			if c, err := cid.Decode(h); err == nil {
				head = c.Bytes()
			}
		}
		b = appendString(b, string(head))
		sum, n := st.mean.State()
		b = binary.AppendUvarint(b, uint64(n))
		if n > 0 {
			for _, x := range sum {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
			}
		}
		b = binary.AppendUvarint(b, uint64(len(st.members)))
		prev := int64(0)
		for _, m := range st.members {
			b = binary.AppendVarint(b, int64(m)-prev)
			prev = int64(m)
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// savedSona is one sona of an EncodeMembers state.
type savedSona struct {
	length  int64
	head    []byte
	sum     []float32
	n       int64
	members []uint64
}

var errMembersState = errors.New("chain: the sonas' saved state does not decode")

func decodeMembers(b []byte, dims int) (map[string]*savedSona, error) {
	// A float32 sum, or the float64 of the format before, rounded (a
	// centroid then differs from LoadMembers' in its last bits, until the
	// chains are read whole again).
	sum := func(d *base.Decoder) float32 { return math.Float32frombits(d.U32()) }
	switch {
	case bytes.HasPrefix(b, []byte(membersFormat)):
	case bytes.HasPrefix(b, []byte(membersFormat1)):
		sum = func(d *base.Decoder) float32 { return float32(math.Float64frombits(d.U64())) }
	default:
		return nil, errMembersState
	}
	d := &base.Decoder{B: b[len(membersFormat):], Bad: errMembersState}
	if d.Uvarint() != uint64(dims) {
		return nil, fmt.Errorf("%w: of other dimensions", errMembersState)
	}
	count := d.Uvarint()
	out := map[string]*savedSona{}
	for i := uint64(0); i < count && d.Err == nil; i++ {
		id := string(d.Bytes())
		sv := &savedSona{length: int64(d.Uvarint()), head: d.Bytes(), n: int64(d.Uvarint())}
		if sv.n > 0 {
			sv.sum = make([]float32, dims)
			for k := range sv.sum {
				sv.sum[k] = sum(d)
			}
		}
		nm := d.Uvarint()
		if nm > uint64(len(d.B)) {
			d.Fail()
			break
		}
		sv.members = make([]uint64, nm)
		prev := int64(0)
		for k := range sv.members {
			prev += d.Varint()
			sv.members[k] = uint64(prev)
		}
		out[id] = sv
	}
	if d.Err != nil || len(d.B) != 0 || uint64(len(out)) != count {
		return nil, errMembersState
	}
	return out, nil
}

// LoadMembersFrom is LoadMembers from a state EncodeMembers wrote into
// the snapshot ix was restored from (see above): it reads only the chain
// entries the state does not cover. It reports whether it used the state;
// when the state does not fit the store it reads every chain instead
// (LoadMembers), and why says why.
func (s *Sonas) LoadMembersFrom(r store.Reader, ix *vector.Index, state []byte) (used bool, why error, err error) {
	saved, why := s.fitState(r, ix, state)
	if why != nil {
		return false, why, s.LoadMembers(r, ix)
	}
	buf := make([]float32, s.dims) // room for a vector read from a file
	for id, st := range s.sonas {
		name := st.name
		sv := saved[id]
		from := int64(0)
		st.name, st.mean, st.members = nil, base.Mean{}, nil
		if sv != nil {
			from = sv.length
			st.members = sv.members
			st.mean = base.MeanOf(sv.sum, sv.n)
			if forgotten(sv.members, ix) {
				// A member forgotten since: its centroid again from its
				// name's and the members left, in chain order (Forget).
				st.members, st.mean = nil, base.Mean{}
				if len(name) == s.dims {
					st.mean.AddInPlace(name)
				}
				for _, vid := range sv.members {
					if ix.Live(vid) {
						st.members = append(st.members, vid)
						st.mean.AddInPlace(ix.Vector(vid, buf))
					}
				}
			}
		} else if len(name) == s.dims {
			st.mean.AddInPlace(name)
		}
		err := store.ScanFrom(r, EntriesPrefix(id), EntryKey(id, from), func(_, v []byte) error {
			_, mem, _, err := DecodeEntry(v)
			if err != nil {
				return err
			}
			return s.addMember(r, ix, id, st, mem, buf)
		})
		if err != nil {
			return true, nil, err
		}
	}
	return true, nil, nil
}

// fitState decodes state and checks it against the store and the index;
// a non-nil error says why it is not used.
func (s *Sonas) fitState(r store.Reader, ix *vector.Index, state []byte) (map[string]*savedSona, error) {
	if state == nil {
		return nil, errors.New("the snapshot holds no state of the sonas")
	}
	saved, err := decodeMembers(state, s.dims)
	if err != nil {
		return nil, err
	}
	n := uint64(ix.IDs())
	for id, sv := range saved {
		st, ok := s.sonas[id]
		if !ok {
			return nil, fmt.Errorf("the snapshot's sona %s is not in the store", id)
		}
		if st.rec.GetLength() < sv.length {
			return nil, fmt.Errorf("sona %s: the snapshot covers %d chain entries, the store has %d", id, sv.length, st.rec.GetLength())
		}
		for _, m := range sv.members {
			if m >= n {
				return nil, fmt.Errorf("sona %s: member %d is not in the index", id, m)
			}
		}
		if sv.length == 0 {
			if len(sv.members) > 0 {
				return nil, fmt.Errorf("sona %s: members of no chain entry", id)
			}
			continue
		}
		v, err := r.Get(EntryKey(id, sv.length-1))
		if err != nil {
			return nil, fmt.Errorf("sona %s: its chain entry %d: %w", id, sv.length-1, err)
		}
		act, _, _, err := DecodeEntry(v)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(act.Bytes(), sv.head) {
			return nil, fmt.Errorf("sona %s: its chain entry %d is ACT %s, not the snapshot's", id, sv.length-1, act)
		}
	}
	return saved, nil
}

// forgotten reports whether any of members was removed from ix.
func forgotten(members []uint64, ix *vector.Index) bool {
	if ix.Len() == ix.IDs() {
		return false // none removed
	}
	for _, m := range members {
		if !ix.Live(m) {
			return true
		}
	}
	return false
}

// addMember adds the memory of a chain entry of sona id to st, as
// LoadMembers does: a forgotten memory is no member, one without a
// vector is corruption. buf is room for a vector read from a file.
func (s *Sonas) addMember(r store.Reader, ix *vector.Index, id string, st *sonaState, mem cid.Cid, buf []float32) error {
	vid, ok := ix.ID(mem.KeyString())
	if !ok {
		if gone, err := r.Has(store.TombstoneKey(mem)); err != nil || gone {
			return err // forgotten: no longer a member
		}
		return s.st.Explain(fmt.Errorf("%w: memory %s of sona %s has no embedding", base.ErrCorrupt, mem, id))
	}
	st.members = append(st.members, vid)
	st.mean.AddInPlace(ix.Vector(vid, buf))
	return nil
}
