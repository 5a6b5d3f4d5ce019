package assoc

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
