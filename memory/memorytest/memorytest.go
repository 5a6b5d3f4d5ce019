// Package memorytest builds real selves (memory.Open over Badger in a
// test's temporary directory) for the tests of memory's packages that
// need the whole composition — an append through every subsystem's
// contribution, a recall over the real indexes, a reopen — and plays a
// sona's owner on them. It also runs a test binary again as a child
// process, for the tests that kill one (kill -9, a full disk).
//
// A package's own tests build what they can with its parts alone
// (chaintest, store's in-memory backend); memorytest is for what needs
// the composition root. It is imported by tests only.
package memorytest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/chain/chaintest"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// Epoch is the tests' fake clock's usual start.
var Epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// Config is the default configuration with its data in dir.
func Config(dir string) config.Config {
	cfg := config.Default()
	cfg.DataDir = dir
	return cfg
}

// Open opens the self of cfg with the hashed embedder and clock.
func Open(t testing.TB, cfg config.Config, clock clock.Clock) *memory.Self {
	t.Helper()
	s, err := memory.Open(context.Background(), memory.Options{Config: cfg, Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// OpenWith opens a self with o, the hashed embedder and a fake clock at
// Epoch unless o names others.
func OpenWith(o memory.Options) (*memory.Self, error) {
	if o.Embedder == nil {
		o.Embedder = llm.NewHashedEmbedder(llm.DefaultDims)
	}
	if o.Clock == nil {
		o.Clock = clock.NewFake(Epoch)
	}
	return memory.Open(context.Background(), o)
}

// OpenLogged opens the self in dir with the hashed embedder, its log
// in the buffer returned.
func OpenLogged(t testing.TB, dir string) (*memory.Self, *LogBuffer) {
	t.Helper()
	logs := &LogBuffer{}
	s, err := memory.Open(context.Background(), memory.Options{Config: Config(dir), Embedder: llm.NewHashedEmbedder(llm.DefaultDims), Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// Owner plays a sona's actor: it appends memories one after the other.
type Owner struct {
	T    testing.TB
	S    *memory.Self
	Sona string
	// Head and N are the chain's head and length as the owner appended
	// them.
	Head *cid.Cid
	N    int64
}

// NewOwner creates a sona called name and returns its owner.
func NewOwner(t testing.TB, s *memory.Self, name string) *Owner {
	t.Helper()
	rec, err := s.Sonas.Create(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return &Owner{T: t, S: s, Sona: rec.Uuid}
}

// Add appends m with meta (nil: none) and fails the test on an error.
func (o *Owner) Add(m *model.Memory, meta *messages.MemoryMeta) cid.Cid {
	o.T.Helper()
	c, err := o.TryAdd(m, meta)
	if err != nil {
		o.T.Fatal(err)
	}
	return c
}

// TryAdd appends m with meta (nil: none).
func (o *Owner) TryAdd(m *model.Memory, meta *messages.MemoryMeta) (cid.Cid, error) {
	return chaintest.Append(o.S.Store(), o.S.Chains, o.S.Embed, o.S.Clock().Now().Unix(), o.Sona, &o.Head, &o.N, m, meta)
}

// Text appends a text memory with edges.
func (o *Owner) Text(content string, edges ...model.Edge) cid.Cid {
	model.SortEdges(edges)
	return o.Add(&model.Memory{Data: model.Data{Text: &model.TextData{Content: content}}, Edges: edges}, nil)
}

// AddPrepared appends a prepared memory (with its neighbours, as the
// insert path prepared it).
func (o *Owner) AddPrepared(p *model.Prepared) {
	o.T.Helper()
	plan, err := model.PlanAppend(o.Sona, o.Head, o.N, p, o.S.Clock().Now().Unix())
	if err != nil {
		o.T.Fatal(err)
	}
	if err := o.S.Store().Update(context.Background(), o.S.Chains.Op(plan)); err != nil {
		o.T.Fatal(err)
	}
	o.Head, o.N = plan.Next()
}

// Say is a turn of a named speaker, timestamped now (not stored).
func (o *Owner) Say(name, text string) *model.Memory {
	ts := o.S.Clock().Now().Unix()
	return &model.Memory{Data: model.Data{Other: &model.OtherData{Name: &name, Content: text}}, Timestamp: &ts}
}

// Page stores two turns and hands them to the STM as a page.
func (o *Owner) Page(q, r string) {
	o.T.Helper()
	qc := o.Add(o.Say("Caroline", q), nil)
	rc := o.Add(o.Say("Melanie", r), nil)
	if err := o.S.Tiers.PushPage(context.Background(), o.Sona, qc, rc); err != nil {
		o.T.Fatal(err)
	}
}

// Conversation fills o's sona with n memories drawn from a small
// vocabulary (seeded), each linked to the one before, timestamped a minute
// apart from Epoch.
func (o *Owner) Conversation(clock *clock.Fake, n int, seed int64) []cid.Cid {
	o.T.Helper()
	rng := rand.New(rand.NewSource(seed))
	words := strings.Fields("garden tomato basil aphid compost lettuce slug river train lisbon porto novel lighthouse diary queue latency migration sister painting sunset")
	var out []cid.Cid
	for i := 0; i < n; i++ {
		clock.Set(Epoch.Add(time.Duration(len(out)) * time.Minute))
		var b strings.Builder
		for j := 0; j < 4+rng.Intn(12); j++ {
			b.WriteString(words[rng.Intn(len(words))] + " ")
		}
		ts := clock.Now().Unix()
		m := &model.Memory{Data: model.Data{Text: &model.TextData{Content: fmt.Sprintf("%s(%d)", b.String(), i)}}, Timestamp: &ts}
		if len(out) > 0 {
			m.Edges = []model.Edge{{Target: out[len(out)-1], Weight: 1}}
		}
		out = append(out, o.Add(m, nil))
	}
	return out
}

// Recall recalls and submits the recall's trace, as the server does.
func Recall(s *memory.Self, ctx context.Context, q recall.Query) ([]*recall.Recalled, error) {
	rs, tr, err := s.Recaller.Recall(ctx, q)
	tr.Submit(s.Store())
	return rs, err
}

// Describe is a line per recalled memory: CID, path, score and text.
func Describe(rs []*recall.Recalled) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %.3f %q", r.CID, r.Via, r.Score, r.Memory.Text()))
	}
	return out
}

// Settle runs the sona's tier work to the end with the heuristic model.
func Settle(t *testing.T, s *memory.Self, sona string) []tiers.Event {
	t.Helper()
	events, err := s.Tiers.Settle(context.Background(), sona, tiers.Heuristic{})
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// MustCIDOf is the CID of b under codec.
func MustCIDOf(t testing.TB, codec uint64, b []byte) cid.Cid {
	t.Helper()
	c, err := model.SumCID(codec, b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// LogBuffer collects a Self's log lines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logger logs into l, every level.
func (l *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// ChildEnv, when set, makes a test the child that StartChild starts.
const ChildEnv = "MEMORIA_FAULT_CHILD"

// StartChild runs this test binary again, for test, as its child: it
// talks over the child's stdin and stdout, a line at a time.
func StartChild(t *testing.T, test string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), append(env, ChildEnv+"="+test)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return cmd, stdin, sc, stderr
}

// ExpectLine reads the child's lines until one starts with prefix,
// collecting the lines "ACK <cid>" before it into acked.
func ExpectLine(t *testing.T, sc *bufio.Scanner, prefix string, acked map[string]bool, stderr *bytes.Buffer) string {
	t.Helper()
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "ACK "); ok {
			acked[c] = true
			continue
		}
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("the child ended before %q (%v); its stderr:\n%s", prefix, sc.Err(), Tail(stderr.String(), 4000))
	return ""
}

// KillAtDone runs test's child with env, collects the CIDs it
// acknowledges ("ACK <cid>") until it says DONE, then kills it with
// SIGKILL and waits for it.
func KillAtDone(t *testing.T, test string, env ...string) map[string]bool {
	t.Helper()
	cmd, _, sc, stderr := StartChild(t, test, env...)
	acked := map[string]bool{}
	ExpectLine(t, sc, "DONE", acked, stderr)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	return acked
}

// AwaitKill is a child's end: it says DONE and waits to be killed
// (KillAtDone), failing if its parent closes its stdin instead.
func AwaitKill(t *testing.T) {
	fmt.Println("DONE")
	io.Copy(io.Discard, os.Stdin) // until killed
	t.Fatal("not killed")
}

// ChildN is the count a parent gave its child (MEMORIA_FAULT_N).
func ChildN() int {
	var n int
	fmt.Sscan(os.Getenv("MEMORIA_FAULT_N"), &n)
	return n
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// MustLog fails t unless the log says each of want.
func MustLog(t testing.TB, logs *LogBuffer, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(logs.String(), w) {
			t.Fatalf("the log does not say %q:\n%s", w, logs.String())
		}
	}
}
