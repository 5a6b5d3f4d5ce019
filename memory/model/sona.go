package model

import (
	"fmt"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// Sona is the state of a sona's chain as the program uses it, its CIDs
// parsed. Its stored record (key s/, and the API's view of a sona) is
// messages.Sona, whose CIDs are strings: SonaOf parses one at the storage
// edge, Record writes one back.
type Sona struct {
	UUID string
	Name string
	// Head is the chain's head ACT, LastMemory the memory of that ACT;
	// both nil for an empty chain.
	Head       *cid.Cid
	LastMemory *cid.Cid
	// Length is the number of ACTs; the head has seq Length-1.
	Length int64
	// CreatedAt is in Unix seconds.
	CreatedAt int64
}

// SonaOf parses a stored sona record. A CID that does not parse is
// damage: base.ErrCorrupt.
func SonaOf(rec *messages.Sona) (Sona, error) {
	s := Sona{UUID: rec.GetUuid(), Name: rec.GetName(), Length: rec.GetLength(), CreatedAt: rec.GetCreatedAt()}
	var err error
	if s.Head, err = optionalCID(rec.Head); err != nil {
		return Sona{}, fmt.Errorf("%w: head of sona %s: %v", base.ErrCorrupt, s.UUID, err)
	}
	if s.LastMemory, err = optionalCID(rec.LastMemory); err != nil {
		return Sona{}, fmt.Errorf("%w: last memory of sona %s: %v", base.ErrCorrupt, s.UUID, err)
	}
	return s, nil
}

// Record is the stored record of s.
func (s Sona) Record() *messages.Sona {
	rec := &messages.Sona{Uuid: s.UUID, Name: s.Name, Length: s.Length, CreatedAt: s.CreatedAt}
	if s.Head != nil {
		rec.Head = proto.String(s.Head.String())
	}
	if s.LastMemory != nil {
		rec.LastMemory = proto.String(s.LastMemory.String())
	}
	return rec
}

// optionalCID parses an optional CID field; absent or empty is nil.
func optionalCID(s *string) (*cid.Cid, error) {
	if s == nil || *s == "" {
		return nil, nil
	}
	c, err := cid.Decode(*s)
	if err != nil {
		return nil, err
	}
	return &c, nil
}
