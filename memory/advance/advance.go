package advance

import (
	"fmt"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/assoc"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/prompt"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// InputRequest is appended to a step's request id to name the request
// of its input: a step records its input under id+InputRequest and its
// response, with the whole answer, under id.
const InputRequest = "/input"

// Prepare makes a memory ready to append (chain.Writer.Prepare): it
// encodes it and checks the embedding and the kind. It computes; it
// writes nothing.
type Prepare func(m *model.Memory, vec []float32, meta *messages.MemoryMeta) (*model.Prepared, error)

// State is the sona as its owner sees it when the machine starts or a
// result arrives.
type State struct {
	Last *cid.Cid // the sona's last memory: a new input links to it
	Name string   // the sona's name: it speaks the response
	Now  int64    // unix seconds
}

// Effect is something the machine asks its owner to do.
type Effect interface{ effect() }

// The effects. Those marked "result" are answered with the named Result
// through Next; the others are done and forgotten.
type (
	// Replay asks whether an earlier attempt of the step recorded request
	// ID: take the chain's writer, then look the request up in the chain
	// (result: Replayed).
	Replay struct{ ID string }
	// Embed embeds Text (result: Embedded). It may run off the owner's
	// mailbox, as may Recall, RecallTiers and Complete.
	Embed struct{ Text string }
	// Append appends Item to the sona's chain; the result comes once it
	// is durable or failed (result: Appended) — or, when Early, once it
	// is planned and submitted: the owner then holds the step's Reply
	// until it is durable, and replies its failure instead when it failed.
	// The input is appended early, so that its commit overlaps recall and
	// the model call; the response, whose append rests on it (its chain's
	// next seq, an edge to it), fails when the input's did.
	Append struct {
		Item  *model.Prepared
		Early bool
	}
	// Load reads a stored memory to go on from (result: Loaded).
	Load struct{ CID string }
	// Recall recalls for the input (result: Recalled).
	Recall struct{ Query recall.Query }
	// Submit queues a recall's trace writes.
	Submit struct{ Trace recall.Trace }
	// RecallTiers reads the sona's tiers for the input (result:
	// TiersRecalled).
	RecallTiers struct {
		Text   string
		Vector []float32
	}
	// Complete asks the model for the response (result: Completed).
	Complete struct {
		Name     string // the sona's
		Recalled []*recall.Recalled
		Tiers    *tiers.Recall
		Request  *messages.ChatRequest
	}
	// Reinforce bumps the importance of what the response used.
	Reinforce struct{ Used []meta.Used }
	// Wake tells a tier its inbox has work.
	Wake struct{ Tier string }
	// Visit tells the MTM that retrieval used these segments at At.
	Visit struct {
		Segments []uint64
		At       int64
	}
	// Reply ends the step: Answer, or Err when it failed.
	Reply struct {
		Answer *messages.ChatResponse
		Err    error
	}
)

func (Replay) effect()      {}
func (Embed) effect()       {}
func (Append) effect()      {}
func (Load) effect()        {}
func (Recall) effect()      {}
func (Submit) effect()      {}
func (RecallTiers) effect() {}
func (Complete) effect()    {}
func (Reinforce) effect()   {}
func (Wake) effect()        {}
func (Visit) effect()       {}
func (Reply) effect()       {}

// Result is what an effect came to, fed back with Next.
type Result interface{ result() }

// The results.
type (
	// Replayed: Result is the append that recorded the request, nil when
	// none did.
	Replayed struct {
		Result *messages.Appended
		Err    error
	}
	Embedded struct {
		Vector []float32
		Err    error
	}
	Appended struct {
		Result *messages.Appended
		Err    error
	}
	Loaded struct {
		Item *model.Prepared
		Err  error
	}
	Recalled struct {
		Recalled []*recall.Recalled
		Trace    recall.Trace
		Err      error
	}
	TiersRecalled struct {
		Tiers *tiers.Recall
		Err   error
	}
	Completed struct {
		Response llm.Response
		Err      error
	}
)

func (Replayed) result()      {}
func (Embedded) result()      {}
func (Appended) result()      {}
func (Loaded) result()        {}
func (Recalled) result()      {}
func (TiersRecalled) result() {}
func (Completed) result()     {}

type phase int

const (
	starting phase = iota
	replaying
	embeddingInput
	appendingInput
	loadingInput
	recalling
	recallingTiers
	completing
	embeddingResponse
	appendingResponse
	done
)

var phaseNames = [...]string{"starting", "replaying", "embedding the input", "appending the input", "loading the input",
	"recalling", "recalling the tiers", "completing", "embedding the response", "appending the response", "done"}

// Machine is one advance of one sona. It is not safe for concurrent use:
// its owner feeds it one result at a time.
type Machine struct {
	sona    string
	req     *messages.ChatRequest
	prepare Prepare

	phase    phase
	received int64 // when the step started
	name     string
	input    *model.Prepared
	recalled []*recall.Recalled
	tiers    *tiers.Recall
	resp     llm.Response
	answer   *messages.ChatResponse
}

// New is the advance of sona for req, not started.
func New(sona string, req *messages.ChatRequest, prepare Prepare) *Machine {
	return &Machine{sona: sona, req: req, prepare: prepare}
}

// Done reports whether the machine replied.
func (m *Machine) Done() bool { return m.phase == done }

// Start plans the step's first effects. Whatever the step is given is
// checked before its input is stored; a step sent again (a request id)
// is answered from the chain when its response is there.
func (m *Machine) Start(s State) []Effect {
	if m.phase != starting {
		panic("advance: Start on a started machine")
	}
	req := m.req
	m.received = s.Now
	if err := prompt.ValidateStep(req.Name, req.AgentId, req.Scope); err != nil {
		return m.fail(err)
	}
	if id := req.RequestId; id != "" {
		if err := chain.ValidateRequestID(id); err != nil {
			return m.fail(err)
		}
		m.phase = replaying
		return []Effect{Replay{ID: id}}
	}
	return m.embedInput()
}

// Next feeds the result of the last effect planned and plans what
// follows. A result of the wrong kind for the phase is a programming
// error: Next panics.
func (m *Machine) Next(r Result, s State) []Effect {
	switch r := r.(type) {
	case Replayed:
		m.expect(replaying, r)
		if r.Err != nil || r.Result != nil {
			return m.reply(replayed(r.Result, r.Err))
		}
		return m.embedInput()
	case Embedded:
		if m.phase == embeddingResponse {
			return m.appendResponse(r, s)
		}
		m.expect(embeddingInput, r)
		return m.appendInput(r, s)
	case Appended:
		if m.phase == appendingResponse {
			return m.responded(r, s)
		}
		m.expect(appendingInput, r)
		if r.Err != nil {
			return m.fail(r.Err)
		}
		m.name = s.Name
		if r.Result.Replayed {
			// An earlier attempt stored the input (and then failed, or is
			// still on its way): the step goes on from that input.
			m.phase = loadingInput
			return []Effect{Load{CID: r.Result.Cid}}
		}
		return m.recall()
	case Loaded:
		m.expect(loadingInput, r)
		if r.Err != nil {
			return m.fail(r.Err)
		}
		m.input = r.Item
		return m.recall()
	case Recalled:
		m.expect(recalling, r)
		if r.Err != nil {
			return m.fail(r.Err)
		}
		m.recalled = r.Recalled
		m.phase = recallingTiers
		return []Effect{Submit{Trace: r.Trace}, RecallTiers{Text: m.req.Content, Vector: m.input.Vector}}
	case TiersRecalled:
		m.expect(recallingTiers, r)
		if r.Err != nil {
			return m.fail(r.Err)
		}
		m.tiers = r.Tiers
		m.phase = completing
		return []Effect{Complete{Name: m.name, Recalled: m.recalled, Tiers: m.tiers, Request: m.req}}
	case Completed:
		m.expect(completing, r)
		if r.Err != nil {
			return m.fail(r.Err)
		}
		m.resp = r.Response
		m.phase = embeddingResponse
		return []Effect{Embed{Text: r.Response.Content}}
	}
	panic(fmt.Sprintf("advance: unknown result %T", r))
}

func (m *Machine) expect(p phase, r Result) {
	if m.phase != p {
		panic(fmt.Sprintf("advance: %T while %s", r, phaseNames[m.phase]))
	}
}

func (m *Machine) embedInput() []Effect {
	m.phase = embeddingInput
	return []Effect{Embed{Text: m.req.Content}}
}

// appendInput stores the input, linked to the previous step.
func (m *Machine) appendInput(r Embedded, s State) []Effect {
	if r.Err != nil {
		return m.fail(r.Err)
	}
	var edges []model.Edge
	if s.Last != nil {
		edges = []model.Edge{{Target: *s.Last, Weight: 1}}
	}
	input, err := m.prepare(prompt.TextMemory(m.req.Content, m.req.Name, m.received, edges), r.Vector, &messages.MemoryMeta{AgentId: m.req.AgentId})
	if err != nil {
		return m.fail(err)
	}
	input.EdgeType = assoc.Sequential
	if m.req.RequestId != "" {
		input.Request = &model.Request{ID: m.req.RequestId + InputRequest}
	}
	m.input = input
	m.phase = appendingInput
	return []Effect{Append{Item: input, Early: true}}
}

func (m *Machine) recall() []Effect {
	req := m.req
	m.phase = recalling
	return []Effect{Recall{Query: recall.Query{
		Sona: m.sona, Text: req.Content, Vector: m.input.Vector, AgentID: req.AgentId,
		K: int(req.K), Budget: int(req.BudgetChars), Expand: ExpandOf(req), Exclude: []cid.Cid{m.input.CID}, Scope: req.Scope,
	}}}
}

// appendResponse stores the response with edges to the recalled memories
// weighted by score and to the input. The response makes the dialogue
// page (input, response), which goes to the STM's inbox in the
// response's transaction. A step with a request id records its whole
// answer with the response.
func (m *Machine) appendResponse(r Embedded, s State) []Effect {
	if r.Err != nil {
		return m.fail(r.Err)
	}
	// Made to size: the response, edges and all, stays in the memory cache.
	edges := append(make([]model.Edge, 0, 1+len(m.recalled)), model.Edge{Target: m.input.CID, Weight: 1})
	for _, rc := range m.recalled {
		edges = append(edges, model.Edge{Target: rc.CID, Weight: rc.Score})
	}
	out, err := m.prepare(prompt.ResponseMemory(m.name, m.resp, s.Now, edges), r.Vector, &messages.MemoryMeta{AgentId: m.req.AgentId})
	if err != nil {
		return m.fail(err)
	}
	out.EdgeType = assoc.Causal
	out.PageOf = &m.input.CID
	answer := &messages.ChatResponse{
		Input: &messages.MemoryRef{Cid: m.input.CID.String()},
		Response: &messages.Reply{
			Cid: out.CID.String(), Content: m.resp.Content,
			Model: m.resp.Model, StopReason: string(m.resp.StopReason),
		},
		Recalled: ScoredRefs(m.recalled),
	}
	if m.req.RequestId != "" {
		b, err := proto.Marshal(answer)
		if err != nil {
			return m.fail(err)
		}
		out.Request = &model.Request{ID: m.req.RequestId, Result: b}
	}
	m.phase = appendingResponse
	m.answer = answer
	return []Effect{Append{Item: out}}
}

// responded ends the step once the response is durable: what was used is
// reinforced, the STM looks at its inbox, the MTM hears which segments
// retrieval visited.
func (m *Machine) responded(r Appended, s State) []Effect {
	if r.Err != nil {
		return m.fail(r.Err)
	}
	if r.Result.Replayed {
		return m.reply(replayed(r.Result, nil)) // another attempt of the step answered first
	}
	effs := []Effect{Reinforce{Used: recall.Support(m.recalled)}, Wake{Tier: tiers.STM}}
	if m.tiers != nil && len(m.tiers.Segments) > 0 {
		effs = append(effs, Visit{Segments: m.tiers.Segments, At: s.Now})
	}
	return append(effs, m.reply(m.answer, nil)...)
}

// Fail ends the step with err when its owner gave up on the effect
// whose result the machine waits for (it timed out).
func (m *Machine) Fail(err error) []Effect {
	if m.phase == done {
		panic("advance: Fail on a finished machine")
	}
	return m.fail(err)
}

func (m *Machine) fail(err error) []Effect { return m.reply(nil, err) }

func (m *Machine) reply(answer *messages.ChatResponse, err error) []Effect {
	m.phase = done
	return []Effect{Reply{Answer: answer, Err: err}}
}

// replayed is the answer of a step an earlier attempt recorded.
func replayed(a *messages.Appended, err error) (*messages.ChatResponse, error) {
	if err != nil {
		return nil, err
	}
	if len(a.Result) == 0 {
		return nil, fmt.Errorf("%w: the request id names an insert (%s) of this sona, not a chat step", base.ErrInvalid, a.Cid)
	}
	out := &messages.ChatResponse{}
	if err := proto.Unmarshal(a.Result, out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("%w: the recorded answer of a step (%s): %v", base.ErrCorrupt, a.Cid, err)
	}
	return out, nil
}

// ExpandOf is a step's bound on what expansion adds (nil: the configured).
func ExpandOf(req *messages.ChatRequest) *int {
	if req.Expand == nil {
		return nil
	}
	n := int(*req.Expand)
	return &n
}

// ScoredRefs are recalled memories as an answer lists them.
func ScoredRefs(rs []*recall.Recalled) []*messages.ScoredRef {
	out := make([]*messages.ScoredRef, len(rs))
	for i, r := range rs {
		out[i] = &messages.ScoredRef{Cid: r.CID.String(), Score: r.Score}
	}
	return out
}
