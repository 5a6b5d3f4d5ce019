package wire

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

// Event is one server-sent event.
type Event struct {
	// Name is the event field ("" when the event named none: a message).
	Name string
	// Data is the event's data lines joined with "\n".
	Data string
}

// maxLine bounds one line of a stream: a longer one is an error, not an
// unbounded buffer.
const maxLine = 4 << 20

// SSEReader reads server-sent events as the HTML standard's event-stream
// format defines them: lines end with CRLF, LF or CR; a line that starts
// with ':' is a comment; "field: value" loses one space after the colon;
// several data lines are joined with "\n"; a blank line ends an event, and
// an event with no data is not dispatched; id and retry are ignored (a
// model's answer is never resumed). An event cut off by the end of the
// stream, with no blank line after it, is dropped, as the standard says.
type SSEReader struct {
	sc    *bufio.Scanner
	first bool
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	sc.Split(splitLines)
	return &SSEReader{sc: sc, first: true}
}

// Next returns the next event; io.EOF when the stream ended cleanly
// between events, or the reader's error (bufio.ErrTooLong for a line over
// 4 MiB).
func (r *SSEReader) Next() (Event, error) {
	var ev Event
	var data strings.Builder
	hasData := false
	for r.sc.Scan() {
		line := r.sc.Text()
		if r.first {
			line = strings.TrimPrefix(line, "\uFEFF")
			r.first = false
		}
		if line == "" {
			if hasData {
				ev.Data = data.String()
				return ev, nil
			}
			ev = Event{} // an event without data is not dispatched
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.Name = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
	if err := r.sc.Err(); err != nil {
		return Event{}, err
	}
	return Event{}, io.EOF
}

// splitLines splits at CRLF, LF or a lone CR.
func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a CR at the end: wait to see whether LF follows
}
