// Package assoc holds Living Memory's emergent thresholds: the running
// similarity distributions (SimStats, Welford's algorithm) and the
// threshold Signal Detection Theory derives from them
// (EmergentThreshold: mean + log(β)·std, bootstrapped while the
// distribution is small). Dedup, retrieval, consensus and the MemoryOS
// STM all decide with it.
//
// It will own the associations too (issue 14: assoc.go — the a/ typed
// links, h/ Hebbian co-access, d/ similarity statistics); so far it owns
// the encoding of a d/ record (EncodeStats, DecodeStats: n, mean and M2,
// 8 bytes BE each) and no state.
package assoc
