// Package base is the bottom of memory/: what every part of it shares and
// nothing else. It imports nothing of Memoria's, so every package under
// memory/, memory itself and its callers can use it without a cycle —
// raft's raftpb, pebble's internal/base.
//
// It owns:
//   - the error classes (ErrInvalid, ErrNotFound, ErrCorrupt, ErrTooLarge,
//     ErrClosed, ErrLocked, ErrDiskFull, ErrLostWrites,
//     ErrEmbedderMismatch, ErrChainConflict, ErrAmbiguous): every error of
//     memory/ wraps one, and transports classify with errors.Is;
//   - Page, one page of a listing;
//   - the vector arithmetic shared by recall, the tiers and the sona
//     centroids (Dot, Cosine): one copy each, accumulated in float64 in
//     index order so that results are the same bits on every run (the one
//     normalisation is llm.Normalize, where embeddings are made);
//   - the helpers that build keys (Join, U64, KeyText), read a key back
//     as a CID without copying it (CID), and the embeddings' codec
//     (EncodeVector, DecodeVector: little-endian float32s).
//
// It owns no key space and keeps no state.
package base
