package chain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// The chains' key spaces (see the package doc).
var (
	SonaPrefix     = []byte("s/") // Sona record, by uuid
	NamePrefix     = []byte("n/") // sonas by name
	NameVecPrefix  = []byte("k/") // embedding of a sona's name, by uuid
	ChainPrefix    = []byte("c/") // chain entries, by uuid and seq
	LogPrefix      = []byte("q/") // the insertion log
	FileSonaPrefix = []byte("f/") // the sonas that may name a raw block
	KeyBackbone    = []byte("x/backbone")
)

// SonaKey is the key of a sona's record.
func SonaKey(uuid string) []byte { return base.Join(SonaPrefix, []byte(uuid)) }

// NameVecKey is the key of the embedding of a sona's name.
func NameVecKey(uuid string) []byte { return base.Join(NameVecPrefix, []byte(uuid)) }

// NameKey records that sona uuid is called name.
func NameKey(name, uuid string) []byte {
	return base.Join(NamePrefix, []byte(name), []byte{0}, []byte(uuid))
}

func namePrefix(name string) []byte { return base.Join(NamePrefix, []byte(name), []byte{0}) }

// EntriesPrefix is the prefix of a sona's chain entries.
func EntriesPrefix(uuid string) []byte {
	return base.Join(ChainPrefix, []byte(uuid), []byte{0})
}

// EntryKey is the key of a sona's chain entry at seq.
func EntryKey(uuid string, seq int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return base.Join(EntriesPrefix(uuid), b[:])
}

// LogKey is the key of the insertion log's entry at seq.
func LogKey(seq uint64) []byte { return base.Join(LogPrefix, base.U64(seq)) }

// FileSonaKey records that sona may name the raw block c.
func FileSonaKey(c cid.Cid, sona string) []byte {
	return base.Join(FileSonaPrefix, c.Hash(), []byte{0}, []byte(sona))
}

// EncodeEntry is a chain entry's value: the ACT, its memory, and the
// insertion-log position of the store when the ACT was appended.
func EncodeEntry(act, mem cid.Cid, logSeq uint64) []byte {
	return base.Join(act.Bytes(), mem.Bytes(), base.U64(logSeq))
}

// DecodeEntry reads a chain entry's value.
func DecodeEntry(b []byte) (act, mem cid.Cid, logSeq uint64, err error) {
	n, act, err := cid.CidFromBytes(b)
	if err != nil {
		return cid.Undef, cid.Undef, 0, fmt.Errorf("%w: chain entry: %v", base.ErrCorrupt, err)
	}
	m, mem, err := cid.CidFromBytes(b[n:])
	if err != nil || len(b[n+m:]) != 8 {
		return cid.Undef, cid.Undef, 0, fmt.Errorf("%w: chain entry: %v", base.ErrCorrupt, err)
	}
	return act, mem, binary.BigEndian.Uint64(b[n+m:]), nil
}

// ScanMemories calls f with the sona and the memory of every chain
// entry, sona by sona, each chain in seq order.
func ScanMemories(r store.Reader, f func(sona string, mem cid.Cid) error) error {
	return store.Scan(r, ChainPrefix, func(k, v []byte) error {
		id, _, ok := bytes.Cut(k[len(ChainPrefix):], []byte{0})
		if !ok {
			return fmt.Errorf("%w: chain key", base.ErrCorrupt)
		}
		_, mem, _, err := DecodeEntry(v)
		if err != nil {
			return err
		}
		return f(string(id), mem)
	})
}

// LogEntry reads an insertion-log entry: its position and its memory.
func LogEntry(item store.Item) (uint64, cid.Cid, error) {
	seq := decodeLogKey(item.Key())
	var c cid.Cid
	err := item.Value(func(v []byte) error {
		var err error
		c, err = cid.Cast(v)
		return err
	})
	if err != nil {
		return seq, cid.Undef, fmt.Errorf("%w: insertion log %d: %v", base.ErrCorrupt, seq, err)
	}
	return seq, c, nil
}

// EachLogged calls fn with each entry of the insertion log after position
// after, in the log's order, until fn fails.
func EachLogged(r store.Reader, after uint64, fn func(seq uint64, c cid.Cid) error) error {
	it := r.NewIterator(store.IterOptions{Prefix: LogPrefix, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Seek(LogKey(after + 1)); it.Valid(); it.Next() {
		seq, c, err := LogEntry(it.Item())
		if err != nil {
			return err
		}
		if err := fn(seq, c); err != nil {
			return err
		}
	}
	return nil
}

func decodeLogKey(k []byte) uint64 {
	var seq uint64
	for _, b := range k[len(LogPrefix):] {
		seq = seq<<8 | uint64(b)
	}
	return seq
}

// LogEnd reads the insertion log's last position.
func LogEnd(r store.Reader) (uint64, error) { return store.ReadU64(r, store.KeyMemSeq) }

// currentLogSeq is the last position of the insertion log, as an op sees
// it.
func currentLogSeq(tx store.Tx) (uint64, error) {
	v, err := tx.Get(store.KeyMemSeq)
	if errors.Is(err, base.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: insertion log counter", base.ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// nextLogSeq takes the next insertion-log position.
func nextLogSeq(tx store.Tx) (uint64, error) {
	n, err := currentLogSeq(tx)
	if err != nil {
		return 0, err
	}
	tx.Set(store.KeyMemSeq, base.U64(n+1))
	return n + 1, nil
}
