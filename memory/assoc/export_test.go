package assoc

import (
	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/store"
)

// BufferTables reports how many memories the co-access buffer's current
// table numbers, and how many tables its pending lists use.
func BufferTables(g *Graph) (size, inUse int) {
	b := g.buf
	b.mu.Lock()
	defer b.mu.Unlock()
	used := map[*targets]bool{}
	for _, pl := range b.pending {
		used[pl.t] = true
	}
	return b.targets.cids.Len(), len(used)
}

// SetBufferTableMax has the co-access buffer start a new table at n
// memories.
func SetBufferTableMax(g *Graph, n int) {
	g.buf.mu.Lock()
	defer g.buf.mu.Unlock()
	g.buf.tableMax = n
}

// MaxFlushLists is how many lists one flush of the co-access buffer
// writes at most.
const MaxFlushLists = maxFlushLists

// PutNew is Put of a new memory at insertion-log position logSeq, whose
// links back g may hold (an append's).
func PutNew(g *Graph, tx store.Tx, from cid.Cid, links []Link, now int64, logSeq uint64) error {
	return g.put(tx, from, links, now, logSeq)
}

// FlushOp is the op of one flush of the links back held.
func FlushOp(g *Graph) store.Op { return g.back.flushOp }

// Due makes every list held due for the next flush, submitting none.
func Due(g *Graph) {
	g.back.mu.Lock()
	g.back.forcing++
	g.back.mu.Unlock()
}
