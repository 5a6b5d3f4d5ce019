package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/cluster/clusterproc"
)

// benchSetup is one arrangement `memoria cluster bench` measures.
type benchSetup struct {
	Name     string `json:"setup"`
	Nodes    int    `json:"nodes"`
	Replicas int    `json:"replicas"` // 0: no cluster
}

// benchResult is what one setup measured.
type benchResult struct {
	benchSetup
	Writes      int     `json:"writes"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"writes_per_second"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	Refused     int     `json:"refused"`
	Concurrency int     `json:"writers"`
}

func clusterBenchCmd(g *globals) *cobra.Command {
	var setups string
	var sonas int
	var duration, warmup time.Duration
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure appends (writes/s, latency p50/p99) on a single node and on clusters of 1, 2 and 3 members, each its own process on loopback",
		Long: "Starts each setup in turn (a plain single node; then etcd and N members, R = min(2, N)), creates --sonas sonas,\n" +
			"and has one writer per sona insert memories for --duration after --warmup, each write through the next member in turn\n" +
			"(so most writes to a cluster are forwarded to the sona's owner). Reports what was acknowledged.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []benchSetup
			for _, s := range strings.Split(setups, ",") {
				switch s = strings.TrimSpace(s); s {
				case "single":
					list = append(list, benchSetup{Name: "single node", Nodes: 1})
				case "1", "2", "3", "4", "5":
					n, _ := strconv.Atoi(s)
					list = append(list, benchSetup{Name: fmt.Sprintf("cluster of %d", n), Nodes: n, Replicas: min(2, n)})
				default:
					return fmt.Errorf("--setups: want single and cluster sizes 1..5, comma-separated, got %q", s)
				}
			}
			if sonas < 1 {
				return fmt.Errorf("--sonas must be positive")
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "memoria-cluster-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			var results []benchResult
			for i, s := range list {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d sonas, %s…\n", s.Name, sonas, duration)
				r, err := runBench(cmd.Context(), bin, filepath.Join(dir, strconv.Itoa(i)), s, sonas, warmup, duration)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Name, err)
				}
				results = append(results, r)
			}
			if g.json {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(results)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SETUP\tMEMBERS\tR\tWRITERS\tWRITES\tWRITES/S\tP50\tP99\tREFUSED\t")
			for _, r := range results {
				rs := "-"
				if r.Replicas > 0 {
					rs = strconv.Itoa(r.Replicas)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%.0f\t%.1f ms\t%.1f ms\t%d\t\n", r.Name, r.Nodes, rs, r.Concurrency, r.Writes, r.PerSecond, r.P50ms, r.P99ms, r.Refused)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&setups, "setups", "single,1,2,3", "what to measure: single (no cluster) and cluster sizes, comma-separated")
	cmd.Flags().IntVar(&sonas, "sonas", 30, "sonas, one writer each")
	cmd.Flags().DurationVar(&duration, "duration", 20*time.Second, "how long each setup is measured")
	cmd.Flags().DurationVar(&warmup, "warmup", 3*time.Second, "writes before the measurement")
	cmd.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return cmd
}

func runBench(ctx context.Context, bin, dir string, s benchSetup, sonas int, warmup, duration time.Duration) (benchResult, error) {
	res := benchResult{benchSetup: s, Concurrency: sonas}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	o := clusterproc.Options{Bin: bin, Dir: dir, Nodes: s.Nodes, Replicas: s.Replicas}
	var c *clusterproc.Cluster
	var err error
	if s.Replicas == 0 {
		c, err = clusterproc.StartSingle(sctx, o)
	} else {
		c, err = clusterproc.Start(sctx, o)
	}
	if err != nil {
		return res, err
	}
	defer c.Stop()
	hc := &http.Client{Timeout: 30 * time.Second}
	post := func(url string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		resp, err := hc.Post(url, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}
	ids := make([]string, sonas)
	for i := range ids {
		status, b, err := post(c.Nodes[i%len(c.Nodes)].URL+"/sonas", map[string]string{"name": fmt.Sprintf("bench-%d", i)})
		if err != nil || status != http.StatusCreated {
			return res, fmt.Errorf("create a sona: %d %s %v", status, b, err)
		}
		var r struct {
			UUID string `json:"uuid"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return res, err
		}
		ids[i] = r.UUID
	}
	var mu sync.Mutex
	var lat []time.Duration
	refused := 0
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+duration)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(end) && ctx.Err() == nil; n++ {
				url := c.Nodes[(i+n)%len(c.Nodes)].URL + "/memories"
				t0 := time.Now()
				status, _, err := post(url, map[string]any{"sona": id, "dedup": false,
					"data": map[string]string{"kind": "text", "content": fmt.Sprintf("benchmark write %d of sona %d", n, i)}})
				took := time.Since(t0)
				if !t0.After(measureFrom) {
					continue
				}
				mu.Lock()
				if err == nil && status == http.StatusCreated {
					lat = append(lat, took)
				} else {
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		return res, fmt.Errorf("no write was acknowledged (%d refused)", refused)
	}
	slices.Sort(lat)
	res.Writes, res.Refused, res.Seconds = len(lat), refused, duration.Seconds()
	res.PerSecond = float64(len(lat)) / duration.Seconds()
	res.P50ms = float64(lat[len(lat)/2].Microseconds()) / 1000
	res.P99ms = float64(lat[len(lat)*99/100].Microseconds()) / 1000
	return res, nil
}
