package index_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/chain/chaintest"
	"github.com/memoria-ai/memoria/memory/index"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/text"
)

func newText(c *chaintest.Chains, dir string) *index.Text {
	cfg := config.Default()
	return index.New(c.Store, c.Memories, c.Sonas, index.Options{Dir: dir, K1: cfg.Recall.BM25K1, B: cfg.Recall.BM25B,
		Backlog: cfg.Index.TextBacklog, Logger: slog.New(slog.DiscardHandler), Clock: c.Clock})
}

func open(t *testing.T, x *index.Text) {
	t.Helper()
	x.Open()
}

func closeText(t *testing.T, x *index.Text) {
	t.Helper()
	x.Stop()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
}

// ids searches sona's memories (and only those) for q.
func ids(t *testing.T, x *index.Text, sona, q string) []string {
	t.Helper()
	hits, err := x.Search(context.Background(), sona, q, text.SearchOptions{K: 50, Sonas: []string{sona}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, h := range hits {
		out = append(out, h.ID)
	}
	return out
}

// A search in a sona right after an append is acknowledged finds it —
// new memories and memories that joined the sona — without settling.
func TestSearchReadsItsOwnWrites(t *testing.T) {
	c := chaintest.Open(t, chain.Options{})
	x := newText(c, t.TempDir())
	open(t, x)
	defer closeText(t, x)
	a, b := c.Owner("a"), c.Owner("b")
	for i := range 40 {
		word := fmt.Sprintf("quokka%d", i)
		m := a.Text("a note about the " + word)
		if got := ids(t, x, a.Sona, word); !slices.Equal(got, []string{m.String()}) {
			t.Fatalf("append %d: found %v, want %s", i, got, m)
		}
		if got := ids(t, x, b.Sona, word); len(got) != 0 {
			t.Fatalf("append %d: b finds a's memory: %v", i, got)
		}
		if i%10 == 0 {
			b.Text("a note about the " + word) // joins b
			if got := ids(t, x, b.Sona, word); !slices.Equal(got, []string{m.String()}) {
				t.Fatalf("join %d: b found %v, want %s", i, got, m)
			}
		}
	}
	if err := x.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := x.Len(); err != nil || n != 40 {
		t.Fatalf("%d documents, %v", n, err)
	}
}

// What the store holds but the index does not — commits before Open,
// after Close, joins after the watermark — is caught up at Open; what it
// applied is not applied again.
func TestOpenCatchesUpWithTheStore(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "store"), store.OptionsOf(cfg.Store))
	if err != nil {
		t.Fatal(err)
	}
	c := chaintest.New(t, st, chain.Options{})
	x := newText(c, filepath.Join(dir, "text"))
	a, b := c.Owner("a"), c.Owner("b")
	before := a.Text("written before the index opened: walrus")
	open(t, x)
	during := a.Text("written while it followed: narwhal")
	if err := x.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, x, a.Sona, "walrus narwhal"); len(got) != 2 {
		t.Fatalf("before and during: %v", got)
	}
	closeText(t, x)
	after := a.Text("written after it closed: dugong")
	b.Text("written while it followed: narwhal") // joins b after the close

	// The store and the index reopened.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = store.Open(filepath.Join(dir, "store"), store.OptionsOf(cfg.Store)); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c = chaintest.New(t, st, chain.Options{})
	x = newText(c, filepath.Join(dir, "text"))
	open(t, x)
	defer closeText(t, x)
	for q, want := range map[string][]cid.Cid{"walrus": {before}, "narwhal": {during}, "dugong": {after}} {
		if got := ids(t, x, a.Sona, q); !slices.Equal(got, []string{want[0].String()}) {
			t.Fatalf("%s in a: %v, want %s", q, got, want[0])
		}
	}
	if got := ids(t, x, b.Sona, "narwhal"); !slices.Equal(got, []string{during.String()}) {
		t.Fatalf("the join after the close: b finds %v", got)
	}
	if n, err := x.Len(); err != nil || n != 3 {
		t.Fatalf("%d documents, %v", n, err)
	}
	if x.Rebuilds() != 0 || x.Broken() != nil {
		t.Fatalf("rebuilt %d times, broken: %v", x.Rebuilds(), x.Broken())
	}
}

// The index loads in the background (Open returns at once): a search
// waits for the load, and what is committed while the index loads — new
// memories, joins — is searchable once it is loaded, as is
// everything the load caught up. Held here in the middle of the catch-up
// of the insertion log (its progress report).
func TestCommitsWhileLoadingAreIndexed(t *testing.T) {
	cfg := config.Default()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "store"), store.OptionsOf(cfg.Store))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := chaintest.New(t, st, chain.Options{})
	a, b := c.Owner("a"), c.Owner("b")
	var before []cid.Cid
	for i := range 600 { // more than a catch-up batch (512)
		before = append(before, a.Text(fmt.Sprintf("note %d before the open: walrus%d", i, i)))
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once bool
	x := index.New(c.Store, c.Memories, c.Sonas, index.Options{Dir: filepath.Join(dir, "text"), K1: cfg.Recall.BM25K1,
		B: cfg.Recall.BM25B, Backlog: cfg.Index.TextBacklog, Logger: slog.New(slog.DiscardHandler), Clock: c.Clock,
		Progress: func(stage string, done, total uint64) {
			if !once && done < total { // the first batch of the catch-up
				once = true
				close(held)
				<-release
			}
		}})
	x.Open()
	defer closeText(t, x)
	<-held
	if !x.Loading() {
		t.Fatal("not loading while the catch-up is held")
	}
	during := a.Text("written while the index loads: narwhal")
	b.Text("note 5 before the open: walrus5") // joins b
	searched := make(chan []string)
	go func() {
		hits, err := x.Search(context.Background(), a.Sona, "narwhal", text.SearchOptions{K: 5, Sonas: []string{a.Sona}})
		if err != nil {
			t.Error(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.ID)
		}
		searched <- out
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := x.Search(ctx, a.Sona, "narwhal", text.SearchOptions{K: 5}); err == nil {
		t.Fatal("a search answered while the index loads")
	}
	close(release)
	if got := <-searched; !slices.Equal(got, []string{during.String()}) {
		t.Fatalf("the memory written while loading: found %v, want %s", got, during)
	}
	if x.Loading() {
		t.Fatal("still loading after a search answered")
	}
	if got := ids(t, x, a.Sona, "walrus599"); !slices.Equal(got, []string{before[599].String()}) {
		t.Fatalf("the last memory before the open: %v", got)
	}
	if got := ids(t, x, b.Sona, "walrus5"); !slices.Equal(got, []string{before[5].String()}) {
		t.Fatalf("the join while loading: b finds %v", got)
	}
	if err := x.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := x.Len(); err != nil || n != 601 {
		t.Fatalf("%d documents, %v; want 601", n, err)
	}
}
