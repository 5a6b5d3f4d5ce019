// Package cluster makes a Memoria process a member of a cluster (issue 16,
// README "Cluster"): membership and the sonas' ownership and heads in
// etcd, requests routed to a sona's owner, appends made durable on R
// members before they are acknowledged.
//
// # Membership
//
// A member registers <prefix>/members/<id> under an etcd lease
// (cluster.lease_ttl) that it keeps alive; its id lives in its data
// directory (memoria.member), so a restarted member is the same member (it
// revokes its previous run's lease when it joins: that run is dead, the
// data directory being locked). Members watch the prefix to know who is
// live. A member that loses its lease — etcd unreachable for longer than
// the lease, or the process paused past it — is fenced: it drops every
// claim it made, then joins again under a new lease. Close revokes the
// lease, so a member stopped cleanly leaves at once.
//
// # Names and retries
//
// A sona's name is claimed cluster-wide before the sona is created
// (names.go): a transaction puts <prefix>/names/<name>/<uuid> only if no
// key under <prefix>/names/<name>/ exists. Writes that carry a request id
// (an idempotency key, recorded by the append and replicated with it) are
// sent again by a forwarding member to the sona's next owner when the
// owner dies or answers 503 (route.go): the new owner answers from its
// copy of the chain what the old one appended.
//
// # Forgetting
//
// A forget is planned on every live member, then applied on every member
// (forget.go): each excises what it holds and records the tombstones of
// the rest; a member that was down copies the tombstones it lacks when it
// joins. Chains caught up from another member carry forgotten entries as
// their ACT and tombstone (StagedAppend.forgotten).
//
// # Gathering
//
// A self-scope recall reads every sona, so it is gathered from every live
// member (gather.go): POST /recall, MCP recall, and the recall inside a
// chat step or a query (actors.Options.Recall is Cluster.Recall). Each
// member's answer carries the memories' blocks, checked against their
// CIDs; a member that does not answer in time is left out and named
// (X-Memoria-Unanswered, actors.CollectUnanswered). A chat step's response
// may link memories only other members hold: the actor marks it
// Replicated (its links were checked by the gathering), as a replica's
// copy is.
//
// # Relayed answers
//
// What a member relays from another is checked where it names content
// by CID (verify.go): blocks and CARs, GET /memory/{cid} and every JSON
// answer an owner sends back (each rendered memory must encode to its
// CID), GET /file/{cid}. Metadata, evaluations, lists' order and streamed
// answers are trusted: members trust each other for them (they share
// cluster.secret; a forwarded request carries its client's credentials).
// Peers' refusals are typed (PeerError) and classified by their code.
//
// # Upkeep: heartbeat, dream, evaluator, consensus
//
// Every member runs its own heartbeat, evaluator and consensus actor
// (per-member workers, not cluster singletons): a singleton would need an
// election, and would be one more thing to fail over, for work that is
// mostly per sona anyway. The backbone is the one exception, and it needs
// no election: its sona's owner key is it.
//
//   - The heartbeat's sweep (expiry, pruning, branch statistics) and the
//     evaluator work on each member's own copy: their results (importance,
//     evaluations, associations, tiers) are per-member metadata, like the
//     indexes, and not replicated; a member that takes a sona over has its
//     own already. The evaluator's model calls are therefore made on every
//     member that holds a memory (R times).
//   - Chain writes — the heartbeat's merges and folds, a dream's insights
//     — are made for each sona by the one member that tends it
//     (Cluster.Tends: its owner, or, when it has none, the first live
//     member by rendezvous of those its head names), through its actor,
//     staged on R members and fenced like any append. The others skip it
//     and get the writes as a replica; a heartbeat never takes a sona
//     over.
//   - The backbone is one chain for the cluster (backbone.go): its sona's
//     uuid is claimed once in etcd (<prefix>/backbone) and adopted by
//     every member; its routes (/backbone…, /conflicts…) go to its owner,
//     whose consensus actor writes it through the chain writer like any
//     append — staged on every live member (every recall reads it), R of
//     which must take it, and fenced in etcd. Its consensus ledger
//     (pending concepts, conflicts) travels whole with each write: with
//     the append that changes it, or, for a write that appends nothing,
//     in a stage request of its own followed by a head move (its fence).
//   - A read of a sona served by a member that does not own it first
//     applies the staged appends the head in etcd covers (Route, settle).
//
// # Why etcd directly and not protoactor's cluster
//
// The design asked for protoactor-go's cluster with its etcd provider for
// membership and placement. This package uses etcd's client directly:
//
//   - Ownership must be fenced in etcd anyway (protoactor does not
//     guarantee one activation per identity: a member paused past its
//     lease kept serving its grains while another served the same ids).
//     The owner key, bound to the member's lease and compared on every
//     head move, is then the placement; protoactor's identity lookup
//     (rendezvous over members) would be a second placement that
//     disagrees with it after every join and pause.
//   - Owner keys must be bound to the member's lease, and the member must
//     hear when the lease is lost. The provider keeps its lease private
//     and, when it is lost, silently grants a new one and re-registers:
//     the process is never told it was fenced.
//   - The provider's member record cannot carry the member's API URL
//     (Node.Meta is not serialised), which routing needs.
//   - Its state (members, shutdown, the cluster error) is shared between
//     goroutines without synchronisation, and its etcd calls have no
//     timeouts (context.TODO()): a member started while etcd is down
//     hangs instead of failing with an error.
//   - A protoactor cluster needs its remote (gRPC) transport between
//     members; the members here talk HTTP on the peer port, which the
//     tests and operators can reach with curl.
//
// The actor model stays: a sona is still one actor on its owner, activated
// on demand and passivated when idle.
package cluster
