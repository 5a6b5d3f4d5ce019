package cluster

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
)

// car builds a CAR v1 of blocks (its header's content is not read by
// verifyCAR, only skipped).
func car(blocks ...[]byte) ([]byte, []cid.Cid) {
	header := []byte{0xa2, 0x65, 'r', 'o', 'o', 't', 's', 0x80, 0x67, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01}
	out := binary.AppendUvarint(nil, uint64(len(header)))
	out = append(out, header...)
	var cids []cid.Cid
	for _, b := range blocks {
		c, _ := model.SumCID(model.CodecRaw, b)
		sec := append(c.Bytes(), b...)
		out = binary.AppendUvarint(out, uint64(len(sec)))
		out = append(out, sec...)
		cids = append(cids, c)
	}
	return out, cids
}

func TestVerifyCAR(t *testing.T) {
	body, cids := car([]byte("first block"), []byte("second block"))
	if err := verifyCAR(cids[1], body); err != nil {
		t.Fatalf("a good CAR: %v", err)
	}
	other, _ := model.SumCID(model.CodecRaw, []byte("elsewhere"))
	if err := verifyCAR(other, body); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a CAR without the block asked for: %v", err)
	}
	bad := append([]byte{}, body...)
	bad[len(bad)-1] ^= 1 // the last block's last byte
	if err := verifyCAR(cids[1], bad); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a CAR with a tampered block: %v", err)
	}
	if err := verifyCAR(cids[1], body[:len(body)-3]); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("a CAR cut short: %v", err)
	}
	if err := verifyCAR(cids[0], []byte{0x05, 1}); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("not a CAR: %v", err)
	}
}
