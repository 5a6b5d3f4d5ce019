package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	"github.com/ipld/go-ipld-prime/datamodel"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/node/basicnode"
	"github.com/multiformats/go-multihash"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// The DAG the gateway and the CAR export walk: Memoria's blocks are
// DAG-CBOR (memories and ACTs, memory/schema.ipldsch), whose links are
// found by decoding them, and raw (file bytes), which link to nothing. A
// sona's chain links each ACT to the one before it, so the DAG under a
// head is as deep as the chain: every walk here keeps its own stack, never
// the goroutine's, and costs time linear in the blocks it reads.

// ErrCodec is a block whose codec this server does not walk (anything but
// DAG-CBOR and raw): its links, if any, cannot be found.
var ErrCodec = errors.New("api: only dag-cbor and raw blocks are walked")

// isIdentity reports whether c's multihash is the identity: its block is
// the digest, inside the CID itself.
func isIdentity(c cid.Cid) bool { return c.Prefix().MhType == multihash.IDENTITY }

// loadBlock returns block c, verified against c by the store; an identity
// CID's block is its digest and needs no store.
func loadBlock(store *store.Store, c cid.Cid) ([]byte, error) {
	if isIdentity(c) {
		dec, err := multihash.Decode(c.Hash())
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", base.ErrInvalid, c, err)
		}
		return dec.Digest, nil
	}
	return store.Block(c)
}

// hasBlock reports whether block c can be read: stored, or inline in an
// identity CID.
func hasBlock(store *store.Store, c cid.Cid) (bool, error) {
	if isIdentity(c) {
		return true, nil
	}
	return store.HasBlock(c)
}

// walkable reports whether the links of a block with c's codec can be found.
func walkable(c cid.Cid) bool {
	codec := c.Prefix().Codec
	return codec == cid.Raw || codec == cid.DagCBOR
}

// decodeBlock decodes block c: a raw block is a bytes node, a DAG-CBOR
// block its data model (the decoder bounds nesting and allocation).
func decodeBlock(c cid.Cid, data []byte) (datamodel.Node, error) {
	switch c.Prefix().Codec {
	case cid.Raw:
		return basicnode.NewBytes(data), nil
	case cid.DagCBOR:
		nb := basicnode.Prototype.Any.NewBuilder()
		if err := dagcbor.Decode(nb, bytes.NewReader(data)); err != nil {
			return nil, fmt.Errorf("%w: block %s is not DAG-CBOR: %v", base.ErrCorrupt, c, err)
		}
		return nb.Build(), nil
	}
	return nil, fmt.Errorf("%w: block %s has codec 0x%x", ErrCodec, c, c.Prefix().Codec)
}

// blockLinks returns the links of block c in the order they appear in it
// (none for a raw block).
func blockLinks(c cid.Cid, data []byte) ([]cid.Cid, error) {
	if c.Prefix().Codec == cid.Raw {
		return nil, nil
	}
	n, err := decodeBlock(c, data)
	if err != nil {
		return nil, err
	}
	return nodeLinks(n)
}

// nodeLinks returns the links under n in document order.
func nodeLinks(n datamodel.Node) ([]cid.Cid, error) {
	var out []cid.Cid
	stack := []datamodel.Node{n}
	var kids []datamodel.Node
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		kids = kids[:0]
		switch n.Kind() {
		case datamodel.Kind_Link:
			l, err := n.AsLink()
			if err != nil {
				return nil, err
			}
			cl, ok := l.(cidlink.Link)
			if !ok {
				return nil, fmt.Errorf("%w: a link that is not a CID", base.ErrCorrupt)
			}
			out = append(out, cl.Cid)
		case datamodel.Kind_Map:
			for it := n.MapIterator(); !it.Done(); {
				_, v, err := it.Next()
				if err != nil {
					return nil, err
				}
				kids = append(kids, v)
			}
		case datamodel.Kind_List:
			for it := n.ListIterator(); !it.Done(); {
				_, v, err := it.Next()
				if err != nil {
					return nil, err
				}
				kids = append(kids, v)
			}
		}
		for i := len(kids) - 1; i >= 0; i-- { // the first child is taken first
			stack = append(stack, kids[i])
		}
	}
	return out, nil
}

