package actors

import (
	"context"
	"runtime/pprof"
	"sync/atomic"
)

// goroutines runs functions on goroutines kept for the next one: the
// actors' mailboxes (as their dispatcher) and the steps run off them
// (System.off). A fresh goroutine starts with a small stack, and a step —
// a recall, a text's analysis, a memory's encoding — grows it, copying it
// at each doubling: 3.5% of the server's CPU in advances at 10,000 sonas
// when each ran on a goroutine of its own. A kept goroutine's stack has
// grown already (the collector halves an idle one's at most once a
// cycle). At most maxIdle wait for work; once stopped, none does.
type goroutines struct {
	tasks chan func()
	done  chan struct{}
	idle  atomic.Int32
}

// maxIdle is how many goroutines wait for work at most: more than the
// steps an advance's clients keep running at once (64–128 clients).
const maxIdle = 256

// mailboxThroughput is how many messages a mailbox processes before it
// lets another run, as protoactor's default dispatcher.
const mailboxThroughput = 300

func newGoroutines() *goroutines {
	return &goroutines{tasks: make(chan func()), done: make(chan struct{})}
}

// Schedule runs fn on a waiting goroutine, or a new one when none waits.
func (g *goroutines) Schedule(fn func()) {
	select {
	case g.tasks <- fn:
	default:
		go g.work(fn)
	}
}

// Throughput is the dispatcher's, for the mailboxes.
func (g *goroutines) Throughput() int { return mailboxThroughput }

// workLabels are the profiles' labels of the goroutines' work. A
// goroutine is started by whichever Schedule finds none waiting, and
// would otherwise carry its starter's labels for good: started from the
// store's acknowledger or committer (an acknowledged write resuming its
// actor), actors' work was counted as theirs — 30% of the CPU labelled
// the acknowledger's at 10,000 sonas (README, stop 107).
var workLabels = pprof.WithLabels(context.Background(), pprof.Labels("memoria", "actors"))

func (g *goroutines) work(fn func()) {
	pprof.SetGoroutineLabels(workLabels)
	for {
		fn()
		if g.idle.Add(1) > maxIdle {
			g.idle.Add(-1)
			return
		}
		select {
		case fn = <-g.tasks:
			g.idle.Add(-1)
		case <-g.done:
			g.idle.Add(-1)
			return
		}
	}
}

// stop ends the waiting goroutines; later work runs on goroutines of its
// own.
func (g *goroutines) stop() { close(g.done) }
