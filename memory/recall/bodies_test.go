package recall_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
)

// bodyPaths reads every part of a body the evidence reads: its time
// (time, session, context), its speaker (speaker), whether it asks
// (reply).
var bodyPaths = recall.Paths{Weights: config.PathWeights{Dense: 1, BM25: 1, Context: 1, Session: 1, Time: 1, Speaker: 1, Reply: 1}, Fusion: "weighted"}

// bodyReads is rc's recall of q and the bodies it read, by memory.
func bodyReads(t *testing.T, rc *recall.Recaller, mems *countingMemories, q recall.Query) (map[cid.Cid]recall.Explain, map[cid.Cid]int) {
	t.Helper()
	mems.mu.Lock()
	clear(mems.reads)
	mems.mu.Unlock()
	rs, _, err := rc.Recall(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	mems.mu.Lock()
	defer mems.mu.Unlock()
	reads := map[cid.Cid]int{}
	for c, n := range mems.reads {
		reads[c] = n
	}
	return evidenceOf(rs), reads
}

// What the appends told the self's recaller of its memories' bodies (their
// time, speaker, whether they ask) goes to the body snapshot at Close;
// a recaller that reads it reads no body to score, only those of what it
// returns, and scores as one that read them all.
func TestBodySnapshotSparesTheReads(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	dir := t.TempDir()
	cfg := memorytest.Config(dir)
	s := memorytest.Open(t, cfg, clk)
	o, m := contextSona(t, s, clk)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := memory.BodySnapshotPath(dir)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no body snapshot after Close: %v", err)
	}
	s = memorytest.Open(t, cfg, clk)
	defer s.Close()
	cold, coldMems := countingRecaller(t, s, cfg, clk)
	known, knownMems := countingRecaller(t, s, cfg, clk)
	took, dropped, err := known.LoadBodies(path)
	if err != nil || took != len(m) || dropped != 0 {
		t.Fatalf("LoadBodies = %d taken, %d dropped, %v; want the %d memories, none dropped", took, dropped, err, len(m))
	}
	q := recall.Query{Sona: o.Sona, Text: "What did Ann ask about the aurora yesterday?", K: 2, Paths: &bodyPaths, Now: clk.Now().Unix()}
	want, coldReads := bodyReads(t, cold, coldMems, q)
	got, knownReads := bodyReads(t, known, knownMems, q)
	if len(got) != len(want) {
		t.Fatalf("%d recalled, want %d", len(got), len(want))
	}
	for c, e := range want {
		if got[c].Evidence != e.Evidence || got[c].Fused != e.Fused {
			t.Errorf("%s scores otherwise: %+v, want %+v", c, got[c].Evidence, e.Evidence)
		}
	}
	if want[m["a1"]].Evidence.Speaker == 0 || want[m["a2"]].Evidence.Reply == 0 && want[m["a1"]].Evidence.Time == 0 {
		t.Fatalf("the query reads no speaker, reply or time: %+v", want)
	}
	for c, n := range knownReads {
		if _, returned := got[c]; !returned || n != 1 {
			t.Errorf("with the snapshot the recall read the body of %s %d times (returned: %v)", c, n, returned)
		}
	}
	if len(coldReads) <= len(knownReads) {
		t.Errorf("without the snapshot the recall read %d bodies, with it %d", len(coldReads), len(knownReads))
	}
}

// An entry of the snapshot whose vector id names another memory in the
// index that reads it (an index built in another order) is dropped; a
// snapshot that does not check is refused whole.
func TestBodySnapshotChecksItsMemories(t *testing.T) {
	clk := clock.NewFake(memorytest.Epoch)
	cfg := memorytest.Config(t.TempDir())
	s := memorytest.Open(t, cfg, clk)
	defer s.Close()
	contextSona(t, s, clk)
	path := filepath.Join(t.TempDir(), "bodies.snap")
	if n, err := s.Recaller.WriteBodies(path); err != nil || n != 6 {
		t.Fatalf("WriteBodies = %d, %v; want 6", n, err)
	}

	// The same memories, one more written first: every id is another's.
	cfg2 := memorytest.Config(t.TempDir())
	s2 := memorytest.Open(t, cfg2, clk)
	defer s2.Close()
	memorytest.NewOwner(t, s2, "first").Add(&model.Memory{Data: model.Data{Other: &model.OtherData{Content: "Before anything else."}}}, nil)
	contextSona(t, s2, clk)
	rc, _ := countingRecaller(t, s2, cfg2, clk)
	if took, dropped, err := rc.LoadBodies(path); err != nil || took != 0 || dropped != 6 {
		t.Errorf("LoadBodies of another index's ids = %d taken, %d dropped, %v; want all 6 dropped", took, dropped, err)
	}

	testutil.FlipByte(t, path, 0.5, 1)
	if _, _, err := rc.LoadBodies(path); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("a snapshot with a flipped bit loaded: %v", err)
	}
}
