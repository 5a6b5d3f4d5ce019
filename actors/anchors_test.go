package actors_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/anchor"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/messages"
)

// recordingSink is an AnchorSink that keeps what it hears and fails while
// told to.
type recordingSink struct {
	mu      sync.Mutex
	heard   []cid.Cid
	failing bool
	calls   int
}

func (s *recordingSink) Anchor(_ context.Context, a anchor.Anchor) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failing {
		return errors.New("the chain is congested")
	}
	s.heard = append(s.heard, a.CID)
	return nil
}

func (s *recordingSink) snapshot() ([]cid.Cid, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.heard), s.calls
}

func (s *recordingSink) setFailing(f bool) { s.mu.Lock(); s.failing = f; s.mu.Unlock() }

func startWithSink(t *testing.T, cfg config.Config, sink anchor.Sink) *env {
	t.Helper()
	self, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims)})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := actors.Start(actors.Options{Self: self, LLM: llm.NewOffline(), Config: cfg, AnchorSink: sink})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{self: self, sys: sys}
	t.Cleanup(e.close)
	return e
}

// insertText appends a text memory through the sona's actor.
func insertText(t *testing.T, e *env, sona, text string) cid.Cid {
	t.Helper()
	ctx := context.Background()
	vecs, err := e.self.Embed(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.self.Chains.Prepare(&model.Memory{Data: model.Data{Text: &model.TextData{Content: text}}}, vecs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sys.Append(ctx, sona, p); err != nil {
		t.Fatal(err)
	}
	return p.CID
}

func TestAnchorSinkHearsEveryAnchorOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Heartbeat.Interval = config.Duration(time.Hour) // ticks only when asked

	// Anchors made while no sink listens wait in the list.
	e := start(t, cfg, nil, actors.TestingKnobs{})
	ctx := context.Background()
	rec, err := e.self.Sonas.Create(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	want := []cid.Cid{insertText(t, e, rec.Uuid, "The database went down at noon.")}
	insertText(t, e, rec.Uuid, "Lunch was pasta.")
	e.close()

	sink := &recordingSink{}
	e = startWithSink(t, cfg, sink)
	testutil.Eventually(t, "the sink to hear the anchor made before it was wired", func() bool {
		heard, _ := sink.snapshot()
		return len(heard) == 1
	})
	want = append(want, insertText(t, e, rec.Uuid, "We decided to move to Postgres."))
	testutil.Eventually(t, "the sink to hear a new anchor", func() bool {
		heard, _ := sink.snapshot()
		return len(heard) == 2
	})

	// A failing sink loses nothing: the anchor stays listed and is
	// offered again at the next wake (here a heartbeat tick).
	sink.setFailing(true)
	want = append(want, insertText(t, e, rec.Uuid, "We shipped the migration."))
	testutil.Eventually(t, "the sink to be tried", func() bool {
		_, calls := sink.snapshot()
		return calls >= 3
	})
	page, err := e.self.Anchors.Page(0, 10)
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("anchor list while the sink fails: %v %v", page.Items, err)
	}
	sink.setFailing(false)
	if _, err := e.sys.Heartbeat(ctx, false); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the sink to hear the anchor it failed on", func() bool {
		heard, _ := sink.snapshot()
		return len(heard) == 3
	})
	heard, _ := sink.snapshot()
	if !slices.Equal(heard, want) {
		t.Fatalf("heard %v, want %v in list order", heard, want)
	}

	// After a restart the sink hears nothing twice.
	e.close()
	again := &recordingSink{}
	e = startWithSink(t, cfg, again)
	extra := insertText(t, e, rec.Uuid, "A postmortem of the outage is written.")
	testutil.Eventually(t, "the sink to hear the anchor after the restart", func() bool {
		heard, _ := again.snapshot()
		return len(heard) >= 1
	})
	if heard, _ := again.snapshot(); !slices.Equal(heard, []cid.Cid{extra}) {
		t.Fatalf("after a restart the sink heard %v, want only %s", heard, extra)
	}
}

// secondPrepared starts an engine with a sona "a" holding the memory
// "first", and prepares a second memory for it, not yet appended.
func secondPrepared(t *testing.T) (*env, *messages.Sona, cid.Cid, *model.Prepared) {
	t.Helper()
	e := start(t, testConfig(t.TempDir()), nil, actors.TestingKnobs{})
	ctx := context.Background()
	rec, err := e.self.Sonas.Create(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	first := insertText(t, e, rec.Uuid, "first")
	vecs, _ := e.self.Embed(ctx, "second")
	p, err := e.self.Chains.Prepare(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "second"}}}, vecs[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, rec, first, p
}

// An append the import expects at a seq fails when the chain moved: an
// import never lands a memory elsewhere than its export says.
func TestAppendAtAnExpectedSeq(t *testing.T) {
	e, rec, _, p := secondPrepared(t)
	ctx := context.Background()
	p.ExpectSeq = proto.Int64(0)
	if _, err := e.sys.Append(ctx, rec.Uuid, p); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("append expected at seq 0 of a chain of 1: %v", err)
	}
	p.ExpectSeq = proto.Int64(1)
	r, err := e.sys.Append(ctx, rec.Uuid, p)
	if err != nil || r.GetSeq() != 1 {
		t.Fatalf("append at the expected seq: %v %v", r, err)
	}
	if got, _ := e.self.Sonas.Get(rec.Uuid); got.Length != 2 {
		t.Fatalf("length %d", got.Length)
	}
}

// An Append hands its prepared memory to the sona actor in this process;
// whatever becomes of the append (stored, refused, a reused memory), none
// is left behind, and what was stored is the memory prepared.
func TestAppendsLeaveNothingPrepared(t *testing.T) {
	e, rec, first, p := secondPrepared(t)
	ctx := context.Background()
	p.ExpectSeq = proto.Int64(0)
	if _, err := e.sys.Append(ctx, rec.Uuid, p); !errors.Is(err, base.ErrChainConflict) {
		t.Fatalf("append expected at seq 0 of a chain of 1: %v", err)
	}
	p.ExpectSeq = nil
	if r, err := e.sys.Append(ctx, rec.Uuid, p); err != nil || r.GetSeq() != 1 || r.Cid != p.CID.String() {
		t.Fatalf("append: %v %v", r, err)
	}
	if r, err := e.sys.Append(ctx, rec.Uuid, p); err != nil || r.Seq != nil {
		t.Fatalf("the same memory again: %v %v (want existed)", r, err)
	}
	if _, err := e.sys.Append(ctx, "00000000-0000-4000-8000-000000000000", p); err == nil {
		t.Fatal("append to an unknown sona")
	}
	if n := actors.PreparedInFlight(e.sys); n != 0 {
		t.Fatalf("%d prepared memories left behind", n)
	}
	mems := walkChain(t, e.self, rec.Uuid)
	if len(mems) != 2 || !slices.Contains(mems, first) || !slices.Contains(mems, p.CID) {
		t.Fatalf("chain %v", mems)
	}
	if got, err := e.self.Block(p.CID); err != nil || string(got) != string(p.Block) {
		t.Fatalf("stored block of %s: %v", p.CID, err)
	}
}
