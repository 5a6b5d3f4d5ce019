package store

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
)

// GetProto reads the record at key into m; false when there is none. A
// record that does not decode is ErrCorrupt.
func GetProto(r Reader, key []byte, m proto.Message) (bool, error) {
	item, err := r.Item(key)
	if errors.Is(err, base.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := item.Value(func(v []byte) error { return UnmarshalRecord(key, v, m) }); err != nil {
		return false, err
	}
	return true, nil
}

// UnmarshalRecord decodes the record v at key into m; one that does not
// decode is ErrCorrupt.
func UnmarshalRecord(key, v []byte, m proto.Message) error {
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("%w: record %q: %v", base.ErrCorrupt, key, err)
	}
	return nil
}

// SetProto buffers m as the record at key.
func SetProto(tx Tx, key []byte, m proto.Message) error {
	raw, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	tx.Set(key, raw)
	return nil
}

// Scan calls fn with every key under prefix and its value (both valid
// only during the call), in key order; an error of fn ends the scan.
func Scan(r Reader, prefix []byte, fn func(k, v []byte) error) error {
	return ScanFrom(r, prefix, prefix, fn)
}

// ScanFrom is Scan of the keys under prefix from start (inclusive) on.
func ScanFrom(r Reader, prefix, start []byte, fn func(k, v []byte) error) error {
	it := r.NewIterator(IterOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		var ferr error
		err := item.Value(func(v []byte) error {
			ferr = fn(item.Key(), v)
			return ferr
		})
		if ferr != nil {
			return ferr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Keys calls fn with every key under prefix (valid only during the call),
// in key order, without reading values.
func Keys(r Reader, prefix []byte, fn func(k []byte)) error {
	it := r.NewIterator(IterOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		fn(it.Item().Key())
	}
	return nil
}

// ListKeys visits up to limit keys under prefix strictly after start and
// calls more when further keys exist.
func ListKeys(txn Reader, prefix, start []byte, limit int, visit func(k []byte) error, more func()) error {
	it := txn.NewIterator(IterOptions{Prefix: prefix})
	defer it.Close()
	seek := prefix
	if start != nil {
		seek = start
	}
	n := 0
	for it.Seek(seek); it.Valid(); it.Next() {
		k := it.Item().Key()
		if start != nil && bytes.Equal(k, start) {
			continue
		}
		if n == limit {
			more()
			return nil
		}
		if err := visit(k); err != nil {
			return err
		}
		n++
	}
	return nil
}

// ReadAll decodes every record under prefix.
func ReadAll[T proto.Message](txn Reader, prefix []byte, mk func() T) ([]T, error) {
	var out []T
	err := Scan(txn, prefix, func(k, v []byte) error {
		m := mk()
		if err := proto.Unmarshal(v, m); err != nil {
			return fmt.Errorf("%w: record %q: %v", base.ErrCorrupt, k, err)
		}
		out = append(out, m)
		return nil
	})
	return out, err
}
