package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

// contents reads every entry of a store.
func contents(t *testing.T, s *store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.View(func(r store.Reader) error {
		return store.Scan(r, nil, func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// backup takes a backup of s into a buffer.
func backup(t *testing.T, s *store.Store, bb *store.BackupBase) (*bytes.Buffer, store.BackupManifest) {
	t.Helper()
	var buf bytes.Buffer
	m, err := s.Backup(context.Background(), &buf, bb)
	if err != nil {
		t.Fatal(err)
	}
	return &buf, m
}

// baseOf is what an incremental backup continuing the backup in buf needs.
func baseOf(t *testing.T, buf *bytes.Buffer, m store.BackupManifest) *store.BackupBase {
	t.Helper()
	d, err := store.ReadBackupDigests(bytes.NewReader(buf.Bytes()), m)
	if err != nil {
		t.Fatal(err)
	}
	return &store.BackupBase{StoreID: m.StoreID, Version: m.Version, Digests: d}
}

// restore restores the chain into a new directory and opens it.
func restore(t *testing.T, chain ...*bytes.Buffer) (*store.Store, store.BackupManifest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "restored")
	var rs []io.Reader
	for _, b := range chain {
		rs = append(rs, bytes.NewReader(b.Bytes()))
	}
	m, err := store.Restore(context.Background(), dir, smallOptions(), rs)
	if err != nil {
		t.Fatal(err)
	}
	// The acknowledged mark is the backup's: the store opens as having lost
	// nothing, and a loss after the restore would be caught.
	mark, err := os.ReadFile(filepath.Join(dir, store.AckFileName))
	if err != nil || !strings.Contains(string(mark), fmt.Sprintf("commits=%020d memseq=%020d", m.Commits, m.MemSeq)) {
		t.Fatalf("acknowledged mark %q (%v), want %d commits, memseq %d", mark, err, m.Commits, m.MemSeq)
	}
	return openWith(t, dir, smallOptions()), m
}

func put(t *testing.T, s *store.Store, kv map[string][]byte, del ...string) {
	t.Helper()
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for k, v := range kv {
			tx.Set([]byte(k), v)
		}
		for _, k := range del {
			tx.Delete([]byte(k))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func equalStores(t *testing.T, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for k, v := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("missing %q", k)
		} else if g != v {
			t.Errorf("%q differs", k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("extra %q", k)
		}
	}
	t.FailNow()
}

// TestBackupRestoreChain: a full backup and two incremental ones over
// sets, rewrites, deletions (of small and large values) and blocks;
// restoring the chain, and each prefix of it, gives the store as it was
// at that backup, which opens without a word about lost writes and goes
// on counting commits from there.
func TestBackupRestoreChain(t *testing.T) {
	s := openWith(t, t.TempDir(), smallOptions())
	rng := rand.NewChaCha8([32]byte{5})
	val := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	kv := map[string][]byte{}
	for i := range 3000 {
		kv[fmt.Sprintf("m/%05d", i)] = val(200)
	}
	for i := range 5 {
		kv[fmt.Sprintf("file/%d", i)] = val(100 << 10) // in the value log
	}
	for from := 0; from < 3000; from += 500 { // operations of about 100 KB
		part := map[string][]byte{}
		for i := from; i < from+500; i++ {
			k := fmt.Sprintf("m/%05d", i)
			part[k] = kv[k]
		}
		put(t, s, part)
	}
	for i := range 5 {
		k := fmt.Sprintf("file/%d", i)
		put(t, s, map[string][]byte{k: kv[k]})
	}
	block := bytes.Repeat([]byte("block "), 20_000)
	c := rawCID(t, block)
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.PutBlock(c, block) }); err != nil {
		t.Fatal(err)
	}
	full, fm := backup(t, s, nil)
	want0 := contents(t, s)

	// A small change: rewrites, deletions, new keys, a large value gone.
	put(t, s, map[string][]byte{"m/00007": val(200), "m/00100": val(200), "new/1": val(50)}, "m/00008", "m/02999", "file/3")
	inc1, m1 := backup(t, s, baseOf(t, full, fm))
	want1 := contents(t, s)
	put(t, s, map[string][]byte{"m/00008": val(200), "file/9": val(90 << 10)}, "new/1", "m/00100")
	inc2, m2 := backup(t, s, baseOf(t, inc1, m1))
	want2 := contents(t, s)

	t.Logf("full %d bytes (%d keys, %d buckets); incremental %d bytes (%d entries, %d key lists), then %d bytes",
		full.Len(), fm.Keys, fm.Buckets, inc1.Len(), m1.Entries, m1.KeyLists, inc2.Len())
	if fm.Kind != "full" || m1.Kind != "incremental" || m1.Since != fm.Version || m2.Since != m1.Version || fm.Blocks != 1 {
		t.Fatalf("manifests: %+v\n%+v\n%+v", fm, m1, m2)
	}
	if inc1.Len() > full.Len()/20 {
		t.Fatalf("an incremental backup of 6 changes takes %d bytes, the full one %d", inc1.Len(), full.Len())
	}

	for i, tc := range []struct {
		chain []*bytes.Buffer
		want  map[string]string
		m     store.BackupManifest
	}{{[]*bytes.Buffer{full}, want0, fm}, {[]*bytes.Buffer{full, inc1}, want1, m1}, {[]*bytes.Buffer{full, inc1, inc2}, want2, m2}} {
		r, m := restore(t, tc.chain...)
		if m.Version != tc.m.Version {
			t.Fatalf("chain %d: restored to version %d, want %d", i, m.Version, tc.m.Version)
		}
		equalStores(t, contents(t, r), tc.want)
		if b, err := r.Block(c); err != nil || !bytes.Equal(b, block) {
			t.Fatalf("chain %d: block: %v", i, err)
		}
		if r.AcceptedLoss() != "" {
			t.Fatalf("chain %d: %s", i, r.AcceptedLoss())
		}

		put(t, r, map[string][]byte{"after": []byte("restore")})
		commits, err := readU64(r, store.KeyCommits)
		if err != nil || commits != tc.m.Commits+1 {
			t.Fatalf("chain %d: %d commits after one more, the backup had %d (%v)", i, commits, tc.m.Commits, err)
		}
		if id, err := r.ID(); err != nil || id == fm.StoreID {
			t.Fatalf("chain %d: the restored store's identity %q, %v: it must be its own", i, id, err)
		}
	}
}

func readU64(s *store.Store, key []byte) (uint64, error) {
	var n uint64
	err := s.View(func(r store.Reader) error {
		var err error
		n, err = store.ReadU64(r, key)
		return err
	})
	return n, err
}

// TestBackupWhileWriting backs up while writers write: every operation
// is atomic, so in the snapshot each writer's counter equals the number
// of its keys; every write acknowledged before the backup began is in the
// restored store; and the manifest's commit count is the store's then.
func TestBackupWhileWriting(t *testing.T) {
	s := openWith(t, t.TempDir(), smallOptions())
	ctx := context.Background()
	const writers = 4
	var acked [writers]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := make([]byte, 100+int(i%4)*(30<<10)) // some into the value log
				if err := s.Update(ctx, func(tx store.Tx) error {
					tx.Set(fmt.Appendf(nil, "w%d/%08d", w, i), v)
					tx.Set(fmt.Appendf(nil, "count/%d", w), fmt.Appendf(nil, "%d", i+1))
					return nil
				}); err != nil {
					errs <- err
					return
				}
				acked[w].Store(i + 1)
			}
		}()
	}
	// Let every writer write, then back up three times while they go on.
	for w := range writers {
		for acked[w].Load() < 20 {
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
				s.Barrier(ctx)
			}
		}
	}
	var chain []*bytes.Buffer
	var bb *store.BackupBase
	var before [][writers]int64
	for range 3 {
		var b [writers]int64
		for w := range writers {
			b[w] = acked[w].Load()
		}
		before = append(before, b)
		buf, m := backup(t, s, bb)
		chain = append(chain, buf)
		bb = baseOf(t, buf, m)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for n := 1; n <= len(chain); n++ {
		r, m := restore(t, chain[:n]...)
		got := contents(t, r)
		for w := range writers {
			var count int64
			fmt.Sscan(got[fmt.Sprintf("count/%d", w)], &count)
			keys := int64(0)
			for k := range got {
				if strings.HasPrefix(k, fmt.Sprintf("w%d/", w)) {
					keys++
				}
			}
			if keys != count {
				t.Fatalf("chain of %d: writer %d: %d keys, its counter says %d: the snapshot is not consistent", n, w, keys, count)
			}
			if count < before[n-1][w] {
				t.Fatalf("chain of %d: writer %d: %d writes restored, %d were acknowledged before the backup began", n, w, count, before[n-1][w])
			}
		}
		if c, _ := readU64(r, store.KeyCommits); c != m.Commits {
			t.Fatalf("chain of %d: %d commits restored, the manifest says %d", n, c, m.Commits)
		}
	}
}

