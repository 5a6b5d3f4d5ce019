// Package actors runs Memoria's protoactor-go actor tree. Actors only adapt:
// each Receive is a switch that hands its message to functions of package
// memory and carries out what they return.
//
//	root (one-for-one, bounded restarts, exponential backoff)
//	└── sonas (one-for-one, bounded restarts)
//	    └── sona/<uuid>  one per active sona, owner of its ACT chain
//
// A sona actor is the only writer of its chain. It plans each append on the
// head it holds in memory and submits it to the store's committer at once,
// so appends pipeline behind one group commit; the store re-checks the head
// in the same transaction, so a chain never forks even if an actor's view
// is stale. Slow work (embedding, recall, the LLM call, waiting for
// durability) runs off the mailbox and re-enters with ReenterAfter, so a
// sona keeps taking messages while its model thinks.
//
// Sona actors are virtual: the sonas supervisor spawns one on the first
// message for its uuid, it asks to be passivated after the configured idle
// time, and everything it holds is recoverable from the store. A crashed
// sona actor is restarted and reloads from the store after every write
// submitted before the crash has settled; nothing acknowledged is lost,
// because a write is acknowledged only once it is durable.
package actors
