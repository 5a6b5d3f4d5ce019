package memory_test

// Fault tests: the store on a full disk and with damaged files, on real
// Badger and real files. Where a fault could kill the process (a full
// disk under Badger's memory-mapped files, a kill -9), the store runs in
// a child process — this test binary run again with MEMORIA_FAULT_CHILD
// set — so that the death fails the test instead of the test runner.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/text"
)

// The injected free-space source: below the reserve, writes are refused
// with base.ErrDiskFull (writes that write nothing are not), reads go on, and
// writes resume when space returns; nothing acknowledged is lost.
func TestDiskFullRefusesWritesAndRecovers(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	const reserve = 256 << 20
	var free atomic.Uint64
	free.Store(10 << 30)
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Logger: logs.Logger(), FreeSpace: func() (uint64, error) { return free.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	o := memorytest.NewOwner(t, s, "a")
	var acked []cid.Cid
	for i := range 20 {
		acked = append(acked, o.Text(fmt.Sprintf("an acknowledged memory, number %d", i)))
	}
	file := make([]byte, 512<<10)
	rand.Read(file)
	fc, err := s.Chains.PutFile(context.Background(), file, "")
	if err != nil {
		t.Fatal(err)
	}

	// A little above the reserve: a small memory fits, a large file does not.
	free.Store(reserve + 100<<10)
	acked = append(acked, o.Text("a small memory still fits"))
	big := make([]byte, 512<<10)
	rand.Read(big)
	if _, err := s.Chains.PutFile(context.Background(), big, ""); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("a file past the reserve: err = %v, want base.ErrDiskFull", err)
	}

	free.Store(reserve - 1)
	if _, err := o.TryAdd(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "refused"}}}, nil); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("append below the reserve: err = %v, want base.ErrDiskFull", err)
	}
	if _, err := s.Sonas.Create(context.Background(), "b"); !errors.Is(err, base.ErrDiskFull) {
		t.Fatalf("create sona below the reserve: err = %v, want base.ErrDiskFull", err)
	}
	if err := s.Store().CheckSpace(); !errors.Is(err, base.ErrDiskFull) || !strings.Contains(err.Error(), "store.min_free_mb") {
		t.Fatalf("CheckSpace = %v", err)
	}
	if err := s.Store().Barrier(context.Background()); err != nil {
		t.Fatalf("a barrier writes nothing and is not refused: %v", err)
	}
	// Reads go on: memories, files, recall.
	for _, c := range acked {
		if _, _, err := s.Memories.Get(c); err != nil {
			t.Fatalf("read %s while the disk is full: %v", c, err)
		}
	}
	if b, err := s.Block(fc); err != nil || !bytes.Equal(b, file) {
		t.Fatalf("file while the disk is full: %v", err)
	}
	got, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: o.Sona, Text: "acknowledged memory number 3"})
	if err != nil || len(got) == 0 {
		t.Fatalf("recall while the disk is full: %d, %v", len(got), err)
	}
	if !strings.Contains(logs.String(), "refusing writes") {
		t.Fatalf("no log line for the refusal:\n%s", logs.String())
	}
	rec, _ := s.Sonas.Get(o.Sona)
	if rec.Length != int64(len(acked)) {
		t.Fatalf("chain length %d, acknowledged %d", rec.Length, len(acked))
	}

	// Space returns: writes resume.
	free.Store(10 << 30)
	if err := s.Store().CheckSpace(); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, o.Text("written once space returned"))
	if !strings.Contains(logs.String(), "accepting writes again") {
		t.Fatalf("no log line for the recovery:\n%s", logs.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, cfg, nil)
	defer s.Close()
	for _, c := range acked {
		if _, _, err := s.Memories.Get(c); err != nil {
			t.Fatalf("acknowledged %s missing after reopen: %v", c, err)
		}
	}
	if _, mems := s.Counts(); mems != int64(len(acked)) {
		t.Fatalf("%d memories, acknowledged %d", mems, len(acked))
	}
}

