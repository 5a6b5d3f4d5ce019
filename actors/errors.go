package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/messages"
)

// Failure codes carried by messages.Failure; the REST layer maps them to
// HTTP statuses.
const (
	CodeNotFound = "not_found"
	// CodeForgotten: the memory or block was forgotten (also not found).
	CodeForgotten = "forgotten"
	CodeInvalid   = "invalid"
	CodeConflict  = "conflict"
	CodeTooLarge  = "too_large"
	// CodeDiskFull: the store refused a write below its free-space reserve.
	CodeDiskFull    = "insufficient_storage"
	CodeTimeout     = "timeout"
	CodeUnavailable = "unavailable"
	CodeLLM         = "llm_failed"
	// CodeLLMUnavailable: the model's circuit breaker is open.
	CodeLLMUnavailable = "llm_unavailable"
	CodeInternal       = "internal"
)

// ErrLLM marks a failed model call. The input memory of the step is kept.
var ErrLLM = errors.New("actors: model call failed")

// ErrUnavailable marks a request the actor system could not serve (stopped
// system, dead actor).
var ErrUnavailable = errors.New("actors: unavailable")

// failure converts an error to the Failure reply of an actor.
func failure(err error) *messages.Failure {
	code := CodeInternal
	switch {
	case errors.Is(err, base.ErrForgotten):
		code = CodeForgotten
	case errors.Is(err, base.ErrNotFound):
		code = CodeNotFound
	case errors.Is(err, base.ErrInvalid):
		code = CodeInvalid
	case errors.Is(err, base.ErrChainConflict):
		code = CodeConflict
	case errors.Is(err, base.ErrTooLarge):
		code = CodeTooLarge
	case errors.Is(err, base.ErrDiskFull):
		code = CodeDiskFull
	case errors.Is(err, llm.ErrCircuitOpen):
		code = CodeLLMUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, actor.ErrTimeout):
		code = CodeTimeout
	case errors.Is(err, ErrLLM):
		code = CodeLLM
	case errors.Is(err, base.ErrClosed), errors.Is(err, ErrUnavailable), errors.Is(err, actor.ErrDeadLetter):
		code = CodeUnavailable
	}
	return &messages.Failure{Code: code, Message: err.Error()}
}

// Error is a Failure reply as a Go error. It matches the sentinel of its
// code with errors.Is, so callers classify actor failures like local ones.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is maps the failure code back to the sentinel errors.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case CodeNotFound:
		return target == base.ErrNotFound
	case CodeForgotten:
		return target == base.ErrForgotten || target == base.ErrNotFound
	case CodeInvalid:
		return target == base.ErrInvalid
	case CodeConflict:
		return target == base.ErrChainConflict
	case CodeTooLarge:
		return target == base.ErrTooLarge
	case CodeDiskFull:
		return target == base.ErrDiskFull
	case CodeTimeout:
		return target == context.DeadlineExceeded
	case CodeLLM:
		return target == ErrLLM
	case CodeLLMUnavailable:
		return target == ErrLLM || target == llm.ErrCircuitOpen
	case CodeUnavailable:
		return target == ErrUnavailable
	}
	return false
}

func errorOf(f *messages.Failure) error { return &Error{Code: f.Code, Message: f.Message} }

// reply converts an actor's answer to a typed result or an error.
func reply[T any](res any, err error) (T, error) {
	var zero T
	if errors.Is(err, actor.ErrTimeout) {
		return zero, fmt.Errorf("%w: actor did not answer in time", context.DeadlineExceeded)
	}
	if errors.Is(err, actor.ErrDeadLetter) {
		return zero, fmt.Errorf("%w: actor is gone", ErrUnavailable)
	}
	if err != nil {
		return zero, err
	}
	switch v := res.(type) {
	case *messages.Failure:
		return zero, errorOf(v)
	case T:
		return v, nil
	}
	return zero, fmt.Errorf("actors: unexpected reply %T", res)
}
