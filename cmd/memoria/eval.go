package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/internal/eval"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/recall"
	"github.com/memoria-ai/memoria/memory/tiers"
	"github.com/memoria-ai/memoria/messages"
)

func evalCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "eval", Short: "Measure recall quality on evaluation data"}
	cmd.AddCommand(locomoCmd(g))
	return cmd
}

// evalConfig is one configuration of the recall engine to measure.
type evalConfig struct {
	name  string
	paths recall.Paths
	learn bool // record co-access while answering (online learning)
	tiers bool // MemoryOS retrieval from the tiers instead of the recall engine
}

func evalConfigs(rc config.Recall) map[string]evalConfig {
	dense := config.PathWeights{Dense: rc.Paths.Dense}
	bm25 := config.PathWeights{BM25: rc.Paths.BM25}
	noMetric, metric := rc.Paths, rc.Paths
	noMetric.Metric = 0
	if metric.Metric == 0 {
		metric.Metric = 0.5
	}
	// The context, time and speaker evidence (issue 17), each alone beside
	// the fusion without them, at its configured weight (else the
	// default's; the context evidence, off by default, at 0.25), and the
	// default with the context evidence.
	def := config.Default().Recall.Paths
	or := func(v, d float64) float64 {
		if v > 0 {
			return v
		}
		return d
	}
	ctxW, timeW, speakerW := or(rc.Paths.Context, or(def.Context, 0.25)), or(rc.Paths.Time, def.Time), or(rc.Paths.Speaker, def.Speaker)
	sessionW, feedbackW := or(rc.Paths.Session, or(def.Session, 0.1)), or(rc.Paths.Feedback, or(def.Feedback, 0.25)) // off by default: at the weights measured
	base := rc.Paths
	offEvidence(&base)
	with := func(from config.PathWeights, set func(*config.PathWeights)) recall.Paths {
		set(&from)
		return recall.Paths{Weights: from, Fusion: rc.Fusion}
	}
	return map[string]evalConfig{
		"base":        {name: "fused without context, time, speaker, session, feedback", paths: with(base, func(*config.PathWeights) {})},
		"context":     {name: fmt.Sprintf("fused with only the context evidence (%g)", ctxW), paths: with(base, func(w *config.PathWeights) { w.Context = ctxW })},
		"time":        {name: fmt.Sprintf("fused with only the time evidence (%g)", timeW), paths: with(base, func(w *config.PathWeights) { w.Time = timeW })},
		"speaker":     {name: fmt.Sprintf("fused with only the speaker evidence (%g)", speakerW), paths: with(base, func(w *config.PathWeights) { w.Speaker = speakerW })},
		"session":     {name: fmt.Sprintf("fused with only the session evidence (%g)", sessionW), paths: with(base, func(w *config.PathWeights) { w.Session = sessionW })},
		"feedback":    {name: fmt.Sprintf("fused with only the feedback path (%g)", feedbackW), paths: with(base, func(w *config.PathWeights) { w.Feedback = feedbackW })},
		"timespeaker": {name: "fused with only the time and speaker evidence (the default before the context, session and feedback)", paths: with(base, func(w *config.PathWeights) { w.Time, w.Speaker = timeW, speakerW })},
		"withcontext": {name: fmt.Sprintf("fused with the context evidence (%g) too", ctxW), paths: with(rc.Paths, func(w *config.PathWeights) { w.Context = ctxW })},
		"dense":       {name: "dense only", paths: recall.Paths{Weights: dense, Fusion: rc.Fusion}},
		"bm25":        {name: "BM25 only", paths: recall.Paths{Weights: bm25, Fusion: rc.Fusion}},
		"fused":       {name: "fused (" + rc.Fusion + ")", paths: recall.Paths{Weights: rc.Paths, Fusion: rc.Fusion}},
		"nometric":    {name: "fused without the metric path", paths: recall.Paths{Weights: noMetric, Fusion: rc.Fusion}},
		"metric":      {name: fmt.Sprintf("fused with the metric path (weight %g)", metric.Metric), paths: recall.Paths{Weights: metric, Fusion: rc.Fusion}},
		"expansion":   {name: "+ expansion", paths: recall.Paths{Weights: rc.Paths, Fusion: rc.Fusion, Expand: true}},
		"coaccess":    {name: "+ co-access", paths: recall.Paths{Weights: rc.Paths, Fusion: rc.Fusion, Expand: true, CoAccess: true}, learn: true},
		"tiers":       {name: "MemoryOS tiers", tiers: true},
	}
}

