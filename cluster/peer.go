package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/memory/base"
	memchain "github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// The peer protocol: protobuf bodies over HTTP on the peer listener.
//
//	POST /peer/v1/stage     StageRequest → StageResponse (a replica stages appends)
//	GET  /peer/v1/entries   ?sona=&from=&to= → EntriesResponse (catching up)
//	GET  /peer/v1/member    the member's record (JSON)
//	POST /peer/v1/forget/plan   ForgetPlan → ForgetPlanned (forget.go)
//	POST /peer/v1/forget/apply  ForgetApply → ForgetApplied
//	GET  /peer/v1/tombstones    ?cursor= → TombstonePage
//	POST /peer/v1/recall        a self-scope recall (gather.go)
//	GET  /peer/v1/sonas         the member's sonas (gather.go)
const protoType = "application/x-protobuf"

// maxPeerBody caps a peer request body: a batch of staged appends.
const maxPeerBody = 256 << 20

// replicaLocks serialise the stage requests of one sona on a replica.
type replicaLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (r *replicaLocks) lock(sona string) func() {
	r.mu.Lock()
	if r.locks == nil {
		r.locks = map[string]*sync.Mutex{}
	}
	l := r.locks[sona]
	if l == nil {
		l = &sync.Mutex{}
		r.locks[sona] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (c *Cluster) handleStage(w http.ResponseWriter, r *http.Request) {
	req := &messages.StageRequest{}
	if err := readProto(r, req); err != nil {
		peerError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	resp, err := c.stageHere(r.Context(), req)
	if err != nil {
		status, code := http.StatusInternalServerError, "internal"
		switch {
		case errors.Is(err, ErrFenced):
			status, code = http.StatusConflict, "fenced"
		case errors.Is(err, base.ErrInvalid):
			status, code = http.StatusBadRequest, "invalid"
		case errors.Is(err, base.ErrDiskFull):
			status, code = http.StatusInsufficientStorage, "insufficient_storage"
		}
		c.log.Warn("refused to stage appends", "sona", req.GetSona().GetUuid(), "owner", req.Owner, "err", err)
		peerError(w, status, code, err.Error())
		return
	}
	writeProto(w, resp)
}

// stageHere is a replica's side of an append: apply what the owner's
// acknowledged head covers, then stage the new appends durably.
func (c *Cluster) stageHere(ctx context.Context, req *messages.StageRequest) (*messages.StageResponse, error) {
	rec := req.GetSona()
	sona := rec.GetUuid()
	if u, ok := memchain.CanonicalUUID(sona); !ok || u != sona {
		return nil, fmt.Errorf("%w: sona %q", base.ErrInvalid, sona)
	}
	defer c.replicas.lock(sona)()
	cs := c.chains
	cs.mu.Lock()
	if req.Claim < cs.claims[sona] {
		seen := cs.claims[sona]
		cs.mu.Unlock()
		return nil, fmt.Errorf("%w: member %s's claim on %s (%d) is older than one seen (%d)", ErrFenced, req.Owner, sona, req.Claim, seen)
	}
	cs.claims[sona] = req.Claim
	ch := cs.sonas[sona]
	cs.mu.Unlock()
	if ch != nil {
		ch.mu.Lock()
		mine := ch.claim
		if mine != 0 && mine < req.Claim {
			// Another member claimed this sona after this one did:
			// whatever this one still thinks it owns is void.
			ch.claim, ch.broken = 0, ErrFenced
		}
		ch.mu.Unlock()
		if mine > req.Claim {
			return nil, fmt.Errorf("%w: member %s's claim on %s (%d) is older than this member's (%d)", ErrFenced, req.Owner, sona, req.Claim, mine)
		}
	}
	self := c.self
	var err error
	if c.isBackbone(sona) {
		err = c.holdBackbone(ctx)
	} else {
		_, err = self.Sonas.Adopt(ctx, rec)
	}
	if err != nil {
		return nil, err
	}
	length, _, err := localLength(self, sona)
	if err != nil {
		return nil, err
	}
	committed := req.GetCommitted().GetSeq()
	if committed >= length {
		st, err := readStaged(self.Store(), sona, length)
		if err != nil {
			return nil, err
		}
		run, ok := acknowledged(st, length, req.GetCommitted())
		if !ok && len(st) > 0 {
			err = fmt.Errorf("%w: not the committed chain", ErrDiverged)
		} else {
			err = apply(ctx, self, sona, run)
		}
		if errors.Is(err, ErrDiverged) {
			// Staged by an owner whose appends the head never reached, or
			// short of the head: the owner sends the chain from here.
			if err := dropStaged(ctx, self.Store(), sona, length); err != nil {
				return nil, err
			}
			return &messages.StageResponse{NeedFrom: length}, nil
		} else if err != nil {
			return nil, err
		}
		if length, _, err = localLength(self, sona); err != nil {
			return nil, err
		}
		if length-1 < committed {
			return &messages.StageResponse{NeedFrom: length}, nil
		}
	}
	if committed >= 0 {
		act, err := localAct(self, sona, committed)
		if err != nil {
			return nil, err
		}
		if !act.Equals(cidOf(req.Committed.Act)) {
			return nil, fmt.Errorf("%w: %s seq %d is %s here, %s on its owner", ErrDiverged, sona, committed, act, cidOf(req.Committed.Act))
		}
	}
	var fresh []*messages.StagedAppend
	for _, a := range req.Appends {
		if a.Seq >= length {
			fresh = append(fresh, a)
		}
	}
	if len(fresh) == 0 {
		// A backbone's consensus write that appends nothing: its ledger
		// is taken now, the chain being at the owner's head.
		if req.Ledger != nil && len(req.Appends) == 0 {
			if !c.isBackbone(sona) {
				return nil, fmt.Errorf("%w: a ledger for sona %s, not the backbone", base.ErrInvalid, sona)
			}
			if err := self.Store().Update(ctx, ledgerOp(req.Ledger)); err != nil {
				return nil, err
			}
		}
		return &messages.StageResponse{Ok: true}, nil
	}
	// The appends between the chain and this batch must be staged here
	// already, by this same claim.
	if first := fresh[0].Seq; first > length {
		st, err := readStaged(self.Store(), sona, length)
		if err != nil {
			return nil, err
		}
		next := length
		for _, a := range st {
			if a.Seq != next || a.Seq >= first || a.Claim != req.Claim {
				break
			}
			next++
		}
		if next < first {
			return &messages.StageResponse{NeedFrom: next}, nil
		}
	}
	op, err := stageOp(sona, fresh)
	if err != nil {
		return nil, err
	}
	if err := self.Store().Update(ctx, op); err != nil {
		return nil, err
	}
	return &messages.StageResponse{Ok: true}, nil
}

func (c *Cluster) handleEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sona := q.Get("sona")
	from, err1 := strconv.ParseInt(q.Get("from"), 10, 64)
	to, err2 := strconv.ParseInt(q.Get("to"), 10, 64)
	if err1 != nil || err2 != nil || from < 0 {
		peerError(w, http.StatusBadRequest, "invalid", "want ?sona=&from=&to= with from ≥ 0")
		return
	}
	to = min(to, from+255)
	_, rec, err := localLength(c.self, sona)
	if err == nil && rec == nil {
		err = fmt.Errorf("%w: sona %s", base.ErrNotFound, sona)
	}
	var list []*messages.StagedAppend
	var ledger *messages.Ledger
	if err == nil && c.isBackbone(sona) {
		err = c.self.Store().View(func(r store.Reader) (err error) {
			ledger, err = readLedger(r, nil)
			return err
		})
	}
	if err == nil {
		list, err = entries(c.self, sona, from, to)
	}
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, base.ErrNotFound) {
			status = http.StatusNotFound
		}
		peerError(w, status, "entries", err.Error())
		return
	}
	writeProto(w, &messages.EntriesResponse{Sona: &messages.Sona{Uuid: rec.Uuid, Name: rec.Name, CreatedAt: rec.CreatedAt}, Appends: list, Ledger: ledger})
}

