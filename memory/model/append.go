package model

import (
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/messages"
)

// Prepared is a memory ready to join a chain: validated, encoded,
// addressed and embedded. Preparing is the costly part of a write and needs
// no ownership of the chain, so it runs before the owner appends.
type Prepared struct {
	Memory *Memory
	CID    cid.Cid
	Block  []byte
	Vector []float32
	// Meta carries the initial metadata: kind, agent_id, labels, backbone.
	// The store fills in sonas, times and counters.
	Meta *messages.MemoryMeta
	// Neighbors are the sona's memories nearest to this one when it was
	// prepared, best first (see PrepareInsert); they become "similar"
	// associations and feed the sona's similarity distribution.
	Neighbors []Neighbor
	// EdgeType is the association type of the memory's edges: "causal"
	// for a response and what it drew on, "related" (default) otherwise.
	EdgeType string
	// PageOf, when set, makes this memory the response of an advance whose
	// input is PageOf: the dialogue page (input, response) is handed to the
	// sona's STM in the same transaction as the append.
	PageOf *cid.Cid
	// Archive are memories of the sona to archive in the same transaction
	// as the append: the sources of a merge (see Merge).
	Archive []cid.Cid
	// ExpectSeq, when set, is the seq the append must land at: an import
	// replaying an exported chain fails rather than append elsewhere.
	ExpectSeq *int64
	// Imported marks a memory from an export: the anchoring rules are not
	// applied to it (the export lists its anchors).
	Imported bool
	// Replicated marks a copy of an append that its chain's owner checked
	// (package cluster): its edges may name memories that other members
	// hold, so they are not required to be stored here.
	Replicated bool
	// File, when set, is the raw block a file memory's content names,
	// stored by the append's transaction (it counts as stored for the
	// memory's own link check).
	File []byte
	// Request, when set, is the client's request that appends the
	// memory: the append records it, so that a retry of the request finds
	// the append instead of appending again (an idempotency key).
	Request *Request
	// Forgotten, when set, is a memory that was forgotten, appended by
	// its CID alone (Memory, Block, Vector and Meta are unset): the
	// append writes its ACT and this tombstone, no content (an import of a
	// chain that holds forgotten memories).
	Forgotten *messages.Tombstone
}

// Request is a client's request as an append records it: its id (the
// idempotency key, unique per sona) and, when the request's answer is
// more than the append's seq and memory, that answer.
type Request struct {
	ID     string
	Result []byte
}

// Neighbor is a nearby memory and its cosine similarity.
type Neighbor struct {
	CID cid.Cid
	Sim float64
}

// Append is a planned append of one memory to a sona's chain: the ACT that
// will become the new head. The chain's owner plans appends one after the
// other, each extending the previous plan, and submits them in order.
type Append struct {
	Sona     string
	Prev     *cid.Cid // current head, nil for an empty chain
	Seq      int64    // current length
	Act      cid.Cid
	ActBlock []byte
	Item     *Prepared
	Now      int64 // unix seconds, the store time of the memory
}

// PlanAppend builds the ACT that appends item to a chain whose head is
// head and whose length is length.
func PlanAppend(sona string, head *cid.Cid, length int64, item *Prepared, now int64) (*Append, error) {
	act := Act{Sona: sona, Memory: item.CID, Prev: head, Seq: length}
	c, block, err := act.Encode()
	if err != nil {
		return nil, err
	}
	return &Append{Sona: sona, Prev: head, Seq: length, Act: c, ActBlock: block, Item: item, Now: now}, nil
}

// Next returns the head and length after a.
func (a *Append) Next() (head *cid.Cid, length int64) {
	c := a.Act
	return &c, a.Seq + 1
}