// walkDAG visits the DAG under roots depth-first, each block before the
// blocks it links to, in the order its links appear, the roots one after
// the other. visit handles block c and returns its links. With seen
// non-nil each block is visited once (the blocks already in seen are not
// visited); with seen nil, every time it is reached, its links again too.
// The stack is a slice: the depth of the DAG costs memory (a CID a level),
// not the goroutine's stack.
func walkDAG(ctx context.Context, roots []cid.Cid, seen map[cid.Cid]struct{}, visit func(cid.Cid) ([]cid.Cid, error)) error {
	stack := make([]cid.Cid, 0, 64)
	push := func(cs []cid.Cid) {
		for i := len(cs) - 1; i >= 0; i-- { // the first link is visited first
			if _, ok := seen[cs[i]]; !ok {
				stack = append(stack, cs[i])
			}
		}
	}
	push(roots)
	for n := 0; len(stack) > 0; n++ {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen != nil {
			if _, ok := seen[c]; ok {
				continue
			}
			seen[c] = struct{}{}
		}
		links, err := visit(c)
		if err != nil {
			return err
		}
		push(links)
	}
	return nil
}

// resolved is where a gateway path leads from its root: to a block (end),
// to a place inside the last block walked (inner), or, when neither is set,
// nowhere — a segment names no field, and blocks prove it.
type resolved struct {
	// blocks are the blocks the path was looked up in, root first: what a
	// client needs to verify each step. Empty for an empty path.
	blocks []cid.Cid
	// end is the block the path ends at: the root of an empty path, or the
	// target of the link its last segment names.
	end cid.Cid
	// inner is the node inside the last of blocks where a path that ends
	// on no link ends (a list of edges, a seq).
	inner datamodel.Node
}

// resolvePath walks segs from root through DAG-CBOR maps (by field name),
// lists (by index) and links. Each block on the way is read and decoded
// once: the cost is linear in the path's length. A block the path leads
// to but the store lacks is ErrNotFound; the end block is checked to be
// there but not read.
func resolvePath(store *store.Store, root cid.Cid, segs []string) (*resolved, error) {
	res := &resolved{}
	at := root              // the block being walked
	var node datamodel.Node // where in it the path is; nil until it is decoded
	for i, seg := range segs {
		if node == nil {
			data, err := loadBlock(store, at)
			if err != nil {
				return nil, pathError(err, root, segs[:i])
			}
			if node, err = decodeBlock(at, data); err != nil {
				return nil, pathError(err, root, segs[:i])
			}
			res.blocks = append(res.blocks, at)
		}
		next, ok := lookupSegment(node, seg)
		if !ok {
			return res, nil // names nothing: the blocks so far prove it
		}
		if next.Kind() != datamodel.Kind_Link {
			node = next
			continue
		}
		l, err := next.AsLink()
		if err != nil {
			return nil, err
		}
		cl, ok := l.(cidlink.Link)
		if !ok {
			return nil, fmt.Errorf("%w: block %s holds a link that is not a CID", base.ErrCorrupt, at)
		}
		at, node = cl.Cid, nil
	}
	if node != nil {
		res.inner = node
		return res, nil
	}
	ok, err := hasBlock(store, at)
	if err != nil {
		return nil, err
	}
	if !ok {
		err := fmt.Errorf("%w: block %s", base.ErrNotFound, at)
		if gone, ferr := store.Forgotten(at); ferr == nil && gone {
			err = fmt.Errorf("%w: block %s", base.ErrForgotten, at)
		}
		return nil, pathError(err, root, segs)
	}
	res.end = at
	return res, nil
}

// pathError says where on a path err happened.
func pathError(err error, root cid.Cid, segs []string) error {
	at := "/ipfs/" + root.String()
	if len(segs) > 0 {
		at += "/" + strings.Join(segs, "/")
	}
	return fmt.Errorf("%s: %w", clip(at, 200), err)
}

// lookupSegment looks seg up in n: a field of a map, an index of a list.
func lookupSegment(n datamodel.Node, seg string) (datamodel.Node, bool) {
	switch n.Kind() {
	case datamodel.Kind_Map:
		v, err := n.LookupByString(seg)
		return v, err == nil
	case datamodel.Kind_List:
		i, ok := listIndex(seg)
		if !ok {
			return nil, false
		}
		v, err := n.LookupByIndex(i)
		return v, err == nil
	}
	return nil, false
}

// listIndex reads a list index written in canonical decimal.
func listIndex(seg string) (int64, bool) {
	if seg == "" || len(seg) > 18 || (len(seg) > 1 && seg[0] == '0') {
		return 0, false
	}
	var i int64
	for _, ch := range []byte(seg) {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		i = i*10 + int64(ch-'0')
	}
	return i, true
}

// clip shortens s to at most n bytes for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
