package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ipfs/go-cid"
	"github.com/ipld/go-ipld-prime/codec/dagcbor"
	"github.com/ipld/go-ipld-prime/datamodel"
	"github.com/ipld/go-ipld-prime/fluent/qp"
	cidlink "github.com/ipld/go-ipld-prime/linking/cid"
	"github.com/ipld/go-ipld-prime/node/basicnode"
)

// CAR v1 (https://ipld.io/specs/transport/car/carv1/): a varint-prefixed
// DAG-CBOR header {roots, version: 1}, then sections, each a varint of
// its length, a CID and that block's bytes.

// CARMediaType is the CAR v1 media type.
const CARMediaType = "application/vnd.ipld.car"

// carContentType is the Content-Type of the CARs this server writes.
func carContentType(dups bool) string {
	d := "n"
	if dups {
		d = "y"
	}
	return CARMediaType + "; version=1; order=dfs; dups=" + d
}

// carHeader encodes a CAR v1 header {roots, version: 1} with its length.
func carHeader(roots []cid.Cid) ([]byte, error) {
	n, err := qp.BuildMap(basicnode.Prototype.Any, 2, func(ma datamodel.MapAssembler) {
		qp.MapEntry(ma, "roots", qp.List(int64(len(roots)), func(la datamodel.ListAssembler) {
			for _, c := range roots {
				qp.ListEntry(la, qp.Link(cidlink.Link{Cid: c}))
			}
		}))
		qp.MapEntry(ma, "version", qp.Int(1))
	})
	if err != nil {
		return nil, err
	}
	var body bytes.Buffer
	if err := dagcbor.Encode(n, &body); err != nil {
		return nil, err
	}
	out := binary.AppendUvarint(nil, uint64(body.Len()))
	return append(out, body.Bytes()...), nil
}

// sectionLen is the length of block c's section, of a block of size bytes.
func sectionLen(c cid.Cid, size int) int64 {
	n := uint64(c.ByteLen() + size)
	var v [binary.MaxVarintLen64]byte
	return int64(binary.PutUvarint(v[:], n)) + int64(n)
}

// carWriter writes a CAR v1 through a buffer.
type carWriter struct {
	w   *bufio.Writer
	buf []byte
}

func newCARWriter(w io.Writer) *carWriter {
	return &carWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// header writes the header naming roots.
func (cw *carWriter) header(roots []cid.Cid) error {
	h, err := carHeader(roots)
	if err != nil {
		return err
	}
	_, err = cw.w.Write(h)
	return err
}

// section writes block c.
func (cw *carWriter) section(c cid.Cid, data []byte) error {
	cw.buf = binary.AppendUvarint(cw.buf[:0], uint64(c.ByteLen()+len(data)))
	cw.buf = append(cw.buf, c.KeyString()...)
	if _, err := cw.w.Write(cw.buf); err != nil {
		return err
	}
	_, err := cw.w.Write(data)
	return err
}

func (cw *carWriter) flush() error { return cw.w.Flush() }

// errCAR is a CAR that cannot be read: malformed, truncated, not v1.
var errCAR = errors.New("not a CAR v1")

// carReader reads a CAR v1 held in memory. It never copies or allocates
// by what the file claims: every length is checked against the bytes
// left, and blocks are slices of the body.
type carReader struct {
	roots []cid.Cid
	rest  []byte
}

// newCARReader reads the header.
func newCARReader(body []byte) (*carReader, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n == 0 || n > uint64(len(body)-k) {
		return nil, fmt.Errorf("%w: the header's length is malformed or past the end", errCAR)
	}
	raw := body[k : k+int(n)]
	nb := basicnode.Prototype.Any.NewBuilder()
	opts := dagcbor.DecodeOptions{AllowLinks: true, AllocationBudget: 4*int64(len(raw)) + 1<<20}
	if err := opts.Decode(nb, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: the header is not DAG-CBOR: %v", errCAR, err)
	}
	h := nb.Build()
	vn, err := h.LookupByString("version")
	if err != nil {
		return nil, fmt.Errorf("%w: the header has no version", errCAR)
	}
	if v, err := vn.AsInt(); err != nil || v != 1 {
		return nil, fmt.Errorf("%w: the header's version is %s, this server reads version 1", errCAR, describe(vn))
	}
	rn, err := h.LookupByString("roots")
	if err != nil || rn.Kind() != datamodel.Kind_List {
		return nil, fmt.Errorf("%w: the header has no list of roots", errCAR)
	}
	r := &carReader{rest: body[k+int(n):]}
	for it := rn.ListIterator(); !it.Done(); {
		i, v, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("%w: roots: %v", errCAR, err)
		}
		l, err := v.AsLink()
		if err != nil {
			return nil, fmt.Errorf("%w: root %d is not a link", errCAR, i)
		}
		cl, ok := l.(cidlink.Link)
		if !ok {
			return nil, fmt.Errorf("%w: root %d is not a CID", errCAR, i)
		}
		r.roots = append(r.roots, cl.Cid)
	}
	return r, nil
}

// describe renders a small node for a message.
func describe(n datamodel.Node) string {
	if v, err := n.AsInt(); err == nil {
		return fmt.Sprint(v)
	}
	return n.Kind().String()
}

// next returns the next block (its bytes are the body's, unverified), or
// io.EOF after the last.
func (r *carReader) next() (cid.Cid, []byte, error) {
	if len(r.rest) == 0 {
		return cid.Undef, nil, io.EOF
	}
	n, k := binary.Uvarint(r.rest)
	if k <= 0 || n == 0 || n > uint64(len(r.rest)-k) {
		return cid.Undef, nil, fmt.Errorf("%w: a section's length is malformed or past the end (the file is cut short?)", errCAR)
	}
	sec := r.rest[k : k+int(n)]
	r.rest = r.rest[k+int(n):]
	m, c, err := cid.CidFromBytes(sec)
	if err != nil {
		return cid.Undef, nil, fmt.Errorf("%w: a section's CID: %v", errCAR, err)
	}
	return c, sec[m:], nil
}
