package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/testutil"
)

func TestParseProcStatus(t *testing.T) {
	m, err := parseProcStatus([]byte("Name:\tmemoria\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 768 kB\nRssFile:\t 256 kB\nRssShmem:\t 0 kB\n"))
	if err != nil || m != (ProcMemory{RSS: 1 << 20, Peak: 2 << 20, Anon: 768 << 10, File: 256 << 10}) {
		t.Fatalf("%+v, %v", m, err)
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t1024 kB\n")); err == nil {
		t.Fatal("a status without VmHWM, RssAnon, RssFile was accepted")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t1024 pages\nVmHWM:\t1 kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\n")); err == nil {
		t.Fatal("a status in other units was accepted")
	}
	self, err := ReadProcMemory(os.Getpid())
	if err != nil || self.RSS <= 0 || self.Peak < self.RSS {
		t.Fatalf("this process: %+v, %v", self, err)
	}
}

func TestMix(t *testing.T) {
	m, err := ParseMix("insert=3, get=1")
	if err != nil || m[OpInsert] != 3 || m[OpGet] != 1 || m.String() != "insert=3,get=1" {
		t.Fatalf("%v, %v", m, err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	n := map[Op]int{}
	for range 4000 {
		n[m.pick(rng)]++
	}
	if n[OpRecall] != 0 || n[OpInsert] < 2800 || n[OpInsert] > 3200 {
		t.Fatalf("drawn %v for 3:1", n)
	}
	if d, err := ParseMix(DefaultMix().String()); err != nil || len(d) != len(Ops) {
		t.Fatalf("default mix does not round-trip: %v, %v", d, err)
	}
	for _, bad := range []string{"", "insert", "insert=x", "delete=1", "insert=-1", "insert=0,get=0"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("mix %q accepted", bad)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if Percentile(d, 0.5) != 50 || Percentile(d, 0.99) != 99 || Percentile(d, 1) != 100 || Percentile(d[:1], 0.99) != 1 {
		t.Fatalf("p50 %d p99 %d p100 %d", Percentile(d, 0.5), Percentile(d, 0.99), Percentile(d, 1))
	}
}

func TestParseProcStat(t *testing.T) {
	// comm with spaces and a parenthesis; utime 250, stime 50 ticks
	line := "4242 (mem (x) y) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 12 0 1000 2000000 3000\n"
	if d, err := parseProcStat([]byte(line)); err != nil || d != 3*time.Second {
		t.Fatalf("%v, %v", d, err)
	}
	for _, bad := range []string{"", "4242 (memoria S 1", "4242 (m) S 1 2 3", "4242 (m) S 1 4242 4242 0 -1 0 0 0 0 0 x 50 0"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	burn := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(burn) {
	}
	if self, err := ReadProc(os.Getpid()); err != nil || self.CPU <= 0 || self.RSS <= 0 {
		t.Fatalf("this process: %+v, %v", self, err)
	}
}

// TestDrive: a window bounded by a count of requests, with failures and
// two operations, reports each with its latency and the errors.
func TestDrive(t *testing.T) {
	var n atomic.Int64
	req := func(_ context.Context, i int, rng *rand.Rand) (Op, error) {
		k := n.Add(1)
		if k%10 == 0 {
			return OpGet, &client.Error{Status: 503, Code: "unavailable", Message: "busy"}
		}
		if k%7 == 0 {
			return "custom", errors.New("no answer")
		}
		return OpInsert, nil
	}
	self := func() (ProcSample, error) { return ReadProc(os.Getpid()) }
	rep := Drive(context.Background(), Window{Clients: 4, Duration: time.Minute, Requests: 100, Server: self}, req)
	if rep.Requests != 100 || n.Load() != 100 || rep.Errors != 10+14-1 || rep.ErrorsByStatus["503"] != 10 ||
		rep.ErrorsByStatus["transport"] != 13 || len(rep.ErrorSamples) != 2 {
		t.Fatalf("%+v", rep)
	}
	if len(rep.Routes) != 3 || rep.Routes[0].Op != OpInsert || rep.Routes[1].Op != OpGet || rep.Routes[2].Route != "custom" {
		t.Fatalf("routes %+v", rep.Routes)
	}
	if len(rep.Memory) < 2 || rep.Memory[0].At != "start" || rep.Memory[len(rep.Memory)-1].At != "end" || rep.PeakRSS <= 0 {
		t.Fatalf("memory %+v, peak %d", rep.Memory, rep.PeakRSS)
	}
}

// TestDriveAtARate (fake time): a window at a rate sends each request
// when it is due and counts its latency from then. Fast answers: every
// request of the schedule sent on time. Answers slower than the rate with
// one client: the same requests as the closed loop sends, but each later
// one waited for the client, and the rest of the schedule is not sent.
func TestDriveAtARate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		origin := time.Now()
		var sent []time.Duration
		var mu sync.Mutex
		taking := func(d time.Duration) Request {
			return func(context.Context, int, *rand.Rand) (Op, error) {
				mu.Lock()
				sent = append(sent, time.Since(origin))
				mu.Unlock()
				time.Sleep(d)
				return OpInsert, nil
			}
		}
		rep := Drive(t.Context(), Window{Clients: 4, Duration: time.Second, Rate: 100}, taking(5*time.Millisecond))
		if rep.Requests != 100 || rep.Unsent != 0 || rep.Rate != 100 || rep.Routes[0].P99Ms != 5 || rep.Routes[0].MaxMs != 5 {
			t.Fatalf("fast answers at 100/s: %+v %+v", rep, rep.Routes)
		}
		slices.Sort(sent)
		for k, at := range sent {
			if at != time.Duration(k)*10*time.Millisecond {
				t.Fatalf("request %d sent at %v, due at %d ms", k, at, 10*k)
			}
		}

		origin = time.Now()
		closed := Drive(t.Context(), Window{Clients: 1, Duration: time.Second}, taking(30*time.Millisecond))
		origin = time.Now()
		open := Drive(t.Context(), Window{Clients: 1, Duration: time.Second, Rate: 100}, taking(30*time.Millisecond))
		// Sent at 0, 30, …, 990 ms either way; request k was due at 10·k ms.
		if closed.Requests != 34 || closed.Unsent != 0 || closed.Routes[0].MaxMs != 30 {
			t.Fatalf("closed loop: %+v %+v", closed, closed.Routes)
		}
		if open.Requests != 34 || open.Unsent != 66 || open.Routes[0].P50Ms != 20*16+30 || open.Routes[0].MaxMs != 20*33+30 {
			t.Fatalf("open loop behind: %+v %+v", open, open.Routes)
		}

		capped := Drive(t.Context(), Window{Clients: 2, Duration: time.Second, Rate: 1000, Requests: 10}, taking(time.Millisecond))
		if capped.Requests != 10 || capped.Unsent != 0 {
			t.Fatalf("10 requests at 1000/s: %+v", capped)
		}
	})
}

// EverySecond reports whole seconds, capped at the total, and after stop
// returns f is not called again.
func TestEverySecond(t *testing.T) {
	var last, calls atomic.Int64
	stop := EverySecond(500*time.Millisecond, func(s int) { last.Store(int64(s)); calls.Add(1) })
	testutil.Eventually(t, "a tick", func() bool { return calls.Load() > 0 })
	stop()
	n := calls.Load()
	if got := last.Load(); got != 0 {
		t.Fatalf("elapsed %d, want 0 (the total, 0.5 s, in whole seconds)", got)
	}
	if calls.Load() != n {
		t.Fatal("called after stop returned")
	}
}

// Drive reports the server's own time of the answers that tell it
// (Server-Timing), beside the latency its clients saw.
func TestDriveReportsServerTiming(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if k := n.Add(1); k%4 != 0 { // every fourth answer tells nothing
			w.Header().Set("Server-Timing", fmt.Sprintf(`db;dur=99, app;desc="x";dur=%d`, k%4))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	c, closeClient := NewClient(srv.URL, "", 2)
	defer closeClient()
	req := func(ctx context.Context, _ int, _ *rand.Rand) (Op, error) {
		_, err := c.Health(ctx)
		return OpGet, err
	}
	rep := Drive(context.Background(), Window{Clients: 2, Duration: time.Minute, Requests: 400}, req)
	if rep.Errors != 0 || len(rep.Routes) != 1 {
		t.Fatalf("%+v", rep)
	}
	// 300 answers told 1, 2 or 3 ms, a hundred each.
	if r := rep.Routes[0]; r.ServerP50Ms != 2 || r.ServerP99Ms != 3 {
		t.Fatalf("server p50 %v, p99 %v; want 2 and 3", r.ServerP50Ms, r.ServerP99Ms)
	}
}

func TestServerTime(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"app;dur=2.197":               2197 * time.Microsecond,
		"cache;desc=hit, app;dur=0.5": 500 * time.Microsecond,
		"app;dur=-1":                  -1,
		"app":                         -1,
		"db;dur=3":                    -1,
		"":                            -1,
	} {
		got, ok := ServerTime(http.Header{"Server-Timing": {h}})
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%q: %v, want %v", h, got, want)
		}
	}
}

