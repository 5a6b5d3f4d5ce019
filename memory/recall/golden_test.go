package recall

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/assoc"
)

// TestScoringGolden drives the pure scoring functions — fusion, decay, the
// score and its contributions, emergent thresholds — from
// testdata/scoring; regenerate the expectations with
// `go test ./memory/recall -run TestScoringGolden -rewrite`.
func TestScoringGolden(t *testing.T) {
	datadriven.RunTest(t, "testdata/scoring", func(t *testing.T, d *datadriven.TestData) string {
		args := map[string]float64{}
		for _, a := range d.CmdArgs {
			v, err := strconv.ParseFloat(a.Vals[0], 64)
			if err != nil {
				d.Fatalf(t, "%s: %v", a.Key, err)
			}
			args[a.Key] = v
		}
		weights := config.PathWeights{Dense: args["dense"], BM25: args["bm25"], Affinity: args["affinity"], Context: args["context"],
			Time: args["time"], Speaker: args["speaker"], Reply: args["reply"]}
		var b strings.Builder
		switch d.Cmd {
		case "fuse-rrf", "fuse-weighted":
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				e := parseEvidence(t, d, line)
				var f Fused
				if d.Cmd == "fuse-rrf" {
					f = FuseRRF(e, weights, args["k"])
				} else {
					f = FuseWeighted(e, weights, Calibration{DenseFloor: args["dense_floor"], DenseBest: args["dense_best"], BestBM25: args["best_bm25"]})
				}
				fmt.Fprintf(&b, "%-40s → relevance=%.4f dense=%.4f bm25=%.4f affinity=%.4f support=%.4f\n", line, f.Relevance, f.Dense, f.BM25,
					f.Affinity, f.Relevance-f.Dense-f.BM25)
			}
		case "decay":
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				f := fields(t, d, line)
				got := Decay(args["lambda"], f["importance"], f["backbone"] == 1, int64(f["activity"]), int64(f["last"]))
				fmt.Fprintf(&b, "%-48s → %.4f\n", line, got)
			}
		case "score":
			// The lines are one query's candidates: the priors' unit is
			// the spread of their relevance (PriorUnit), unless unit= is
			// given; the order by score follows them.
			w := config.Weights{Relevance: args["relevance"], Recency: args["recency"], Importance: args["importance"], Sona: args["sona"]}
			lines := strings.Split(strings.TrimSpace(d.Input), "\n")
			es := make([]Explain, len(lines))
			rel := make([]float64, len(lines))
			for i, line := range lines {
				f := fields(t, d, line)
				es[i] = Explain{
					Fused:      Fused{Dense: f["dense"], BM25: f["bm25"], Affinity: f["affinity"], Relevance: f["dense"] + f["bm25"] + f["affinity"]},
					KindWeight: f["kind"], Recency: f["recency"], Importance: f["importance"], SonaSimilarity: f["sona"],
				}
				rel[i] = es[i].Fused.Relevance
			}
			unit, ok := args["unit"]
			if !ok {
				unit = PriorUnit(rel)
			}
			fmt.Fprintf(&b, "prior unit %.4f\n", unit)
			order := make([]int, len(lines))
			for i, line := range lines {
				es[i].PriorUnit = unit
				ScoreHit(&es[i], w)
				c := es[i].Contrib
				fmt.Fprintf(&b, "%d: %s\n  score=%.4f = dense %.4f + bm25 %.4f + affinity %.4f + recency %.4f + importance %.4f + sona %.4f\n",
					i+1, line, c.Sum(), c.Dense, c.BM25, c.Affinity, c.Recency, c.Importance, c.SonaSimilarity)
				order[i] = i
			}
			slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(es[b].Contrib.Sum(), es[a].Contrib.Sum()) })
			fmt.Fprint(&b, "order:")
			for _, i := range order {
				fmt.Fprintf(&b, " %d", i+1)
			}
			fmt.Fprintln(&b)
		case "threshold":
			th := config.Default().Threshold
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				name, rest, _ := strings.Cut(line, ":")
				var sims []float64
				for _, s := range strings.Fields(rest) {
					v, err := strconv.ParseFloat(s, 64)
					if err != nil {
						d.Fatalf(t, "%s: %v", s, err)
					}
					sims = append(sims, v)
				}
				st := assoc.StatsOf(sims)
				for _, beta := range []struct {
					name string
					v    float64
				}{{"retrieval", th.RetrievalBeta}, {"dedup", th.DedupBeta}, {"consensus", th.ConsensusBeta}} {
					r := assoc.EmergentThreshold(th, beta.v, st, int64(len(sims)))
					regime := "live"
					if r.Bootstrap {
						regime = "bootstrap"
					}
					fmt.Fprintf(&b, "%s %s β=%.1f: %.4f (mean %.4f, std %.4f, %s)\n", strings.TrimSpace(name), beta.name, beta.v, r.Value, r.Mean, r.Std, regime)
				}
			}
		default:
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		return b.String()
	})
}

func fields(t *testing.T, d *datadriven.TestData, line string) map[string]float64 {
	out := map[string]float64{}
	for _, kv := range strings.Fields(line) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			d.Fatalf(t, "want key=value, got %q", kv)
		}
		if v == "true" {
			out[k] = 1
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			d.Fatalf(t, "%s: %v", kv, err)
		}
		out[k] = f
	}
	return out
}

func parseEvidence(t *testing.T, d *datadriven.TestData, line string) Evidence {
	f := fields(t, d, line)
	return Evidence{
		Dense: f["dense"], BM25: f["bm25"], Affinity: f["affinity"],
		DenseRank: int(f["dense_rank"]), BM25Rank: int(f["bm25_rank"]), AffinityRank: int(f["affinity_rank"]),
		Context: f["context"], Time: f["time"], Speaker: f["speaker"], Reply: f["reply"],
	}
}