// TestRestoreRefusesDamage: a flipped byte, a cut stream, a block whose
// bytes are not its CID's, chains out of order, a non-empty directory and
// a base of another store are refused, with nothing restored.
func TestRestoreRefusesDamage(t *testing.T) {
	s := openWith(t, t.TempDir(), smallOptions())
	block := bytes.Repeat([]byte("intact "), 100)
	c := rawCID(t, block)
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		tx.Set([]byte("m/a"), []byte("alpha"))
		return tx.PutBlock(c, block)
	}); err != nil {
		t.Fatal(err)
	}
	full, fm := backup(t, s, nil)
	put(t, s, map[string][]byte{"m/b": []byte("beta")})
	inc, _ := backup(t, s, baseOf(t, full, fm))

	try := func(chain ...[]byte) error {
		var rs []io.Reader
		for _, b := range chain {
			rs = append(rs, bytes.NewReader(b))
		}
		_, err := store.Restore(context.Background(), filepath.Join(t.TempDir(), "r"), smallOptions(), rs)
		return err
	}
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x20; return b }
	inBlock := bytes.Index(full.Bytes(), block) + 50
	for name, tc := range map[string]struct {
		chain [][]byte
		want  string
	}{
		"a byte of a block":        {[][]byte{flip(full.Bytes(), inBlock)}, "do not match its hash"},
		"a byte of a record":       {[][]byte{flip(full.Bytes(), bytes.Index(full.Bytes(), []byte("alpha")))}, "does not match its checksum"},
		"cut short":                {[][]byte{full.Bytes()[:full.Len()-10]}, "cut short"},
		"bytes after its manifest": {[][]byte{append(bytes.Clone(full.Bytes()), 0)}, "follow its manifest"},
		"not a backup":             {[][]byte{[]byte("PK\x03\x04 a zip file")}, "not a Memoria backup"},
		"an incremental alone":     {[][]byte{inc.Bytes()}, "starts with a full backup"},
		"two full backups":         {[][]byte{full.Bytes(), full.Bytes()}, "cannot continue"},
	} {
		err := try(tc.chain...)
		if !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrCorrupt saying %q", name, err, tc.want)
		}
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("data"), 0o644)
	if _, err := store.Restore(context.Background(), dir, smallOptions(), []io.Reader{bytes.NewReader(full.Bytes())}); !errors.Is(err, base.ErrInvalid) || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "precious")); string(b) != "data" {
		t.Fatal("the non-empty directory was touched")
	}

	other := openWith(t, t.TempDir(), smallOptions())
	if _, err := other.Backup(context.Background(), io.Discard, baseOf(t, full, fm)); !errors.Is(err, base.ErrInvalid) || !strings.Contains(err.Error(), "another store") && !strings.Contains(err.Error(), "of store") {
		t.Fatalf("an incremental backup against another store's: %v", err)
	}

	// A store whose block is damaged is not backed up.
	if err := s.WriteBehind(func(txn *badger.Txn) error { return txn.Set(store.BlockKey(c), flip(block, 3)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(context.Background(), io.Discard, nil); !errors.Is(err, base.ErrCorrupt) {
		t.Fatalf("backup of a damaged block: %v", err)
	}
}
