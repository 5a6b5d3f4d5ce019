package advance

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/testutil"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// TestAdvanceGolden drives the machine from testdata/advance: each case
// starts a step and feeds it results; the output is the effects it plans.
// Regenerate with `go test ./memory/advance -run TestAdvanceGolden -rewrite`.
func TestAdvanceGolden(t *testing.T) {
	testutil.Golden(t, "testdata", func(*testing.T) func(*testing.T, *datadriven.TestData) string {
		return (&golden{}).run
	})
}

// golden is the state of one test file: the machine, the memories it
// planned or was given, by name.
type golden struct {
	m       *Machine
	state   State
	names   map[cid.Cid]string
	pending *model.Prepared // the last Append's item
	maxSize int             // Prepare refuses larger blocks (0: no bound)
}

func (g *golden) run(t *testing.T, d *datadriven.TestData) (out string) {
	defer func() {
		// A result the machine does not expect is a panic: show it.
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v\n", r)
		}
	}()
	switch d.Cmd {
	case "new":
		req := &messages.ChatRequest{Content: arg(d, "content", "hello")}
		req.Name, req.AgentId, req.RequestId, req.Scope = arg(d, "name", ""), arg(d, "agent", ""), arg(d, "request", ""), arg(d, "scope", "")
		req.K, req.BudgetChars = int32(num(t, d, "k", 0)), int32(num(t, d, "budget", 0))
		if d.HasArg("expand") {
			req.Expand = proto.Int32(int32(num(t, d, "expand", 0)))
		}
		g.names, g.pending, g.maxSize = map[cid.Cid]string{}, nil, int(num(t, d, "max", 0))
		g.state = State{Name: "Mira"}
		g.m = New("sona-1", req, g.prepare)
		return ""
	case "start":
		g.at(t, d)
		return g.show(g.m.Start(g.state))
	case "fail":
		return g.show(g.m.Fail(errOf(arg(d, "err", "timeout"))))
	}
	g.at(t, d)
	var r Result
	err := errOf(arg(d, "err", ""))
	switch d.Cmd {
	case "replayed":
		res := Replayed{Err: err}
		switch {
		case d.HasArg("answer"):
			b, merr := proto.Marshal(&messages.ChatResponse{
				Input:    &messages.MemoryRef{Cid: g.cid("earlier-input").String()},
				Response: &messages.Reply{Cid: g.cid("earlier-response").String(), Content: arg(d, "answer", "")},
			})
			if merr != nil {
				t.Fatal(merr)
			}
			res.Result = &messages.Appended{Cid: g.cid("earlier-response").String(), Replayed: true, Result: b}
		case d.HasArg("insert"):
			res.Result = &messages.Appended{Cid: g.cid("an-insert").String(), Replayed: true}
		case d.HasArg("garbage"):
			res.Result = &messages.Appended{Cid: g.cid("earlier-response").String(), Replayed: true, Result: []byte{0xff, 0xff}}
		}
		r = res
	case "embedded":
		v := float32(num(t, d, "v", 1))
		r = Embedded{Vector: []float32{v, 0, 0}, Err: err}
	case "appended":
		res := Appended{Err: err}
		if err == nil {
			c := g.pending.CID
			if d.HasArg("replayed") {
				c = g.cid(arg(d, "replayed", "earlier-input"))
			}
			res.Result = &messages.Appended{Cid: c.String(), Seq: proto.Int64(int64(num(t, d, "seq", 0))), Replayed: d.HasArg("replayed")}
			if d.HasArg("replayed") && g.pending.Request != nil && len(g.pending.Request.Result) > 0 {
				// An earlier attempt of the step recorded its answer: this
				// one's, as a retry plans the same response.
				res.Result.Result = g.pending.Request.Result
			}
		}
		r = res
	case "loaded":
		res := Loaded{Err: err}
		if err == nil {
			c := g.cid(arg(d, "cid", "earlier-input"))
			res.Item = &model.Prepared{CID: c, Vector: []float32{float32(num(t, d, "v", 7)), 0, 0}}
		}
		r = res
	case "recalled":
		res := Recalled{Err: err}
		for _, f := range strings.Fields(arg(d, "mems", "")) {
			for _, m := range strings.Split(f, ",") {
				name, score, _ := strings.Cut(m, ":")
				s, perr := strconv.ParseFloat(score, 64)
				if perr != nil {
					d.Fatalf(t, "mems: %v", perr)
				}
				res.Recalled = append(res.Recalled, &recall.Recalled{CID: g.cid(name), Score: s})
			}
		}
		res.Trace = make(recall.Trace, int(num(t, d, "trace", 0)))
		r = res
	case "tiers":
		res := TiersRecalled{Err: err}
		if err == nil {
			res.Tiers = &tiers.Recall{}
			for _, s := range strings.Split(arg(d, "segments", ""), ",") {
				if s != "" {
					res.Tiers.Segments = append(res.Tiers.Segments, uint64(mustNum(t, d, s)))
				}
			}
		}
		r = res
	case "completed":
		r = Completed{Err: err, Response: llm.Response{Content: arg(d, "content", "hi there"), Model: arg(d, "model", ""),
			StopReason: llm.StopReason(arg(d, "stop", ""))}}
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	return g.show(g.m.Next(r, g.state))
}

