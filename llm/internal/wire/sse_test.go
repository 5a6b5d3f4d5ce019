package wire

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(r io.Reader) ([]Event, error) {
	sse := NewSSEReader(r)
	var out []Event
	for {
		ev, err := sse.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSE(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Event
	}{
		{"one event", "data: {\"a\":1}\n\n", []Event{{Data: `{"a":1}`}}},
		{"named", "event: message_stop\ndata: {}\n\n", []Event{{Name: "message_stop", Data: "{}"}}},
		{"multi-line data joined with LF", "data: {\"a\":\ndata:  1}\n\n", []Event{{Data: "{\"a\":\n 1}"}}},
		{"comments and unknown fields ignored", ": keep-alive\nid: 7\nretry: 100\nfoo: bar\ndata: x\n: more\n\n", []Event{{Data: "x"}}},
		{"no space after the colon", "event:ping\ndata:x\n\n", []Event{{Name: "ping", Data: "x"}}},
		{"only one space is stripped", "data:   x \n\n", []Event{{Data: "  x "}}},
		{"a field with no colon", "data\n\n", []Event{{Data: ""}}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", []Event{{Name: "a", Data: "1"}, {Data: "2"}}},
		{"lone CR", "data: 1\r\rdata: 2\r\r", []Event{{Data: "1"}, {Data: "2"}}},
		{"BOM at the start", "\uFEFFdata: 1\n\n", []Event{{Data: "1"}}},
		{"an event with no data is not dispatched", "event: ping\n\ndata: 1\n\n", []Event{{Data: "1"}}},
		{"blank lines between events", "\n\n\ndata: 1\n\n\n\ndata: [DONE]\n\n", []Event{{Data: "1"}, {Data: "[DONE]"}}},
		{"an event cut off by the end is dropped", "data: 1\n\ndata: 2\n", []Event{{Data: "1"}}},
		{"an unterminated last line is dropped too", "data: 1\n\nevent: x\ndata: {\"par", []Event{{Data: "1"}}},
		{"empty stream", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Byte by byte too: a CR at the end of one read and its LF at
			// the start of the next are one line end.
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readAll(r)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("err = %v, want io.EOF", err)
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("events = %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestSSEErrors(t *testing.T) {
	// A reader that fails (a connection cut mid-body) is its error, not EOF.
	got, err := readAll(io.MultiReader(strings.NewReader("data: 1\n\ndata: 2"), iotest.ErrReader(io.ErrUnexpectedEOF)))
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 1 {
		t.Fatalf("events %q, err = %v, want one event then io.ErrUnexpectedEOF", got, err)
	}
	// A line over the bound is an error, not an unbounded buffer.
	_, err = readAll(strings.NewReader("data: " + strings.Repeat("x", maxLine) + "\n\n"))
	if !errors.Is(err, bufio.ErrTooLong) {
		t.Fatalf("long line: err = %v, want bufio.ErrTooLong", err)
	}
}
