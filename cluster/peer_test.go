package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/forget"
)

// TestPeerErrorTyped: a peer's refusal, written by peerError, is read
// back as a PeerError with its status, code and message; an answer in
// another shape keeps its body as the message, without a code. A forget's
// refusals are classified by the codes of the PeerErrors among them
// (joined and wrapped), never by what their messages say.
func TestPeerErrorTyped(t *testing.T) {
	rec := httptest.NewRecorder()
	peerError(rec, 403, "not_allowed", `token "t" may not forget it ("code":"invalid" is text here)`)
	pe := peerErrorOf("POST", "http://peer/peer/v1/forget/plan", rec.Code, rec.Body.Bytes())
	if pe.Status != 403 || pe.Code != "not_allowed" || pe.Message != `token "t" may not forget it ("code":"invalid" is text here)` {
		t.Fatalf("read back: %+v", pe)
	}
	if other := peerErrorOf("GET", "http://peer/x", 502, []byte("  bad gateway\n")); other.Code != "" || other.Message != "bad gateway" {
		t.Fatalf("an answer without the error shape: %+v", other)
	}

	wrapped := func(e error) error { return fmt.Errorf("member m2: %w", e) }
	invalid := &PeerError{Status: 400, Code: "invalid", Message: `it said "code":"not_allowed" in its message`}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"not allowed", errors.Join(context.DeadlineExceeded, wrapped(pe)), forget.ErrNotAllowed},
		{"invalid, whatever its message says", errors.Join(wrapped(invalid), errors.New("timeout")), base.ErrInvalid},
		{"not allowed wins over invalid", errors.Join(wrapped(invalid), wrapped(pe)), forget.ErrNotAllowed},
		{"a code in an untyped error's text counts for nothing", errors.New(`POST x: 403: {"error":{"code":"not_allowed"}}`), ErrNoReplicas},
		{"unavailable", wrapped(&PeerError{Status: 503, Code: "unavailable"}), ErrNoReplicas},
	} {
		got := forgetPeerError("planning", tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if tc.want != forget.ErrNotAllowed && errors.Is(got, forget.ErrNotAllowed) || tc.want != base.ErrInvalid && errors.Is(got, base.ErrInvalid) {
			t.Errorf("%s: %v is classified as another error too", tc.name, got)
		}
	}
}
