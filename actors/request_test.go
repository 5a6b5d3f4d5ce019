package actors_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/actors"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/messages"
)

// flakyLLM fails its first calls, then answers as the offline model.
type flakyLLM struct{ fails atomic.Int32 }

func (f *flakyLLM) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if f.fails.Add(-1) >= 0 {
		return llm.Response{}, errors.New("the model is down")
	}
	return llm.NewOffline().Complete(ctx, req)
}

// TestStepRequestID: a chat step sent again with its request id appends
// its input and its response once. A step whose model call failed after
// its input was stored goes on from that input when sent again; a step
// that completed is answered as it was; two attempts at once give one
// answer and one pair of memories.
func TestStepRequestID(t *testing.T) {
	model := &flakyLLM{}
	model.fails.Store(1)
	e := start(t, testConfig(t.TempDir()), model, actors.TestingKnobs{})
	ctx := context.Background()
	rec, err := e.self.Sonas.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	length := func() int64 {
		r, err := e.self.Sonas.Get(rec.Uuid)
		if err != nil {
			t.Fatal(err)
		}
		return r.Length
	}
	step := func(id string) *messages.ChatRequest {
		return &messages.ChatRequest{Content: "what did I paint?", RequestId: id}
	}
	if _, err := e.sys.Advance(ctx, rec.Uuid, step("step-1")); err == nil {
		t.Fatal("the step succeeded with the model down")
	}
	if l := length(); l != 1 {
		t.Fatalf("after a failed model call the chain has %d memories, want the input", l)
	}
	first, err := e.sys.Advance(ctx, rec.Uuid, step("step-1"))
	if err != nil {
		t.Fatal(err)
	}
	if l := length(); l != 2 {
		t.Fatalf("the step sent again: %d memories, want its input once and its response", l)
	}
	if in := walkChain(t, e.self, rec.Uuid)[0].String(); first.Input.Cid != in {
		t.Fatalf("the step went on from input %s, the stored one is %s", first.Input.Cid, in)
	}
	again, err := e.sys.Advance(ctx, rec.Uuid, step("step-1"))
	if err != nil || !proto.Equal(again, first) || length() != 2 {
		t.Fatalf("a completed step sent again: %v %v, length %d; first %v", again, err, length(), first)
	}

	var wg sync.WaitGroup
	answers := make([]*messages.ChatResponse, 2)
	for i := range answers {
		wg.Go(func() {
			r, err := e.sys.Advance(ctx, rec.Uuid, step("step-2"))
			if err != nil {
				t.Error(err)
			}
			answers[i] = r
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if !proto.Equal(answers[0], answers[1]) || length() != 4 {
		t.Fatalf("two attempts at once: %v and %v, length %d", answers[0], answers[1], length())
	}
}