// A real full disk: the store, in a child process, fills a small tmpfs
// until its writes are refused. It must not die (Badger's memory-mapped
// files raise SIGBUS when the disk is full under them); reads go on;
// when space is freed, writes resume; every acknowledged write is there.
func TestDiskFullOnTmpfs(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == "TestDiskFullOnTmpfs" {
		diskFullChild(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: mounting a small tmpfs needs root; only the injected free-space variant (TestDiskFullRefusesWritesAndRecovers) ran")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a 40 MiB tmpfs as root: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 10<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(mnt, "data")
	cmd, stdin, sc, stderr := memorytest.StartChild(t, "TestDiskFullOnTmpfs", "MEMORIA_FAULT_DIR="+data)
	acked := map[string]bool{}
	line := memorytest.ExpectLine(t, sc, "FULL", acked, stderr)
	t.Logf("child: %s (%d acknowledged)", line, len(acked))
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged before the refusal", len(acked))
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "FREED")
	memorytest.ExpectLine(t, sc, "RECOVERED", acked, stderr)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the store process failed: %v (a SIGBUS means the disk filled under Badger)\n%s", err, memorytest.Tail(stderr.String(), 4000))
	}

	cfg := tmpfsConfig(data)
	s := memorytest.Open(t, cfg, nil)
	defer s.Close()
	for c := range acked {
		k, err := cid.Decode(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Block(k); err != nil {
			t.Fatalf("acknowledged %s lost: %v", c, err)
		}
	}
}

// tmpfsConfig keeps Badger's memtables and the reserve small enough for
// a 40 MiB file system (the reserve must cover a memtable flush).
func tmpfsConfig(dir string) config.Config {
	cfg := memorytest.Config(dir)
	cfg.Store.MemTableMB = 2
	cfg.Store.MinFreeMB = 8
	return cfg
}

func diskFullChild(t *testing.T) {
	dir := os.Getenv("MEMORIA_FAULT_DIR")
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: tmpfsConfig(dir), Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	o := memorytest.NewOwner(t, s, "filler")
	write := func(i int) (cid.Cid, error) {
		if i%4 == 0 {
			b := make([]byte, 100<<10) // into the value log
			rand.Read(b)
			return s.Chains.PutFile(context.Background(), b, "")
		}
		return o.TryAdd(&model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("memory %d: %s", i, strings.Repeat("filling the disk ", 200))}}}, nil)
	}
	var first cid.Cid
	i := 0
	for ; ; i++ {
		c, err := write(i)
		if errors.Is(err, base.ErrDiskFull) {
			break
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if first == cid.Undef {
			first = c
		}
		fmt.Printf("ACK %s\n", c)
	}
	if _, err := s.Block(first); err != nil {
		t.Fatalf("read while full: %v", err)
	}
	if !strings.Contains(logs.String(), "refusing writes") {
		t.Fatal("no log line for the refusal")
	}
	fmt.Printf("FULL after %d writes\n", i)
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "FREED" {
		t.Fatal("no word from the parent")
	}
	for j := range 3 {
		c, err := write(i + 1 + j)
		if err != nil {
			t.Fatalf("write after space returned: %v", err)
		}
		fmt.Printf("ACK %s\n", c)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("RECOVERED")
}

// writerChild appends memories to a new sona until it has n, printing
// "ACK <cid>" for each once it is acknowledged, then "DONE", and waits to
// be killed.
func writerChild(t *testing.T, n int) {
	s, err := memorytest.OpenWith(memory.Options{Config: memorytest.Config(os.Getenv("MEMORIA_FAULT_DIR"))})
	if err != nil {
		t.Fatal(err)
	}
	o := memorytest.NewOwner(t, s, "writer")
	for i := range n {
		c := o.Text(fmt.Sprintf("acknowledged memory %d about the orchard", i))
		fmt.Printf("ACK %s\n", c)
	}
	// The full-text index persisted up to the last write: a store that
	// loses writes afterwards finds the index ahead of it, every time.
	if err := s.Text.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Text.Raw().Flush(); err != nil {
		t.Fatal(err)
	}
	memorytest.AwaitKill(t)
}

// killAfterWrites runs test's writer child on dir and kills it with
// SIGKILL once it acknowledged n memories (still in Badger's memtable
// and its write-ahead log: nothing flushed, nothing closed).
func killAfterWrites(t *testing.T, test, dir string, n int) map[string]bool {
	t.Helper()
	acked := memorytest.KillAtDone(t, test, "MEMORIA_FAULT_DIR="+dir, fmt.Sprintf("MEMORIA_FAULT_N=%d", n))
	if len(acked) != n {
		t.Fatalf("%d acknowledged, want %d", len(acked), n)
	}
	return acked
}

// holdsAcked fails t unless s holds every memory of acked.
func holdsAcked(t *testing.T, s *memory.Self, acked map[string]bool) {
	t.Helper()
	for c := range acked {
		k, _ := cid.Decode(c)
		if _, _, err := s.Memories.Get(k); err != nil {
			t.Fatalf("acknowledged %s: %v", c, err)
		}
	}
}

// A kill -9 loses nothing acknowledged, and the restart says nothing is
// wrong (the acknowledged mark raises no false alarm).
func TestKillNineLosesNothing(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		writerChild(t, memorytest.ChildN())
		return
	}
	dir := t.TempDir()
	acked := killAfterWrites(t, t.Name(), dir, 300)
	s := memorytest.Open(t, memorytest.Config(dir), nil)
	defer s.Close()
	holdsAcked(t, s, acked)
}

