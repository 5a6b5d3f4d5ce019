package forget_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/forget"
	"github.com/memoria-ai/memoria/memory/living"
	"github.com/memoria-ai/memoria/memory/memorytest"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/text"
	"github.com/memoria-ai/memoria/messages"
)

// marker is a word no kept memory says: after a forget and a purge, no
// file of the data directory may hold it, in any case.
const marker = "zqvxjtkqw"

// grepDir lists the files under dir that hold word (case-insensitive).
func grepDir(t *testing.T, dir, word string) []string {
	t.Helper()
	lower := []byte(strings.ToLower(word))
	// The store writes beside the walk (a metadata snapshot's part file,
	// renamed when whole): a file gone before it is read was renamed, and
	// the walk runs again to read it under its new name.
	for range 10 {
		var hits []string
		vanished := false
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				vanished = true
				return nil
			}
			if err != nil {
				return err
			}
			if bytes.Contains(bytes.ToLower(b), lower) {
				rel, _ := filepath.Rel(dir, path)
				hits = append(hits, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !vanished {
			return hits
		}
	}
	t.Fatalf("files of %s kept vanishing during ten walks", dir)
	return nil
}

// forgetConfig scales the store down so that a byte search of its files
// is quick: Badger maps its value-log files at twice their size.
func forgetConfig(dir string) config.Config {
	cfg := memorytest.Config(dir)
	cfg.Store.MemTableMB = 1
	cfg.Store.ValueLogMB = 2
	return cfg
}

func recallCIDs(t *testing.T, s *memory.Self, sona, q string) []cid.Cid {
	t.Helper()
	out, err := memorytest.Recall(s, context.Background(), recall.Query{Sona: sona, Text: q, Peek: true, K: 20})
	if err != nil {
		t.Fatal(err)
	}
	var cids []cid.Cid
	for _, r := range out {
		cids = append(cids, r.CID)
	}
	return cids
}

// forgetScene is a self with memories to forget and memories to keep: a
// sona's pages in its tiers, a memory that cites the doomed one, a merge
// and an insight that restate it, and another sona.
type forgetScene struct {
	s                      *memory.Self
	alice, bob             *memorytest.Owner
	doomed, cites, page    cid.Cid
	merge, insight         cid.Cid
	kept                   []cid.Cid
	bobs                   []cid.Cid
	recalledBefore, second cid.Cid
}

func newForgetScene(t *testing.T, dir string) *forgetScene {
	t.Helper()
	ctx := context.Background()
	fs := &forgetScene{}
	s := memorytest.Open(t, forgetConfig(dir), clock.NewFake(memorytest.Epoch))
	fs.s = s
	fs.alice = memorytest.NewOwner(t, s, "alice")
	fs.bob = memorytest.NewOwner(t, s, "bob")
	a := fs.alice
	for _, line := range []string{"the orchard needs water in august", "pears ripen after apples", "the shed key is under the blue pot"} {
		fs.kept = append(fs.kept, a.Text(line))
	}
	fs.doomed = a.Text("my bank password hint is " + marker + " and the cat's name")
	fs.cites = a.Text("remember what I said about the bank", model.Edge{Target: fs.doomed, Weight: 0.9})
	fs.kept = append(fs.kept, fs.cites)
	fs.merge = a.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "summary: bank password hint " + marker}},
		Edges: []model.Edge{{Target: fs.doomed, Weight: 1}, {Target: fs.kept[0], Weight: 0.5}}},
		&messages.MemoryMeta{Labels: map[string]string{living.LabelMerge: "compression", living.LabelMerged: "2"}})
	insightEdges := []model.Edge{{Target: fs.merge, Weight: 1}}
	model.SortEdges(insightEdges)
	fs.insight = a.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "pattern: the user keeps hints like " + marker}}, Edges: insightEdges},
		&messages.MemoryMeta{Insight: &messages.InsightMark{Category: living.InsightPattern, Confidence: 0.8}})
	// A dialogue page whose question is the doomed memory.
	reply := a.Add(a.Say("Melanie", "it is the hint you gave"), nil)
	if err := s.Tiers.PushPage(ctx, a.Sona, fs.doomed, reply); err != nil {
		t.Fatal(err)
	}
	a.Page("how are the pears", "they ripen after the apples")
	memorytest.Settle(t, s, a.Sona)
	for i := range 3 {
		fs.bobs = append(fs.bobs, fs.bob.Text(fmt.Sprintf("bob's note %d about the weather", i)))
	}
	// A recall that leaves a trace: the query log and co-access.
	if _, err := memorytest.Recall(s, ctx, recall.Query{Sona: a.Sona, Text: "bank password " + marker, K: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Store().Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Text.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Text.Raw().HasTerm(marker); err != nil || !ok {
		t.Fatalf("before the forget, the full-text dictionary holds the marker: %v, %v; want true", ok, err)
	}
	if !slices.Contains(recallCIDs(t, s, a.Sona, marker), fs.doomed) {
		t.Fatal("before the forget, recall does not find the doomed memory: the test shows nothing")
	}
	return fs
}

func TestForgetExcisesAMemoryAndWhatRestatedIt(t *testing.T) {
	dir := t.TempDir()
	fs := newForgetScene(t, dir)
	s, ctx := fs.s, context.Background()
	vectors := s.Index().Len()
	_, before := s.Counts()

	// A dry run lists and writes nothing.
	dry, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{CIDs: []cid.Cid{fs.doomed}}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Memories != 3 || dry.Batches != 0 {
		t.Fatalf("dry run: %+v, want 3 memories (the doomed one, the merge, the insight) and no batch", dry)
	}
	if _, _, err := s.Memories.Get(fs.doomed); err != nil {
		t.Fatalf("after a dry run: %v", err)
	}

	// Used before: their hot state (o/) has a record of its own, which goes too.
	used := []cid.Cid{fs.doomed, fs.merge, fs.insight}
	if err := s.Store().Update(ctx, meta.Touch(used, make([]string, len(used)), nil)); err != nil {
		t.Fatal(err)
	}
	// Recalled together with two kept memories: the co-access learning,
	// in memory until it is written (recall.coaccess_flush), loses them.
	together := append(slices.Clone(used), fs.kept[0], fs.kept[1])
	if err := s.Store().Update(ctx, s.Assoc.Strengthen("agent", together, 0.05, 1)); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{CIDs: []cid.Cid{fs.doomed}}, Reason: "user asked", By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{}
	for _, tb := range rep.Tombstones {
		rules[tb.Cid] = tb.Rule
	}
	want := map[string]string{fs.doomed.String(): forget.RuleCID, fs.merge.String(): forget.RuleSummary, fs.insight.String(): forget.RuleSummary}
	if fmt.Sprint(rules) != fmt.Sprint(want) || rep.Batches != 1 {
		t.Fatalf("forgot %v in %d batches, want %v in 1", rules, rep.Batches, want)
	}
	check := func(s *memory.Self) {
		t.Helper()
		for _, c := range []cid.Cid{fs.doomed, fs.merge, fs.insight} {
			if _, _, err := s.Memories.Get(c); !errors.Is(err, base.ErrForgotten) {
				t.Fatalf("memory %s after the forget: %v, want base.ErrForgotten", c, err)
			}
			if _, err := s.Block(c); !errors.Is(err, base.ErrForgotten) {
				t.Fatalf("block %s after the forget: %v, want base.ErrForgotten", c, err)
			}
			if _, err := s.Memories.Vector(c); err == nil {
				t.Fatalf("the embedding of %s survived", c)
			}
			tb, err := s.Tombstone(c)
			if err != nil || tb.ForgottenAt != memorytest.Epoch.Unix() || (c == fs.doomed && (tb.Reason != "user asked" || tb.By != "test" || tb.Sonas[0] != fs.alice.Sona)) {
				t.Fatalf("tombstone of %s: %v, %v", c, tb, err)
			}
			links, err := s.Assoc.Associations(c)
			if err != nil || len(links) > 0 {
				t.Fatalf("associations of %s survived: %v %v", c, links, err)
			}
			if co, err := s.Assoc.CoAccess("agent", c); err != nil || len(co) > 0 {
				t.Fatalf("co-access partners of %s survived: %v %v", c, co, err)
			}
			if err := s.Store().View(func(r store.Reader) error {
				if has, err := r.Has(meta.HotKey(c)); err != nil || has {
					return fmt.Errorf("the hot state of %s survived (%v)", c, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range append(slices.Clone(fs.kept), fs.bobs...) {
			if _, _, err := s.Memories.Get(c); err != nil {
				t.Fatalf("kept memory %s: %v", c, err)
			}
			links, err := s.Assoc.Associations(c)
			if err != nil {
				t.Fatal(err)
			}
			co, err := s.Assoc.CoAccess("agent", c)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range append(links, co...) {
				if l.Target == fs.doomed || l.Target == fs.merge || l.Target == fs.insight {
					t.Fatalf("kept memory %s still links to forgotten %s (%s)", c, l.Target, l.Type)
				}
			}
			if (c == fs.kept[0] || c == fs.kept[1]) && len(co) != 1 {
				t.Fatalf("kept memory %s's co-access partners %v, want the other kept one", c, co)
			}
		}
		// The chain keeps the CIDs; every ACT verifies; the walk finds
		// the forgotten memories forgotten, not corrupt.
		page, err := s.Sonas.Chain(fs.alice.Sona, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		forgotten := 0
		for _, e := range page.Items {
			if _, err := s.Block(e.Act); err != nil {
				t.Fatalf("ACT %d: %v", e.Seq, err)
			}
			if _, _, err := s.Memories.Get(e.Memory); errors.Is(err, base.ErrForgotten) {
				forgotten++
			} else if err != nil {
				t.Fatalf("ACT %d: memory %s: %v", e.Seq, e.Memory, err)
			}
		}
		if forgotten != 3 {
			t.Fatalf("the chain walk met %d forgotten memories, want 3", forgotten)
		}
		// Recall: as if never stored.
		for _, q := range []string{marker, "bank password hint", "remember what I said about the bank"} {
			for _, c := range recallCIDs(t, s, fs.alice.Sona, q) {
				if c == fs.doomed || c == fs.merge || c == fs.insight {
					t.Fatalf("recall %q returned forgotten %s", q, c)
				}
			}
		}
		if err := s.Text.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		hits, err := s.Text.Search(ctx, fs.alice.Sona, marker, textOptions())
		if err != nil || len(hits) != 0 {
			t.Fatalf("the full-text index still finds the marker: %v %v", hits, err)
		}
		// The tiers: no page names a forgotten memory.
		view, err := s.Tiers.View(fs.alice.Sona)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(fmt.Sprint(view)), marker) {
			t.Fatalf("the tiers still say the marker: %v", view)
		}
		// Storing it again is refused: the CID is forgotten for good.
		if _, err := fs.alice.TryAdd(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "my bank password hint is " + marker + " and the cat's name"}}}, nil); !errors.Is(err, base.ErrForgotten) {
			t.Fatalf("storing the forgotten memory again: %v, want base.ErrForgotten", err)
		}
	}
	check(s)
	if got := s.Index().Len(); got != vectors-3 {
		t.Fatalf("vector index holds %d, want %d", got, vectors-3)
	}
	if _, after := s.Counts(); after != before-3 {
		t.Fatalf("memories %d, want %d", after, before-3)
	}
	log, err := s.Recaller.QueryLog(10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		if slices.Contains(e.Keywords, marker) {
			t.Fatalf("the query log kept a recall that returned a forgotten memory: %v", e)
		}
	}

	// Forgetting it again is no work, and says so.
	again, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{CIDs: []cid.Cid{fs.doomed}}})
	if err != nil || again.Already != 1 || again.Memories != 0 {
		t.Fatalf("forgetting again: %+v, %v", again, err)
	}

	// After a purge, no file of the data directory holds the marker.
	if err := s.Text.Raw().Flush(); err != nil {
		t.Fatal(err)
	}
	held := grepDir(t, dir, marker)
	t.Logf("before the purge, the marker is in %v", held)
	// The store's files hold it, and the full-text index's log (which
	// recorded the documents' terms, the marker's among them, then their
	// deletion).
	for _, prefix := range []string{"store" + string(filepath.Separator), "text" + string(filepath.Separator)} {
		if !slices.ContainsFunc(held, func(f string) bool { return strings.HasPrefix(f, prefix) }) {
			t.Fatalf("before the purge, the files holding the marker are %v: %s's should be among them", held, prefix)
		}
	}
	if _, err := s.Forget.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if hits := grepDir(t, dir, marker); len(hits) > 0 {
		t.Fatalf("after the purge these files still hold the forgotten marker: %v", hits)
	}

	// After a restart: the same, still nowhere in the files.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = memorytest.Open(t, forgetConfig(dir), clock.NewFake(memorytest.Epoch))
	defer s.Close()
	fs.alice.S, fs.bob.S = s, s
	check(s)
	if hits := grepDir(t, dir, marker); len(hits) > 0 {
		t.Fatalf("after a restart these files hold the forgotten marker: %v", hits)
	}
}

func textOptions() text.SearchOptions { return text.SearchOptions{K: 10} }

// A sona, a label, an agent, a time range, and what derives from a CID.
func TestForgetSelectors(t *testing.T) {
	fs := newForgetScene(t, t.TempDir())
	s, ctx := fs.s, context.Background()
	defer s.Close()
	tagged := fs.bob.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "tagged note"}}}, &messages.MemoryMeta{AgentId: "scribe", Labels: map[string]string{"project": "x"}})
	other := fs.bob.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: "other project note"}}}, &messages.MemoryMeta{AgentId: "scribe", Labels: map[string]string{"project": "y"}})
	run := func(sel forget.Selector) map[cid.Cid]string {
		t.Helper()
		rep, err := s.Forget.Forget(ctx, forget.Request{Selector: sel, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		out := map[cid.Cid]string{}
		for _, tb := range rep.Tombstones {
			c, _ := cid.Decode(tb.Cid)
			out[c] = tb.Rule
		}
		return out
	}
	if got := run(forget.Selector{Label: "project=x"}); len(got) != 1 || got[tagged] == "" {
		t.Fatalf("label project=x: %v", got)
	}
	if got := run(forget.Selector{Label: "project"}); len(got) != 2 || got[other] == "" {
		t.Fatalf("label project: %v", got)
	}
	if got := run(forget.Selector{Agent: "scribe", Sona: fs.bob.Sona}); len(got) != 2 {
		t.Fatalf("agent scribe in bob: %v", got)
	}
	if got := run(forget.Selector{Sona: fs.bob.Sona}); len(got) != len(fs.bobs)+2 {
		t.Fatalf("sona bob: %v", got)
	}
	since, until := memorytest.Epoch.Unix(), memorytest.Epoch.Unix()+1
	if got := run(forget.Selector{Since: &since, Until: &until}); len(got) == 0 {
		t.Fatalf("time range: %v", got)
	}
	// derived_from: the doomed memory, what cites it, the merge and the
	// insight over the merge.
	got := run(forget.Selector{DerivedFrom: []cid.Cid{fs.doomed}})
	for c, rule := range map[cid.Cid]string{fs.doomed: forget.RuleCID, fs.cites: forget.RuleDerived, fs.merge: forget.RuleDerived, fs.insight: forget.RuleDerived} {
		if got[c] != rule {
			t.Fatalf("derived_from: %v, want %s as %s", got, c, rule)
		}
	}
	// A limited principal: another sona's memory is refused like one
	// stored nowhere.
	onlyBob := &forget.Limit{Sonas: []string{fs.bob.Sona}}
	for _, c := range []cid.Cid{fs.doomed, memorytest.MustCIDOf(t, model.CodecDagCBOR, []byte("stored nowhere"))} {
		_, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{CIDs: []cid.Cid{c}}, Limit: onlyBob})
		if !errors.Is(err, forget.ErrNotAllowed) {
			t.Fatalf("a limited principal naming %s: %v, want ErrNotAllowed", c, err)
		}
	}
	if _, err := s.Forget.Forget(ctx, forget.Request{}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("an empty request: %v", err)
	}
	if _, err := s.Forget.Forget(ctx, forget.Request{Selector: forget.Selector{Since: &until, Until: &since}}); !errors.Is(err, base.ErrInvalid) {
		t.Fatalf("until before since: %v", err)
	}
	// Nothing was forgotten by all this.
	if _, _, err := s.Memories.Get(fs.doomed); err != nil {
		t.Fatal(err)
	}
}

