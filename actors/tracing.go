package actors

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/trace"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

// An advance is traced as a span "advance", a child of its caller's span
// (the request's), with a child per step: embed (the input), append (the
// input, until durable), recall (and its stages), tiers, the model call,
// embed (the response), append (the response). The steps run off the
// mailbox and in the actor, so the span travels with the step rather than
// in a context: advanceSpan carries it.

// advanceSpan is an advance's span; nil when the advance is not traced.
type advanceSpan struct{ span oteltrace.Span }

// startAdvance starts the span of an advance of sona under its caller's
// span (nil when tracing is off or there is no caller).
func startAdvance(caller *call, sona string) *advanceSpan {
	if caller == nil {
		return nil
	}
	_, span := trace.Start(caller.ctx, "advance", attribute.String("memoria.sona.uuid", sona))
	if !span.SpanContext().IsValid() {
		return nil // off
	}
	return &advanceSpan{span}
}

// context returns c carrying the advance's span, for the steps under it.
func (s *advanceSpan) context(c context.Context) context.Context {
	if s == nil {
		return c
	}
	return oteltrace.ContextWithSpan(c, s.span)
}

// child starts a step's span.
func (s *advanceSpan) child(c context.Context, name string) oteltrace.Span {
	_, span := trace.Start(s.context(c), name)
	return span
}

// end ends the advance's span with its reply: a failure is its error.
func (s *advanceSpan) end(reply proto.Message) {
	if s == nil {
		return
	}
	if f, ok := reply.(*messages.Failure); ok {
		s.span.SetStatus(codes.Error, f.Code+": "+f.Message)
	}
	s.span.End()
}

// tierRecall is MemoryOS's retrieval for a step (all STM pages, the best
// MTM pages, the persona), traced as "tiers".
func (s *System) tierRecall(ctx context.Context, sona, text string, vec []float32) (*tiers.Recall, error) {
	_, span := trace.Start(ctx, "tiers")
	defer span.End()
	tr, err := s.self.Tiers.Recall(sona, text, vec, 0)
	if err != nil {
		trace.Fail(span, err)
		return nil, err
	}
	span.SetAttributes(attribute.Int("memoria.tiers.stm_pages", len(tr.STM)), attribute.Int("memoria.tiers.mtm_pages", len(tr.MTM)))
	return tr, nil
}

// startModelCall starts the span of a model call, named and described
// after OpenTelemetry's generative AI conventions ("chat {model}").
func startModelCall(ctx context.Context, c config.LLM, req llm.Request) (context.Context, oteltrace.Span) {
	name := "chat"
	if c.Model != "" {
		name += " " + c.Model
	}
	return trace.Start(ctx, name, attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", c.Provider),
		attribute.String("gen_ai.request.model", c.Model), attribute.Int("gen_ai.request.max_tokens", req.MaxTokens),
		attribute.Int("memoria.prompt.messages", len(req.Messages)))
}

// endModelCall ends a model call's span with what the model said of it.
func endModelCall(span oteltrace.Span, resp llm.Response, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(resp.StopReason)}))
		if u := resp.Usage; u.PromptTokens > 0 || u.CompletionTokens > 0 {
			span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", u.PromptTokens), attribute.Int("gen_ai.usage.output_tokens", u.CompletionTokens))
		}
		trace.Fail(span, err)
	}
	span.End()
}
