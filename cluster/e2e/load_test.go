package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// load writes to every sona concurrently, one writer a sona, each write
// through the next member in turn (a member that does not answer or
// answers 503 is passed over), and records what was acknowledged.
type load struct {
	c     *clusterproc.Cluster
	sonas []string
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	mu      sync.Mutex
	acked   []acked
	okAt    map[string][]time.Time // per sona, when each write was acknowledged
	refused map[string]int         // statuses of refused attempts
	bad     []string               // answers no failure explains (5xx but 503, 4xx)
}

func startLoad(c *clusterproc.Cluster, sonas []string) *load {
	l := &load{c: c, sonas: sonas, stop: make(chan struct{}), okAt: map[string][]time.Time{}, refused: map[string]int{}}
	for i, s := range sonas {
		l.wg.Add(1)
		go l.writer(i, s)
	}
	return l
}

func (l *load) writer(i int, sona string) {
	defer l.wg.Done()
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		node := l.c.Nodes[(i+n)%len(l.c.Nodes)]
		a, status, body, err := insert(node.URL, sona, fmt.Sprintf("write %d to sona %d", n, i))
		l.mu.Lock()
		switch {
		case err == nil && status == http.StatusCreated:
			l.acked = append(l.acked, a)
			l.okAt[sona] = append(l.okAt[sona], time.Now())
		case err != nil:
			l.refused["no answer"]++
		case status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
			l.refused[fmt.Sprint(status)]++
		default:
			l.refused[fmt.Sprint(status)]++
			l.bad = append(l.bad, fmt.Sprintf("%s via %s: %d %s", sona, node.Name, status, strings.TrimSpace(body)))
		}
		l.mu.Unlock()
		if err != nil || status != http.StatusCreated {
			// A client's retry pause, not a wait for a condition.
			t := time.NewTimer(20 * time.Millisecond)
			select {
			case <-l.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

func (l *load) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// haltOnce stops the load if it still runs (deferred by the tests).
func (l *load) haltOnce() { l.halt() }

// maxSeq is the highest seq acknowledged for sona so far (-1: none).
func (l *load) maxSeq(sona string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := int64(-1)
	for _, a := range l.acked {
		if a.sona == sona {
			m = max(m, a.seq)
		}
	}
	return m
}

// writesSince counts the acknowledgements of sona after t.
func (l *load) writesSince(sona string, t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.okAt[sona] {
		if at.After(t) {
			n++
		}
	}
	return n
}

// firstAfter is when sona was first acknowledged after t.
func (l *load) firstAfter(sona string, t time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.okAt[sona] {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// verify checks every acknowledged append against the chains the given
// members serve: each chain linear with verifying blocks, the same on
// every member, and every acknowledged (sona, seq, cid) in it.
func (l *load) verify(t *testing.T, through ...*clusterproc.Proc) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Errorf("%d unexplained answers, e.g. %s", len(l.bad), l.bad[0])
	}
	chains := map[string][]string{}
	for _, s := range l.sonas {
		for _, p := range through {
			mems, err := chain(p.URL, s)
			if err != nil {
				t.Fatalf("sona %s through %s: %v", s, p.Name, err)
			}
			if prev, ok := chains[s]; ok && !slices.Equal(prev, mems) {
				t.Fatalf("sona %s: %s serves a chain of %d, another member one of %d", s, p.Name, len(mems), len(prev))
			}
			chains[s] = mems
		}
	}
	for _, a := range l.acked {
		mems := chains[a.sona]
		if a.seq >= int64(len(mems)) || mems[a.seq] != a.cid {
			t.Fatalf("acknowledged %+v is not in the chain (length %d)", a, len(mems))
		}
	}
	t.Logf("verified %d acknowledged appends on %d sonas; refused attempts %v", len(l.acked), len(l.sonas), l.refused)
}

// busiest is the member owning the most of sonas, and those sonas.
func busiest(own map[string]string, sonas []string) (string, []string) {
	by := map[string][]string{}
	for _, s := range sonas {
		if o := own[s]; o != "" {
			by[o] = append(by[o], s)
		}
	}
	ids := make([]string, 0, len(by))
	for id := range by {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return len(by[ids[i]]) > len(by[ids[j]]) || len(by[ids[i]]) == len(by[ids[j]]) && ids[i] < ids[j]
	})
	if len(ids) == 0 {
		return "", nil
	}
	return ids[0], by[ids[0]]
}

// procOf is the process of member id.
func procOf(t *testing.T, c *clusterproc.Cluster, id string) *clusterproc.Proc {
	t.Helper()
	for _, p := range c.Nodes {
		if p.Running() {
			if self, _ := selfID(p.URL); self == id {
				return p
			}
		}
	}
	t.Fatalf("no running member is %s", id)
	return nil
}

// others are the running members but p.
func others(c *clusterproc.Cluster, p *clusterproc.Proc) []*clusterproc.Proc {
	var out []*clusterproc.Proc
	for _, n := range c.Nodes {
		if n != p && n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// median and max of durations.
func spread(ds []time.Duration) (med, hi time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}