// at sets what the owner reports with the next result: last=, now=,
// sona=.
func (g *golden) at(t *testing.T, d *datadriven.TestData) {
	if d.HasArg("last") {
		c := g.cid(arg(d, "last", ""))
		g.state.Last = &c
	}
	if d.HasArg("now") {
		g.state.Now = int64(num(t, d, "now", 0))
	}
	if d.HasArg("sona") {
		g.state.Name = arg(d, "sona", "")
	}
}

// prepare is chain.Writer.Prepare without the store's checks of the
// embedding and the kind (the writer's own tests check those).
func (g *golden) prepare(m *model.Memory, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error) {
	c, block, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if g.maxSize > 0 && len(block) > g.maxSize {
		return nil, fmt.Errorf("%w: memory of %d bytes exceeds %d", base.ErrTooLarge, len(block), g.maxSize)
	}
	return &model.Prepared{Memory: m, CID: c, Block: block, Vector: vec, Meta: meta}, nil
}

// cid is the CID of a named memory given to the machine.
func (g *golden) cid(name string) cid.Cid {
	c, err := model.SumCID(model.CodecRaw, []byte(name))
	if err != nil {
		panic(err)
	}
	g.names[c] = name
	return c
}

func (g *golden) name(c cid.Cid) string {
	if n, ok := g.names[c]; ok {
		return n
	}
	return "unnamed " + c.String()
}

func (g *golden) nameOf(s string) string {
	c, err := cid.Decode(s)
	if err != nil {
		return "bad cid " + s
	}
	return g.name(c)
}

// show prints effects one a line.
func (g *golden) show(effects []Effect) string {
	var b strings.Builder
	for _, e := range effects {
		switch e := e.(type) {
		case Replay:
			fmt.Fprintf(&b, "replay %s\n", e.ID)
		case Embed:
			fmt.Fprintf(&b, "embed %q\n", e.Text)
		case Append:
			g.pending = e.Item
			early := ""
			if e.Early {
				early = " (early)"
			}
			fmt.Fprintf(&b, "append%s %s\n", early, g.item(e.Item))
		case Load:
			fmt.Fprintf(&b, "load %s\n", g.nameOf(e.CID))
		case Recall:
			q := e.Query
			fmt.Fprintf(&b, "recall sona=%s text=%q vector=%v agent=%q k=%d budget=%d expand=%s scope=%q exclude=%s\n",
				q.Sona, q.Text, q.Vector, q.AgentID, q.K, q.Budget, intp(q.Expand), q.Scope, g.list(q.Exclude))
		case Submit:
			fmt.Fprintf(&b, "submit %d trace writes\n", len(e.Trace))
		case RecallTiers:
			fmt.Fprintf(&b, "recall tiers text=%q vector=%v\n", e.Text, e.Vector)
		case Complete:
			fmt.Fprintf(&b, "complete as %q: input %q by %q; recalled %s; tier segments %v\n",
				e.Name, e.Request.Content, e.Request.Name, g.scored(e.Recalled), e.Tiers.Segments)
		case Reinforce:
			var parts []string
			for _, u := range e.Used {
				parts = append(parts, fmt.Sprintf("%s(%g)", g.name(u.CID), u.Score))
			}
			fmt.Fprintf(&b, "reinforce [%s]\n", strings.Join(parts, " "))
		case Wake:
			fmt.Fprintf(&b, "wake %s\n", e.Tier)
		case Visit:
			fmt.Fprintf(&b, "visit segments %v at %d\n", e.Segments, e.At)
		case Reply:
			if e.Err != nil {
				// protobuf's error texts put a no-break space in place of a
				// space in some builds (on purpose: they are not to be
				// matched); the golden text has the space.
				fmt.Fprintf(&b, "reply error: %s\n", strings.ReplaceAll(e.Err.Error(), "\u00a0", " "))
				continue
			}
			a := e.Answer
			var rec []string
			for _, r := range a.Recalled {
				rec = append(rec, fmt.Sprintf("%s(%g)", g.nameOf(r.Cid), r.Score))
			}
			fmt.Fprintf(&b, "reply input=%s response=%s content=%q model=%q stop=%q recalled=[%s]\n",
				g.nameOf(a.Input.Cid), g.nameOf(a.Response.Cid), a.Response.Content, a.Response.Model, a.Response.StopReason, strings.Join(rec, " "))
		default:
			fmt.Fprintf(&b, "unknown effect %T\n", e)
		}
	}
	if g.m.Done() {
		b.WriteString("(done)\n")
	}
	return b.String()
}

