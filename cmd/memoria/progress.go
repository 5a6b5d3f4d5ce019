package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress shows a one-line progress bar on a terminal and nothing
// elsewhere.
type progress struct {
	w      io.Writer
	on     bool
	mu     sync.Mutex
	label  string
	n, tot int
	last   time.Time
}

func newProgress(w io.Writer, quiet bool) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, on: !quiet && ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progress) start(label string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on && p.label != "" {
		fmt.Fprintln(p.w)
	}
	p.label, p.n, p.tot = label, 0, total
	p.draw(true)
}

func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	p.draw(p.n == p.tot)
}

func (p *progress) draw(force bool) {
	if !p.on || (!force && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	if p.tot == 0 { // no measure of how far: a count (seconds, say)
		fmt.Fprintf(p.w, "\r%-24s %d ", p.label, p.n)
		return
	}
	const width = 30
	filled := 0
	if p.tot > 0 {
		filled = width * p.n / p.tot
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
		if i < filled {
			bar[i] = '#'
		}
	}
	fmt.Fprintf(p.w, "\r%-24s [%s] %d/%d", p.label, bar, p.n, p.tot)
}

func (p *progress) set(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = n
	p.draw(p.n == p.tot)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on && p.label != "" {
		fmt.Fprintln(p.w)
	}
	p.label = ""
}

// note writes line on a line of its own, above the bar when one is drawn
// (on a terminal), and as it is elsewhere.
func (p *progress) note(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, line)
	if p.on && p.label != "" {
		p.draw(true)
	}
}