// TestDriveInStretches (fake time): a window with Every reports each
// stretch as it ends — its requests, errors and latency, the server's CPU
// time per request over it and its memory then, the memories it holds —
// and every request of the window in exactly one stretch.
func TestDriveInStretches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var n, done atomic.Int64
		req := func(context.Context, int, *rand.Rand) (Op, error) {
			k := n.Add(1)
			// Slower and slower answers: 10 ms in the first quarter
			// second, 20 in the second, … (7 µs less, so that none ends
			// at a stretch's end, where the server's sample and the
			// stretches could each count it first)
			time.Sleep(time.Duration(1+int(time.Since(start)/(250*time.Millisecond)))*10*time.Millisecond - 7*time.Microsecond)
			done.Add(1)
			if k%5 == 0 {
				return OpGet, errors.New("no answer")
			}
			return OpInsert, nil
		}
		// A server that spends 2 ms of CPU a request and grows a MiB each.
		server := func() (ProcSample, error) {
			k := done.Load()
			return ProcSample{At: time.Now(), CPU: time.Duration(k) * 2 * time.Millisecond,
				ProcMemory: ProcMemory{RSS: k << 20, Anon: k << 19, Peak: k << 20}}, nil
		}
		var asked atomic.Int64
		stored := func(context.Context) (int64, error) { return 100 * asked.Add(1), nil }
		var told []Interval
		w := Window{Clients: 2, Duration: time.Second, Every: 250 * time.Millisecond, Server: server, Stored: stored,
			OnInterval: func(iv Interval) { told = append(told, iv) }}
		rep := Drive(t.Context(), w, req)
		// Four stretches, and the requests under way when the window
		// ended (each sent before, answered up to 40 ms after) in a fifth.
		if !slices.Equal(told, rep.Intervals) || len(rep.Intervals) != 5 || rep.Intervals[4].EndSeconds <= 1 ||
			rep.Intervals[4].EndSeconds > 1.04 || rep.Intervals[4].ServerCPUPerRequestMs != 2 {
			t.Fatalf("told %+v, reported %+v", told, rep.Intervals)
		}
		var sum, errs int64
		for i, iv := range rep.Intervals[:4] {
			// Each quarter second two clients, each request 10·(i+1) ms.
			want := int64(2 * 25 / (i + 1))
			if iv.EndSeconds != 0.25*float64(i+1) || iv.Requests < want-2 || iv.Requests > want+2 ||
				math.Round(iv.P50Ms) != float64(10*(i+1)) || iv.ServerCPUPerRequestMs != 2 || iv.RSS <= 0 || iv.Memories != int64(100*(i+1)) {
				t.Errorf("stretch %d: %+v, want ~%d requests of %d ms", i, iv, want, 10*(i+1))
			}
			if i > 0 && iv.RSS <= rep.Intervals[i-1].RSS {
				t.Errorf("stretch %d: RSS %d after %d", i, iv.RSS, rep.Intervals[i-1].RSS)
			}
		}
		for _, iv := range rep.Intervals {
			sum += iv.Requests
			errs += iv.Errors
		}
		if sum != rep.Requests || errs != rep.Errors || errs != rep.Requests/5 {
			t.Fatalf("stretches hold %d requests, %d errors; the window %d, %d", sum, errs, rep.Requests, rep.Errors)
		}

		// The server not sampled at a stretch's end: neither that
		// stretch nor the next has a CPU figure (no base to count from).
		begun := time.Now()
		w.Server = func() (ProcSample, error) {
			if time.Since(begun) == 500*time.Millisecond {
				return ProcSample{}, errors.New("gone for a moment")
			}
			return server()
		}
		w.OnInterval = nil
		gap := Drive(t.Context(), w, req)
		if len(gap.Intervals) < 4 || gap.Intervals[1].ServerCPUPerRequestMs != 0 || gap.Intervals[1].RSS != 0 ||
			gap.Intervals[2].ServerCPUPerRequestMs != 0 || gap.Intervals[2].RSS <= 0 || gap.Intervals[3].ServerCPUPerRequestMs != 2 {
			t.Fatalf("a sample missed at 0.5 s: %+v", gap.Intervals)
		}

		plain := Drive(t.Context(), Window{Clients: 1, Duration: 100 * time.Millisecond}, req)
		if plain.Intervals != nil {
			t.Fatalf("stretches without Every: %+v", plain.Intervals)
		}
	})
}