// stage sends a stage request to m.
func (c *Cluster) stage(ctx context.Context, m Member, req *messages.StageRequest) (*messages.StageResponse, error) {
	resp := &messages.StageResponse{}
	return resp, c.call(ctx, http.MethodPost, m.Peer+"/peer/v1/stage", req, resp)
}

// entries asks m for sona's appends from..to.
func (c *Cluster) entries(ctx context.Context, m Member, sona string, from, to int64) (*messages.EntriesResponse, error) {
	q := url.Values{"sona": {sona}, "from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}}
	resp := &messages.EntriesResponse{}
	if err := c.call(ctx, http.MethodGet, m.Peer+"/peer/v1/entries?"+q.Encode(), nil, resp); err != nil {
		return nil, err
	}
	if resp.Sona.GetUuid() != sona {
		return nil, fmt.Errorf("member %s answered for sona %q, not %s", m.ID, resp.Sona.GetUuid(), sona)
	}
	return resp, nil
}

// call makes one peer call with a protobuf body and answer.
func (c *Cluster) call(ctx context.Context, method, u string, in, out proto.Message) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = proto.Marshal(in); err != nil {
			return err
		}
	}
	b, err := c.do(ctx, method, u, protoType, body)
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, out)
}

// callJSON makes one peer call with a JSON body (nil: none) and answer.
func (c *Cluster) callJSON(ctx context.Context, method, u string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	b, err := c.do(ctx, method, u, "application/json", body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// do makes one peer call: body (nil: none) of contentType, the answer's
// body when it is 200.
func (c *Cluster) do(ctx context.Context, method, u, contentType string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.cfg.Secret != "" {
		req.Header.Set(secretHeader, c.cfg.Secret)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, peerErrorOf(method, u, resp.StatusCode, b)
	}
	return b, nil
}

// PeerError is another member's refusal of a peer call: the HTTP status
// and the error code and message it answered with (peerError's
// {"error":{"code","message"}}; an answer in another shape has no code,
// its body is the message).
type PeerError struct {
	Method, URL string
	Status      int
	Code        string
	Message     string
}

func (e *PeerError) Error() string {
	code := e.Code
	if code == "" {
		code = "no code"
	}
	return fmt.Sprintf("%s %s: %d %s (%s): %s", e.Method, e.URL, e.Status, http.StatusText(e.Status), code, e.Message)
}

// peerErrorOf reads a peer's refusal from its status and body.
func peerErrorOf(method, u string, status int, body []byte) *PeerError {
	e := &PeerError{Method: method, URL: u, Status: status}
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		e.Message = string(bytes.TrimSpace(body))
	}
	return e
}

// hasPeerCode reports whether err holds (errors.Join trees included) a
// PeerError with code.
func hasPeerCode(err error, code string) bool {
	var pe *PeerError
	if errors.As(err, &pe) && pe.Code == code {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(u.Unwrap(), func(e error) bool { return hasPeerCode(e, code) })
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return hasPeerCode(inner, code)
		}
	}
	return false
}

func readProto(r *http.Request, m proto.Message) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxPeerBody))
	if err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := proto.Marshal(m)
	if err != nil {
		peerError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.Header().Set("Content-Type", protoType)
	_, _ = w.Write(b)
}
