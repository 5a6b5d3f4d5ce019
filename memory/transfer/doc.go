// Package transfer moves a self's memories out of a store and into
// another: Living Memory's export (JSON, and the CAR archive the api
// builds from the same snapshot), its import, and reembedding a store
// into another embedding space.
//
//   - Export (Transfer.Export) writes one consistent snapshot: the sonas
//     with their chains, the memories with their metadata, associations,
//     co-access partners and embeddings, the file blocks, the anchors, the
//     pending consensus and the conflicts — everything an import needs to
//     rebuild the same chains. A sona's export carries the backbone and
//     the prefixes of other chains that its memories' edges reach, so it
//     imports on its own. The transport renders it (ExportWriter).
//   - Import is planned here and carried out by the actors: PlanImport
//     checks the whole document against the schema and the store, writing
//     nothing; ImportBlocks and ImportSonas write the file blocks and the
//     sona records; the plan's steps are then appended, in order, by each
//     chain's one writer; FinishImport restores what appends do not carry.
//   - Reembed rewrites every embedding of a store that nothing else holds.
//
// What it needs of the rest of memory/ comes through two interfaces:
// Records, the key spaces other packages own (the sonas and their chains,
// the memories' metadata and embeddings), read and written inside a
// snapshot or a transaction; and Env, which adds the state beside them
// (the decoded-memory cache, the embedder, the live sonas, the preparation
// of an append). It owns no key space: an export is a document, not
// stored state.
//
// # Invariants
//
//   - An export is one snapshot, taken once every write submitted before
//     it is durable.
//   - An import is checked whole before anything is written: a bad
//     document is base.ErrInvalid (base.ErrTooLarge for an oversized
//     block), a store whose sonas or backbone (in a cluster, the
//     cluster's: Transfer.ExpectBackbone) differ from the export's is
//     base.ErrChainConflict, and either writes nothing.
//   - The steps replay the chains so that every memory is created after
//     what it links to and, when the store was empty, in the exported
//     store's insertion order: the same memory CIDs, the same ACT CIDs,
//     the same insertion log. Each append is at its exported seq, so a
//     chain that moved meanwhile fails the import instead of forking.
//   - A sona the store holds with a prefix of the exported chain is
//     continued (an interrupted import runs again); any other difference
//     is a conflict.
//   - Reembed sets the store's embedder identity last: an interrupted run
//     leaves a store that is still refused and can be run again.
package transfer