// A kill -9 in the middle of a forget leaves every batch whole or not at
// all: the memories forgotten are a prefix of the selection, a multiple
// of the batch, each gone from every key space with its tombstone, the
// others whole; running the forget again completes it.
func TestForgetKillNineLeavesWholeBatches(t *testing.T) {
	const n, batch = 1200, 100
	if os.Getenv(memorytest.ChildEnv) == t.Name() {
		dir := os.Getenv("MEMORIA_FAULT_DIR")
		s, err := memorytest.OpenWith(memory.Options{Config: forgetConfig(dir)})
		if err != nil {
			t.Fatal(err)
		}
		sona := os.Getenv("MEMORIA_FAULT_SONA")
		fmt.Println("START")
		_, err = s.Forget.Forget(context.Background(), forget.Request{Selector: forget.Selector{Sona: sona}, Batch: batch,
			Progress: func(done, _ int) { fmt.Printf("BATCH %d\n", done) }})
		if err != nil {
			t.Fatal(err)
		}
		memorytest.AwaitKill(t)
	}
	dir := t.TempDir()
	s := memorytest.Open(t, forgetConfig(dir), nil)
	o := memorytest.NewOwner(t, s, "doomed")
	keep := memorytest.NewOwner(t, s, "kept")
	var mems []cid.Cid
	for i := range n {
		mems = append(mems, o.Text(fmt.Sprintf("doomed memory %d about the %s", i, marker)))
	}
	kept := keep.Text("a kept memory about the weather")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	cmd, _, sc, stderr := memorytest.StartChild(t, t.Name(), "MEMORIA_FAULT_DIR="+dir, "MEMORIA_FAULT_SONA="+o.Sona)
	memorytest.ExpectLine(t, sc, "BATCH 300", map[string]bool{}, stderr) // the fourth batch is under way
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	s = memorytest.Open(t, forgetConfig(dir), nil)
	defer s.Close()
	gone := 0
	for i, c := range mems {
		_, _, err := s.Memories.Get(c)
		_, terr := s.Tombstone(c)
		_, verr := s.Memories.Vector(c)
		_, inIndex := s.Index().ID(c.KeyString())
		switch {
		case errors.Is(err, base.ErrForgotten) && terr == nil && verr != nil && !inIndex:
			if gone != i {
				t.Fatalf("memory %d is forgotten, but %d before it were not all", i, i)
			}
			gone++
		case err == nil && errors.Is(terr, base.ErrNotFound) && verr == nil && inIndex:
		default:
			t.Fatalf("memory %d is half forgotten: get %v, tombstone %v, vector %v, indexed %v", i, err, terr, verr, inIndex)
		}
	}
	t.Logf("the kill left %d of %d forgotten", gone, n)
	if gone%batch != 0 || gone < 300 {
		t.Fatalf("%d forgotten: not whole batches of %d after the third", gone, batch)
	}
	if _, _, err := s.Memories.Get(kept); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Forget.Forget(context.Background(), forget.Request{Selector: forget.Selector{Sona: o.Sona}})
	if err != nil || rep.Memories != n-gone {
		t.Fatalf("completing the forget: %+v %v, want %d more", rep, err, n-gone)
	}
	if _, mem := s.Counts(); mem != 1 {
		t.Fatalf("%d memories left, want the kept one", mem)
	}
	if hits := recallCIDs(t, s, o.Sona, marker); len(hits) != 0 {
		t.Fatalf("recall still finds %v", hits)
	}
}