// A kill -9 loses no link back held in memory (recall.links_hold): the
// restart reads them again from the new memories' own lists, and every
// stored link is then stored both ways.
func TestKillNineLosesNoLinkBack(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		writerChild(t, memorytest.ChildN())
		return
	}
	dir := t.TempDir()
	acked := killAfterWrites(t, t.Name(), dir, 200)
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: memorytest.Config(dir), Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	memorytest.MustLog(t, logs, "links: the links back of memories after the last written read again")
	if err := s.Assoc.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored := func(c cid.Cid) map[cid.Cid]string {
		out := map[cid.Cid]string{}
		err := s.Store().View(func(r store.Reader) error {
			links, err := assoc.Read(r, assoc.Key(c))
			for _, l := range links {
				out[l.Target] = l.Type
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	sequential := 0
	for k := range acked {
		c, _ := cid.Decode(k)
		for target, typ := range stored(c) {
			if back, ok := stored(target)[c]; !ok || back != typ {
				t.Fatalf("%s links to %s (%s), which does not link back (%q)", c, target, typ, back)
			}
			if typ == assoc.Sequential {
				sequential++
			}
		}
	}
	if sequential != 2*(len(acked)-1) {
		t.Fatalf("%d sequential links stored among %d memories of one sona, want %d", sequential, len(acked), 2*(len(acked)-1))
	}
}

// A write-ahead log holding more than a memtable of the memtable_mb the
// store is opened with (the setting lowered, or its default, after a kill
// -9) is replayed into memtables its size — Badger's replay into the
// configured one would end the process — and loses nothing.
func TestWriteAheadLogLargerThanTheMemtable(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		writerChild(t, memorytest.ChildN())
		return
	}
	dir := t.TempDir()
	acked := killAfterWrites(t, t.Name(), dir, 1000)
	cfg := memorytest.Config(dir)
	cfg.Store.MemTableMB = 1
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.Contains(logs.String(), "a write-ahead log holds more than a memtable") {
		t.Fatalf("the larger memtable is not logged (the log was not larger than 1 MiB?):\n%s", logs.String())
	}
	holdsAcked(t, s, acked)
}

// One flipped byte in the memtable's write-ahead log after a kill -9:
// Badger's replay stops there and drops the rest. The store must say so
// — which log, how much was lost — and refuse to serve, again at every
// open, until the loss is accepted; accepting it serves what remains and
// logs what is gone.
func TestCorruptWriteAheadLogIsNoticed(t *testing.T) {
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		writerChild(t, memorytest.ChildN())
		return
	}
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	acked := killAfterWrites(t, t.Name(), dir, 300)
	wals, _ := filepath.Glob(filepath.Join(dir, "store", "*.mem"))
	if len(wals) != 1 {
		t.Fatalf("write-ahead logs %v, want one", wals)
	}
	wal := filepath.Base(wals[0])
	flipInData(t, wals[0], 0.5)

	_, err := memorytest.OpenWith(memory.Options{Config: cfg})
	if !errors.Is(err, base.ErrLostWrites) {
		t.Fatalf("open after the damage: err = %v, want base.ErrLostWrites", err)
	}
	for _, want := range []string{wal, "the last acknowledged memory was 300", "memories lost", "memoria repair --accept-loss"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not say %q: %v", want, err)
		}
	}
	if copies, _ := filepath.Glob(filepath.Join(dir, "store.damaged", wal+"-*")); len(copies) != 1 {
		t.Fatalf("copies of the damaged log: %v, want one", copies)
	}
	t.Logf("refused: %v", err)
	// Refused again, though the first open's replay cut the log.
	if _, err := memorytest.OpenWith(memory.Options{Config: cfg}); !errors.Is(err, base.ErrLostWrites) || !strings.Contains(err.Error(), "the last acknowledged memory was 300") {
		t.Fatalf("second open: err = %v, want base.ErrLostWrites again", err)
	}

	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, AcceptLoss: true, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "accepted the loss of acknowledged writes") || !strings.Contains(logs.String(), "memories lost") {
		t.Fatalf("the loss is not logged:\n%s", logs.String())
	}
	_, mems := s.Counts()
	if mems == 0 || mems >= 300 {
		t.Fatalf("%d memories after the loss of part of 300", mems)
	}
	kept := 0
	for c := range acked {
		k, _ := cid.Decode(c)
		if _, _, err := s.Memories.Get(k); err == nil {
			kept++
		} else if !errors.Is(err, base.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if int64(kept) != mems {
		t.Fatalf("%d of the acknowledged memories readable, %d memories", kept, mems)
	}
	// The full-text index held what the store lost: rebuilt, so that the
	// memories written from now on are found.
	if !strings.Contains(logs.String(), "ahead of the store") {
		t.Fatalf("the full-text index was not rebuilt:\n%s", logs.String())
	}
	var sona string
	for _, id := range s.Sonas.IDs() {
		sona = id
	}
	rec, _ := s.Sonas.Get(sona)
	head, _ := cid.Decode(rec.GetHead())
	o := &memorytest.Owner{T: t, S: s, Sona: sona, Head: &head, N: rec.Length}
	fresh := o.Text("a new memory about marmalade after the repair")
	if err := s.Text.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Text.Raw().Search("marmalade", text.SearchOptions{K: 5})
	if err != nil || len(hits) != 1 || hits[0].ID != fresh.String() {
		t.Fatalf("the new memory in the full-text index: %v %v", hits, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, cfg, nil) // accepted: opens without the flag from now on
	s.Close()
}

// flipInData flips a byte at frac of the data of a (sparse) log file.
func flipInData(t *testing.T, path string, frac float64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	end, err := store.DataEnd(f)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, end)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	last := bytes.LastIndexFunc(b, func(r rune) bool { return r != 0 })
	at := int64(float64(last) * frac)
	if _, err := f.WriteAt([]byte{b[at] ^ 0xff}, at); err != nil {
		t.Fatal(err)
	}
}

// A damaged table: the open names corruption and the file, never "has no
// embedding" — wherever the damage is (a data block, the index, the
// footer, which makes Badger panic at open). Badger checksums a block's
// decompressed bytes, so a flipped byte that Snappy decodes to the same
// data (a copy's offset now pointing at identical bytes: this test's
// texts repeat) is harmless and undetectable: then the store must open
// and read back exactly what was written.
//
// With store.verify_tables off only damage Badger itself checks at open
// (the index) is named at open; a damaged data block is found when read,
// and can panic Badger there (README: Damaged files), so those positions
// are not opened without the check.
func TestCorruptTableIsNamed(t *testing.T) {
	pristineDir := t.TempDir()
	s := memorytest.Open(t, memorytest.Config(pristineDir), nil)
	o := memorytest.NewOwner(t, s, "a")
	for i := range 300 {
		o.Text(fmt.Sprintf("memory %d about tables and their blocks %d", i, i*7))
	}
	if err := s.Close(); err != nil { // flushes the memtable into a table
		t.Fatal(err)
	}
	pristine := dumpStore(t, pristineDir)
	if len(pristine) == 0 {
		t.Fatal("nothing read from the store")
	}
	for _, where := range []float64{0.01, 0.3, 0.5, 0.7, 0.98, 0.9995} {
		for _, verify := range []bool{true, false} {
			if !verify && where < 0.9 {
				continue
			}
			t.Run(fmt.Sprintf("at=%v/verify=%v", where, verify), func(t *testing.T) {
				dir := t.TempDir()
				if err := os.CopyFS(dir, os.DirFS(pristineDir)); err != nil {
					t.Fatal(err)
				}
				ssts, _ := filepath.Glob(filepath.Join(dir, "store", "*.sst"))
				if len(ssts) == 0 {
					t.Fatal("no table")
				}
				testutil.FlipByte(t, ssts[0], where, 0xff)
				cfg := memorytest.Config(dir)
				cfg.Store.VerifyTables = verify
				s, err := memorytest.OpenWith(memory.Options{Config: cfg})
				if err == nil {
					s.Close()
					if got := dumpStore(t, dir); !maps.Equal(got, pristine) {
						t.Fatalf("the store opened though its table %s reads differently (%d keys, %d before)", filepath.Base(ssts[0]), len(got), len(pristine))
					}
					return
				}
				if name := filepath.Base(ssts[0]); !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), "corrupt store: "+name) {
					t.Fatalf("err = %v, want corruption of %s", err, name)
				}
			})
		}
	}
}