func locomoCmd(g *globals) *cobra.Command {
	var dataDir, ks, configs, fusion, scope string
	var misses int
	var withTiers, loo bool
	cmd := &cobra.Command{
		Use:   "locomo [--data DIR]",
		Short: "Evidence recall on LoCoMo conversations, per configuration and category",
		Long: "Ingests each conversation into its own sona of a fresh store (each turn an `other` memory named by\n" +
			"its speaker, timestamped from its session, image captions appended, its dia_id as a label, linked to\n" +
			"the turn before it), then recalls with every question of categories 1-4 and scores evidence recall:\n" +
			"recall@k among the top-k hits before expansion, and budget recall within the default character budget\n" +
			"after co-access and expansion. --data is the folder of conversation files here, not a data directory.\n\n" +
			"--tiers adds MemoryOS's tiered retrieval as a row: each conversation's consecutive turn pairs are its\n" +
			"dialogue pages, pushed through STM, MTM and LPM with the offline tier model; a question retrieves the\n" +
			"top-5 segments and their top-10 pages by similarity, then the STM's pages newest first. recall@k counts\n" +
			"the first k turns of those pages; budget recall, all of them.\n\n" +
			"--loo adds each configuration's leave-one-conversation-out figure: every question is ranked under every\n" +
			"setting of a small declared grid of recall-time settings (score weights, path weights, BM25's b) over the\n" +
			"one ingested store; each conversation is scored with the setting best (recall@10) on the others.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kList, err := parseKs(ks)
			if err != nil {
				return err
			}
			if dataDir == "" {
				if dataDir, err = eval.FindData(); err != nil {
					return err
				}
			}
			if loo && !slices.Contains(kList, looK) { // the figure the settings are chosen for
				kList = append(kList, looK)
				slices.Sort(kList)
			}
			convs, err := eval.Load(dataDir)
			if err != nil {
				return err
			}
			store, err := os.MkdirTemp("", "memoria-eval-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(store)
			saved := g.dataDir
			g.dataDir = store
			cfg, err := g.loadConfig("warn")
			g.dataDir = saved
			if err != nil {
				return err
			}
			if fusion != "" {
				cfg.Recall.Fusion = fusion
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			all := evalConfigs(cfg.Recall)
			var run []string
			for _, c := range strings.Split(configs, ",") {
				c = strings.TrimSpace(c)
				if _, ok := all[c]; !ok {
					return fmt.Errorf("--configs: unknown configuration %q (dense, bm25, fused, base, context, time, speaker, session, feedback, timespeaker, withcontext, nometric, metric, expansion, coaccess, tiers)", c)
				}
				run = append(run, c)
			}
			if withTiers && !slices.Contains(run, "tiers") {
				run = append(run, "tiers")
			}
			cfg.Tiers.TopK = 10 // MemoryOS's LoCoMo setting
			// The store stays as ingested while it is measured: no heartbeat
			// tick (association pruning, compression, dreams) changes it
			// halfway through a long run.
			cfg.Heartbeat.Interval = config.Duration(100 * 365 * 24 * time.Hour)
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			ctx := cmd.Context()
			a, err := app.Open(ctx, cfg, log, app.Options{})
			if err != nil {
				return err
			}
			defer a.Close()

			prog := newProgress(cmd.ErrOrStderr(), g.json)
			prog.start("ingesting", eval.Turns(convs))
			ing, err := eval.Ingest(ctx, client.Embedded(a.API), convs, func() { prog.add(1) })
			if err != nil {
				return err
			}
			if err := a.Self.Text.Settle(ctx); err != nil { // BM25 statistics over every conversation
				return err
			}
			if err := a.Self.Evals.Settle(ctx); err != nil { // metric profiles of every turn
				return err
			}
			var transitions map[string]int
			if slices.Contains(run, "tiers") {
				if transitions, err = pageLoCoMo(ctx, a.Self, ing, prog); err != nil {
					return err
				}
			}
			results := map[string]*eval.Accumulator{}
			looResults, looChoice := map[string]*eval.Accumulator{}, map[string]map[string]string{}
			for _, name := range run {
				score := scoreLoCoMo
				if all[name].tiers {
					score = scoreTiers
				}
				acc, err := score(ctx, a.Self, cfg, ing, all[name], kList, scope, prog, misses, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				results[name] = acc
				switch {
				case !loo:
				case all[name].tiers: // nothing of it is tuned here: held out, it scores the same
					looResults[name] = acc
				case all[name].learn: // learning changes the store question by question: no grid over one ingest
				default:
					if looResults[name], looChoice[name], err = looLoCoMo(ctx, a.Self, cfg, ing, all[name], kList, scope, prog); err != nil {
						return err
					}
				}
			}
			prog.done()

			out := cmd.OutOrStdout()
			main := run[len(run)-1]
			if slices.Contains(run, "fused") {
				main = "fused"
			} else if main == "tiers" && len(run) > 1 {
				main = run[len(run)-2]
			}
			if g.json {
				rep := results[main].Report()
				rep["configuration"] = main
				rep["left_out"] = eval.NoEvidence(convs) // questions of categories 1-4 without evidence turns
				if l := looResults[main]; l != nil {
					rep["leave_one_out"] = l.Report()
				}
				others := map[string]any{}
				for _, name := range run {
					r := results[name].Report()
					if l := looResults[name]; l != nil {
						r["leave_one_out"] = l.Report()
						r["leave_one_out_choice"] = looChoice[name]
					}
					others[name] = r
				}
				rep["configurations"] = others
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			fmt.Fprintf(out, "LoCoMo evidence recall: %d conversations, %d turns, %d questions (categories 1-4; %d more have no evidence turns to find and are left out), scope %s\n\n",
				len(convs), len(ing.Dia), results[run[0]].Report()["n"], eval.NoEvidence(convs), orDefault(scope, cfg.Recall.Scope))
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			header := "configuration\tn"
			for _, k := range kList {
				header += fmt.Sprintf("\trecall@%d", k)
			}
			header += "\tbudget recall"
			if loo {
				header += fmt.Sprintf("\tLOO recall@%d\tLOO budget recall", looK)
			}
			fmt.Fprintln(tw, header)
			row := func(label string, acc, held *eval.Accumulator, cat int) {
				n, at, budget := acc.Row(cat)
				line := fmt.Sprintf("%s\t%d", label, n)
				for _, v := range at {
					line += fmt.Sprintf("\t%.3f", v)
				}
				line += fmt.Sprintf("\t%.3f", budget)
				if loo && held == nil {
					line += "\t-\t-"
				} else if loo {
					_, at, budget := held.Row(cat)
					line += fmt.Sprintf("\t%.3f\t%.3f", at[slices.Index(kList, looK)], budget)
				}
				fmt.Fprintln(tw, line)
			}
			for _, name := range run {
				row(all[name].name, results[name], looResults[name], 0)
			}
			tw.Flush()
			fmt.Fprintf(out, "\nby category, %s:\n", all[main].name)
			tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, strings.Replace(header, "configuration", "category", 1))
			names := map[int]string{1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain", 4: "4 single-hop"}
			for _, c := range results[main].Categories() {
				row(names[c], results[main], looResults[main], c)
			}
			row("all", results[main], looResults[main], 0)
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, name := range run {
				if looChoice[name] == nil {
					continue
				}
				fmt.Fprintf(out, "\nleave-one-out, %s: each conversation held out scored with the settings best on the other four\n", all[name].name)
				for _, cv := range convs {
					fmt.Fprintf(out, "  %s: %s\n", cv.ID, looChoice[name][cv.ID])
				}
			}
			if transitions != nil {
				fmt.Fprintf(out, "\ntiers: %d pages, %d segments created, %d pages joined a segment, %d segments evicted, %d promotions\n",
					transitions[tiers.PageAdded], transitions[tiers.SegmentCreated], transitions[tiers.SegmentMerged],
					transitions[tiers.SegmentEvicted], transitions[tiers.SegmentPromoted])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", "", "folder of LoCoMo conversation files (*.json) (default $"+eval.DataEnv+", else ../shared/data/locomo beside the checkout)")
	cmd.Flags().StringVar(&ks, "k", "5,10,25", "comma-separated k of recall@k")
	cmd.Flags().StringVar(&configs, "configs", "dense,bm25,fused,expansion,coaccess", "configurations to measure")
	cmd.Flags().StringVar(&fusion, "fusion", "", "rrf or weighted (default from config)")
	cmd.Flags().StringVar(&scope, "scope", "sona", "recall scope: sona (each conversation's own) or self (all)")
	cmd.Flags().BoolVar(&withTiers, "tiers", false, "add the MemoryOS tiers as a configuration")
	cmd.Flags().BoolVar(&loo, "loo", false, "add the leave-one-conversation-out figures: settings chosen on four conversations, scored on the fifth")
	cmd.Flags().IntVar(&misses, "misses", 0, "print up to this many questions whose evidence was missed in the top 10, per configuration")
	cmd.Flags().BoolVar(&g.json, "json", false, "print JSON")
	return cmd
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func parseKs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > 1000 {
			return nil, fmt.Errorf("--k wants comma-separated integers within 1..1000, got %q", s)
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// scoreLoCoMo asks every scored question of every conversation in its
// sona under one configuration.
func scoreLoCoMo(ctx context.Context, self *memory.Self, cfg config.Config, ing *eval.Ingested, ec evalConfig, ks []int, scope string, prog *progress, misses int, w io.Writer) (*eval.Accumulator, error) {
	text := map[string]string{}
	for _, cv := range ing.Convs {
		for _, s := range cv.Sessions {
			for _, t := range s.Turns {
				text[cv.ID+"/"+t.DiaID] = t.Speaker + ": " + t.Content()
			}
		}
	}
	acc := eval.NewAccumulator(ks)
	prog.start(ec.name, len(ing.Qs))
	// One question after the other: with learning, each recall sees what
	// the ones before it taught.
	for i, q := range ing.Qs {
		ranked, err := rank(ctx, self, ing, i, ec.paths, ks[len(ks)-1], scope)
		if err != nil {
			return nil, err
		}
		injected, err := inject(ctx, self, ing, i, ec.paths, scope, !ec.learn)
		if err != nil {
			return nil, err
		}
		acc.Add(q.Category, q.Evidence, ranked, injected)
		prog.add(1)
		if missed := missing(q.Evidence, ranked[:min(10, len(ranked))]); len(missed) > 0 && misses > 0 {
			misses--
			fmt.Fprintf(w, "\n[%s] cat %d: %s\n", ec.name, q.Category, q.Text)
			for _, m := range missed {
				at := fmt.Sprintf("not in the top %d", len(ranked))
				if j := slices.Index(ranked, m); j >= 0 {
					at = fmt.Sprintf("#%d", j+1)
				}
				fmt.Fprintf(w, "  missed %s (%s): %s\n", m, at, text[q.Conv+"/"+m])
			}
			for i, d := range ranked[:min(3, len(ranked))] {
				fmt.Fprintf(w, "  got #%d %s: %s\n", i+1, d, text[q.Conv+"/"+d])
			}
		}
	}
	if ec.learn {
		if err := self.Store().Barrier(ctx); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// rank returns the dia ids of question i's top k hits in rank order,
// before co-access and expansion, without a trace.
func rank(ctx context.Context, self *memory.Self, ing *eval.Ingested, i int, paths recall.Paths, k int, scope string) ([]string, error) {
	paths.Expand, paths.CoAccess = false, false
	rs, _, err := self.Recaller.Recall(ctx, recall.Query{Sona: ing.Sonas[ing.Qs[i].ConvAt], Text: ing.Qs[i].Text, K: k,
		Budget: 1 << 30, Scope: scope, Paths: &paths, Peek: true, Now: ing.AskedAt(i)})
	if err != nil {
		return nil, err
	}
	var ranked []string
	for _, r := range recall.Ranked(rs) {
		ranked = append(ranked, ing.Dia[r.CID.String()])
	}
	return ranked, nil
}

// inject returns the dia ids of what a step would inject for question i
// (default k and budget); peek false records the traces (learning).
func inject(ctx context.Context, self *memory.Self, ing *eval.Ingested, i int, paths recall.Paths, scope string, peek bool) ([]string, error) {
	rs, trace, err := self.Recaller.Recall(ctx, recall.Query{Sona: ing.Sonas[ing.Qs[i].ConvAt], Text: ing.Qs[i].Text, Scope: scope, Paths: &paths, Peek: peek,
		Now: ing.AskedAt(i)})
	if err != nil {
		return nil, err
	}
	trace.Submit(self.Store())
	var injected []string
	for _, r := range rs {
		injected = append(injected, ing.Dia[r.CID.String()])
	}
	return injected, nil
}

// pageLoCoMo makes each conversation's consecutive turn pairs its sona's
// dialogue pages and runs the tiers (offline model) until every page has
// settled. It counts the tier transitions by kind.
func pageLoCoMo(ctx context.Context, self *memory.Self, ing *eval.Ingested, prog *progress) (map[string]int, error) {
	var mu sync.Mutex
	transitions := map[string]int{}
	total := 0
	for _, ts := range ing.Turns {
		total += len(ts) / 2
	}
	prog.start("tiers", total)
	eg, ectx := errgroup.WithContext(ctx)
	for i, ts := range ing.Turns {
		eg.Go(func() error {
			for j := 0; j+1 < len(ts); j += 2 {
				if err := self.Tiers.PushPage(ectx, ing.Sonas[i], ts[j], ts[j+1]); err != nil {
					return err
				}
				// Settle page by page, as an agent's advances would.
				events, err := self.Tiers.Settle(ectx, ing.Sonas[i], tiers.Heuristic{})
				if err != nil {
					return err
				}
				mu.Lock()
				for _, e := range events {
					transitions[e.Kind]++
				}
				mu.Unlock()
				prog.add(1)
			}
			return nil
		})
	}
	return transitions, eg.Wait()
}

// scoreTiers asks every scored question of every conversation of the
// tiers: the retrieved MTM pages best first, then the STM pages newest
// first, each page's two turns in order.
func scoreTiers(ctx context.Context, self *memory.Self, cfg config.Config, ing *eval.Ingested, ec evalConfig, ks []int, _ string, prog *progress, _ int, _ io.Writer) (*eval.Accumulator, error) {
	acc := eval.NewAccumulator(ks)
	prog.start(ec.name, len(ing.Qs))
	for _, q := range ing.Qs {
		vecs, err := self.Embed(ctx, q.Text)
		if err != nil {
			return nil, err
		}
		tr, err := self.Tiers.Recall(ing.Sonas[q.ConvAt], q.Text, vecs[0], cfg.Tiers.TopK)
		if err != nil {
			return nil, err
		}
		var turns []string
		add := func(p *messages.Page) { turns = append(turns, ing.Dia[p.Q], ing.Dia[p.R]) }
		for _, p := range tr.MTM {
			add(p.Page)
		}
		for j := len(tr.STM) - 1; j >= 0; j-- {
			add(tr.STM[j].Page)
		}
		acc.Add(q.Category, q.Evidence, turns, turns)
		prog.add(1)
	}
	return acc, nil
}

// missing lists the evidence not in got.
func missing(evidence, got []string) []string {
	var out []string
	for _, e := range evidence {
		if !slices.Contains(got, e) {
			out = append(out, e)
		}
	}
	return out
}