// item describes a planned append and names its memory: the response is
// the one that closes a page, the input the other.
func (g *golden) item(p *model.Prepared) string {
	name := "input"
	if p.PageOf != nil {
		name = "response"
	}
	g.names[p.CID] = name
	m := p.Memory
	var what string
	switch d := m.Data; {
	case d.Text != nil:
		what = fmt.Sprintf("text %q", d.Text.Content)
	case d.Other != nil:
		what = fmt.Sprintf("%q says %q", *d.Other.Name, d.Other.Content)
	case d.Self != nil:
		what = fmt.Sprintf("self %q says %q", d.Self.Name, d.Self.Parts[0].Content)
		if pm := d.Self.Parts[0].Model; pm != nil {
			what += " model=" + *pm
		}
		if d.Self.StopReason != nil {
			what += " stop=" + *d.Self.StopReason
		}
	}
	var edges []string
	for _, e := range m.Edges {
		edges = append(edges, fmt.Sprintf("%s(%g)", g.name(e.Target), e.Weight))
	}
	s := fmt.Sprintf("%s: %s at %d edges=[%s] type=%s agent=%q vector=%v", name, what, *m.Timestamp, strings.Join(edges, " "), p.EdgeType, p.Meta.AgentId, p.Vector)
	if p.PageOf != nil {
		s += " page-of=" + g.name(*p.PageOf)
	}
	if p.Request != nil {
		s += " request=" + p.Request.ID
		if len(p.Request.Result) > 0 {
			var rec messages.ChatResponse
			if err := proto.Unmarshal(p.Request.Result, &rec); err != nil {
				s += " (undecodable answer)"
			} else {
				s += fmt.Sprintf(" (records the answer %q)", rec.Response.Content)
			}
		}
	}
	return s
}

func (g *golden) list(cs []cid.Cid) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, g.name(c))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (g *golden) scored(rs []*recall.Recalled) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, fmt.Sprintf("%s(%g)", g.name(r.CID), r.Score))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func intp(p *int) string {
	if p == nil {
		return "default"
	}
	return strconv.Itoa(*p)
}

// errOf is an error of the named class ("" is none).
func errOf(class string) error {
	switch class {
	case "":
		return nil
	case "invalid":
		return fmt.Errorf("%w: bad", base.ErrInvalid)
	case "conflict":
		return fmt.Errorf("%w: the chain moved", base.ErrChainConflict)
	case "model":
		return errors.New("model: overloaded")
	case "timeout":
		return errors.New("timeout")
	}
	return errors.New(class)
}

func arg(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return ""
			}
			return strings.Join(a.Vals, ",")
		}
	}
	return def
}

func num(t *testing.T, d *datadriven.TestData, key string, def float64) float64 {
	if !d.HasArg(key) {
		return def
	}
	return mustNum(t, d, arg(d, key, ""))
}

func mustNum(t *testing.T, d *datadriven.TestData, s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		d.Fatalf(t, "%q: %v", s, err)
	}
	return v
}
