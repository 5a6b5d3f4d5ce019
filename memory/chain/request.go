package chain

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
)

// RequestPrefix is the key space of the requests the appends recorded
// (model.Request): by sona and id, and by sona and seq.
var RequestPrefix = []byte("i/")

// MaxRequestID bounds a request id, in bytes.
const MaxRequestID = 128

// ValidateRequestID checks a client's request id (an idempotency key):
// 1 to MaxRequestID bytes of printable ASCII without spaces.
func ValidateRequestID(id string) error {
	if id == "" || len(id) > MaxRequestID {
		return fmt.Errorf("%w: a request id has 1 to %d bytes, got %d", base.ErrInvalid, MaxRequestID, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("%w: a request id is printable ASCII without spaces (byte %d is %#x)", base.ErrInvalid, i, id[i])
		}
	}
	return nil
}

func requestKey(sona, id string) []byte {
	return base.Join(RequestPrefix, []byte(sona), []byte{0, 'r'}, []byte(id))
}

func requestSeqKey(sona string, seq int64) []byte {
	return base.Join(RequestPrefix, []byte(sona), []byte{0, 's'}, base.U64(uint64(seq)))
}

// recordRequest records a's request in its transaction, failing with
// ErrChainConflict when the sona has an append of that request already.
func recordRequest(tx store.Tx, a *model.Append) error {
	r := a.Item.Request
	if r == nil {
		return nil
	}
	if r.ID == "" || len(r.ID) > 2*MaxRequestID {
		return fmt.Errorf("%w: a request id of %d bytes", base.ErrInvalid, len(r.ID))
	}
	k := requestKey(a.Sona, r.ID)
	if _, err := tx.Get(k); err == nil {
		return fmt.Errorf("%w: sona %s has the append of request %q already", base.ErrChainConflict, a.Sona, r.ID)
	} else if !errors.Is(err, base.ErrNotFound) {
		return err
	}
	tx.Set(k, base.Join(base.U64(uint64(a.Seq)), r.Result))
	tx.Set(requestSeqKey(a.Sona, a.Seq), []byte(r.ID))
	return nil
}

// Request finds the append of sona that request id made: its seq and the
// answer it recorded; ok is false when there is none.
func (w *Writer) Request(sona, id string) (seq int64, result []byte, ok bool, err error) {
	err = w.st.View(func(r store.Reader) error {
		v, err := r.Get(requestKey(sona, id))
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(v) < 8 {
			return fmt.Errorf("%w: request %q of sona %s", base.ErrCorrupt, id, sona)
		}
		seq, result, ok = int64(binary.BigEndian.Uint64(v)), append([]byte(nil), v[8:]...), true
		return nil
	})
	return seq, result, ok, err
}

// RequestAt is the request sona's append at seq recorded, nil when none.
func (w *Writer) RequestAt(sona string, seq int64) (*model.Request, error) {
	var out *model.Request
	err := w.st.View(func(r store.Reader) error {
		id, err := r.Get(requestSeqKey(sona, seq))
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := r.Get(requestKey(sona, string(id)))
		if err != nil || len(v) < 8 {
			return fmt.Errorf("%w: request %q of sona %s at seq %d: %v", base.ErrCorrupt, id, sona, seq, err)
		}
		out = &model.Request{ID: string(id), Result: append([]byte(nil), v[8:]...)}
		return nil
	})
	return out, err
}
