// Package model is Memoria's immutable data model: what a memory and an
// ACT are, how they encode and how they are addressed. It does no I/O and
// keeps no state.
//
// A Memory (schema.ipldsch, embedded; Schema returns it) is a DAG-CBOR
// block addressed by its CIDv1 (codec dag-cbor 0x71, sha2-256): the same
// memory always has the same bytes and the same CID, in every process (a
// test encodes the fixtures in a child process to hold that). Its Data is
// a union of exactly one member (self, other, text, file), represented
// inline and discriminated by "kind". Edges are sorted by target bytes
// (SortEdges) and weighted. A file memory's content is the CID of a raw
// block (codec 0x55).
//
// An Act is one step of a sona's strictly linear chain: {sona, memory,
// prev, seq}; the first has no prev.
//
// Prepared is a memory ready to join a chain (validated, encoded,
// addressed, embedded, with its initial metadata); an Append is the plan
// of one append: the ACT that will become the chain's new head
// (PlanAppend, Append.Next). Neither touches the store: package memory
// commits them.
//
// # Domain types and stored records
//
// The generated messages types are the stored records and the API's
// payloads; the program works on Go types with CIDs as cid.Cid values,
// converted at the storage edge. Sona is a sona's chain state: SonaOf
// parses the stored record (messages.Sona, whose head and last memory are
// CID strings) and reports a CID that does not parse as base.ErrCorrupt,
// never a panic; Sona.Record writes it back. Data is the typed union of a
// memory's data: the REST insert converts its JSON union to it once, the
// MCP insert tool builds it directly.
//
// # Invariants
//
//   - Encoding and decoding validate (Memory.Validate): exactly one data
//     member, valid UTF-8, finite weights, defined links, edges sorted and
//     unique; what breaks the schema or these rules is base.ErrInvalid.
//   - What decodes re-encodes, stably: the re-encoded block decodes to a
//     memory with the same CID (FuzzDecodeMemory explores it).
//
// It owns no key space; the store keeps memory blocks under b/ (see
// package memory's doc).
package model