// dumpStore reads every key and value of the store in dir, from a copy
// (an open writes).
func dumpStore(t *testing.T, dir string) map[string]string {
	t.Helper()
	cp := t.TempDir()
	if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(cp, "store"), store.OptionsOf(memorytest.Config(cp).Store))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string]string{}
	err = st.View(func(r store.Reader) error {
		return store.Scan(r, nil, func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A damaged value in the value log (large blocks live there): reading
// that block is base.ErrCorrupt naming the file, everything else reads, and
// the damaged log is not cut at the bad entry (Badger's replay would).
func TestCorruptValueLogFailsOnlyThatBlock(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, nil)
	o := memorytest.NewOwner(t, s, "a")
	var files [][]byte
	var fcids []cid.Cid
	for range 6 {
		b := make([]byte, 100<<10)
		rand.Read(b)
		c, err := s.Chains.PutFile(context.Background(), b, "")
		if err != nil {
			t.Fatal(err)
		}
		files, fcids = append(files, b), append(fcids, c)
	}
	var mems []cid.Cid
	for i := range 10 {
		mems = append(mems, o.Text(fmt.Sprintf("a small memory %d", i)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "store", "*.vlog"))
	var damaged string
	for _, v := range vlogs {
		b, _ := os.ReadFile(v)
		if at := bytes.Index(b, files[2][:64]); at >= 0 {
			b[at+50<<10] ^= 0xff
			if err := os.WriteFile(v, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged = filepath.Base(v)
		}
	}
	if damaged == "" {
		t.Fatal("the file's bytes are in no value log")
	}

	for round := range 2 { // and again after another session
		logs := &memorytest.LogBuffer{}
		s, err := memorytest.OpenWith(memory.Options{Config: cfg, Logger: logs.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 && !strings.Contains(logs.String(), "the value log is corrupt") {
			t.Fatalf("no log line for the damaged value log:\n%s", logs.String())
		}
		if _, err := s.Block(fcids[2]); !errors.Is(err, base.ErrCorrupt) || !strings.Contains(err.Error(), damaged) {
			t.Fatalf("the damaged block: err = %v, want base.ErrCorrupt naming %s", err, damaged)
		}
		for i, c := range fcids {
			if i == 2 {
				continue
			}
			if b, err := s.Block(c); err != nil || !bytes.Equal(b, files[i]) {
				t.Fatalf("file %d: %v", i, err)
			}
		}
		for _, c := range mems {
			if _, _, err := s.Memories.Get(c); err != nil {
				t.Fatal(err)
			}
		}
		b := make([]byte, 100<<10)
		rand.Read(b)
		if _, err := s.Chains.PutFile(context.Background(), b, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A damaged full-text index is rebuilt from the store at open (its
// snapshot fails its checksum). After the rebuild, BM25 finds what a
// fresh index finds. Files damaged under a running index do not reach
// searches (the index is read at open) and are replaced by the snapshot
// Close writes.
func TestCorruptTextIndexIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	clock := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clock)
	o := memorytest.NewOwner(t, s, "a")
	o.Conversation(clock, 80, 3)
	queries := []string{"tomato lisbon sunset", "orchard harvest", "meeting on tuesday"}
	bm25 := func(s *memory.Self) map[string][]text.Hit {
		t.Helper()
		if err := s.Text.Settle(context.Background()); err != nil {
			t.Fatal(err)
		}
		out := map[string][]text.Hit{}
		for _, q := range queries {
			hits, err := s.Text.Raw().Search(q, text.SearchOptions{K: 20})
			if err != nil {
				t.Fatal(err)
			}
			out[q] = hits
		}
		return out
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What a fresh index finds.
	os.RemoveAll(filepath.Join(dir, "text"))
	s = memorytest.Open(t, cfg, clock)
	want := bm25(s)
	if len(want[queries[0]]) == 0 {
		t.Fatal("nothing found")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	damageSnapshot(t, filepath.Join(dir, "text"))
	logs := &memorytest.LogBuffer{}
	s, err := memorytest.OpenWith(memory.Options{Config: cfg, Clock: clock, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	s.Text.Raw() // the index loads beside the open: until it has, nothing tells
	if !strings.Contains(logs.String(), "rebuilding the full-text index") || s.Text.Rebuilds() != 1 {
		t.Fatalf("not rebuilt at open (%d rebuilds):\n%s", s.Text.Rebuilds(), logs.String())
	}
	if got := bm25(s); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("rebuilt at open: %v, fresh: %v", got, want)
	}

	// Damaged under the running index: searches go on from memory, and
	// Close writes a new snapshot over the damage.
	if err := s.Text.Raw().Flush(); err != nil {
		t.Fatal(err)
	}
	damageSnapshot(t, filepath.Join(dir, "text"))
	if got := bm25(s); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("over a damaged snapshot: %v, fresh: %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs = &memorytest.LogBuffer{}
	if s, err = memorytest.OpenWith(memory.Options{Config: cfg, Clock: clock, Logger: logs.Logger()}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Text.Raw(); s.Text.Rebuilds() != 0 {
		t.Fatalf("rebuilt after a clean close:\n%s", logs.String())
	}
	if got := bm25(s); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after the close: %v, fresh: %v", got, want)
	}
}

// damageSnapshot overwrites the middle of the full-text index's snapshot
// in place.
func damageSnapshot(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "index"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	junk := make([]byte, fi.Size()/2)
	rand.Read(junk)
	if _, err := f.WriteAt(junk, fi.Size()/4); err != nil {
		t.Fatal(err)
	}
}

// A read-only data directory: the open fails with one clear line.
func TestReadOnlyDataDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, nil)
	memorytest.NewOwner(t, s, "a").Text("written while writable")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 { // root writes through permissions: a read-only mount
		for _, args := range [][]string{{"--bind", dir, dir}, {"-o", "remount,bind,ro", dir}} {
			if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
				t.Fatalf("mount %v: %v: %s", args, err, out)
			}
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
	} else {
		for _, d := range []string{dir, filepath.Join(dir, "store"), filepath.Join(dir, "text")} {
			os.Chmod(d, 0o555)
			t.Cleanup(func() { os.Chmod(d, 0o755) })
		}
	}
	_, err := memorytest.OpenWith(memory.Options{Config: cfg})
	if err == nil {
		t.Fatal("opened a read-only data directory")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "not writable") || len(msg) > 300 {
		t.Fatalf("not one clear line: %q", msg)
	}
	t.Logf("refused: %v", err)
}

// A damaged acknowledged mark cannot tell whether writes were lost: the
// store says so and refuses, until the loss (if any) is accepted.
func TestUnreadableMarkRefusesUntilAccepted(t *testing.T) {
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, nil)
	c := memorytest.NewOwner(t, s, "a").Text("a memory")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "store", store.AckFileName)
	b, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	b[30] ^= 1
	if err := os.WriteFile(mark, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := memorytest.OpenWith(memory.Options{Config: cfg}); !errors.Is(err, base.ErrLostWrites) || !strings.Contains(err.Error(), "unreadable") ||
		!strings.Contains(err.Error(), "memoria repair --accept-loss") {
		t.Fatalf("err = %v, want base.ErrLostWrites naming the unreadable mark", err)
	}
	s, err = memorytest.OpenWith(memory.Options{Config: cfg, AcceptLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Memories.Get(c); err != nil || !strings.Contains(s.Store().AcceptedLoss(), "unreadable") {
		t.Fatalf("after accepting: %v, %q", err, s.Store().AcceptedLoss())
	}
	s.Close()
	memorytest.Open(t, cfg, nil).Close()
}
