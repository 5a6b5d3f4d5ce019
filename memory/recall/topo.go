package recall

import (
	"container/heap"
	"strings"

	"github.com/ipfs/go-cid"
)

// TopoSort orders memories so that every memory comes after the memories
// its edges point to (its supports), breaking ties by time, then CID.
func TopoSort(rs []*Recalled) []*Recalled {
	index := make(map[cid.Cid]int, len(rs))
	for i, r := range rs {
		index[r.CID] = i
	}
	pending := make([]int, len(rs))      // unresolved supports within the set
	dependents := make([][]int, len(rs)) // who waits on whom
	for i, r := range rs {
		for _, e := range r.Memory.Edges {
			if j, ok := index[e.Target]; ok && j != i {
				pending[i]++
				dependents[j] = append(dependents[j], i)
			}
		}
	}
	ready := &readyHeap{rs: rs}
	for i := range rs {
		if pending[i] == 0 {
			heap.Push(ready, i)
		}
	}
	out := make([]*Recalled, 0, len(rs))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		out = append(out, rs[i])
		for _, d := range dependents[i] {
			if pending[d]--; pending[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	return out
}

type readyHeap struct {
	rs  []*Recalled
	idx []int
}

func (h *readyHeap) Len() int { return len(h.idx) }
func (h *readyHeap) Less(i, j int) bool {
	a, b := h.rs[h.idx[i]], h.rs[h.idx[j]]
	if ta, tb := a.Time(), b.Time(); ta != tb {
		return ta < tb
	}
	return strings.Compare(a.CID.KeyString(), b.CID.KeyString()) < 0
}
func (h *readyHeap) Swap(i, j int) { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *readyHeap) Push(v any)    { h.idx = append(h.idx, v.(int)) }
func (h *readyHeap) Pop() any {
	v := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return v
}
