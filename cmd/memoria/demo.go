package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/messages"
)

// demoThemes are the conversations the demo's sonas have: statements that
// become memories and questions that recall them.
var demoThemes = []struct {
	persona string
	turns   []string
}{
	{"gardener", []string{
		"I planted six tomato seedlings in the east bed on Saturday.",
		"The east bed gets about six hours of direct sun each day.",
		"Basil grows next to the tomatoes to keep the aphids away.",
		"Which bed did I plant the tomatoes in?",
		"The compost pile needs turning every two weeks in summer.",
		"Slugs ate half of the lettuce in the shady corner last week.",
		"What keeps the aphids away from the tomatoes?",
		"I water the raised beds early in the morning before work.",
		"How often does the compost need turning?",
		"What happened to the lettuce?",
	}},
	{"traveller", []string{
		"My flight to Lisbon leaves on the ninth of June at seven in the morning.",
		"I booked a small hotel in Alfama with a view of the river.",
		"When does my flight to Lisbon leave?",
		"Maria recommended the custard tarts at a bakery in Belém.",
		"The train from Lisbon to Porto takes about three hours.",
		"Where is the hotel I booked?",
		"I want to visit the tile museum on the second day.",
		"Who recommended the custard tarts?",
		"How long is the train ride to Porto?",
		"What do I want to visit on the second day?",
	}},
	{"engineer", []string{
		"The ingest service fails when the queue holds more than ten thousand messages.",
		"We traced the memory leak to an unclosed HTTP response body in the poller.",
		"Why does the ingest service fail?",
		"The database migration is scheduled for Thursday night.",
		"Ana owns the on-call rotation this month.",
		"What caused the memory leak?",
		"Latency of the search endpoint dropped to forty milliseconds after the index change.",
		"When is the database migration?",
		"Who owns the on-call rotation?",
		"What happened to the latency of the search endpoint?",
	}},
	{"reader", []string{
		"I finished reading a novel about a lighthouse keeper on a remote island.",
		"The lighthouse keeper kept a diary of every ship that passed.",
		"My book club meets on the first Tuesday of each month.",
		"What was the novel I finished about?",
		"Next I want to read a history of the printing press.",
		"What did the lighthouse keeper keep a diary of?",
		"Jonas lent me a collection of short stories by a Chilean author.",
		"When does my book club meet?",
		"Who lent me the short stories?",
		"What do I want to read next?",
	}},
}

type demoReport struct {
	DataDir     string        `json:"data_dir"`
	Sonas       int           `json:"sonas"`
	Advances    int64         `json:"advances"`
	Memories    int64         `json:"memories"`
	ACTs        int64         `json:"acts"`
	Seconds     float64       `json:"seconds"`
	AdvancesPS  float64       `json:"advances_per_second"`
	Verified    bool          `json:"chains_verified"`
	Chains      []demoChain   `json:"chains"`
	RecallQuery string        `json:"recall_query"`
	Recall      []demoRecalls `json:"recall"`
}

type demoChain struct {
	Name   string `json:"name"`
	UUID   string `json:"uuid"`
	Length int64  `json:"length"`
	Head   string `json:"head"`
}

type demoRecalls struct {
	CID   string  `json:"cid"`
	Score float64 `json:"score"`
	Via   string  `json:"via"`
	Rank  int32   `json:"rank,omitempty"` // a hit's rank; absent for expansion
	Text  string  `json:"text"`
	// Collapsed counts the near-identical memories folded into this one.
	Collapsed int `json:"collapsed,omitempty"`
}

func demoCmd(g *globals) *cobra.Command {
	var perTheme, rounds int
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run many concurrent conversations through sona actors with the offline models and show what happened",
		Long: "On a fresh temporary data directory (or --data), create several sonas, run their conversations\n" +
			"concurrently through their actors with the built-in offline models, verify every ACT chain, and\n" +
			"show a recall with its scored subgraph.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if perTheme < 1 || rounds < 1 {
				return fmt.Errorf("--per-theme and --rounds must be at least 1")
			}
			removed := false
			if g.dataDir == "" && g.server == "" {
				dir, err := os.MkdirTemp("", "memoria-demo-")
				if err != nil {
					return err
				}
				g.dataDir = dir
				if !keep {
					removed = true
					defer os.RemoveAll(dir)
				}
			}
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			out := cmd.OutOrStdout()
			say := func(format string, args ...any) {
				if !g.json {
					fmt.Fprintf(out, format, args...)
				}
			}
			prog := newProgress(cmd.ErrOrStderr(), g.json)
			defer prog.done()
			rep, err := runDemo(ctx, c, perTheme, rounds, say, prog)
			if err != nil {
				return err
			}
			rep.DataDir = g.dataDir
			if g.server != "" {
				rep.DataDir = g.server
			}
			if g.json {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			if removed {
				say("\n(data directory %s is removed on exit; keep it with --keep or choose one with --data)\n", g.dataDir)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&perTheme, "per-theme", 4, "sonas per conversation theme (4 themes)")
	cmd.Flags().IntVar(&rounds, "rounds", 2, "times each sona goes through its conversation")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory")
	clientFlags(cmd, g)
	return cmd
}

// runDemo runs the demo; prog shows the turns and the chain checks as
// they go (on a terminal).
func runDemo(ctx context.Context, c *client.Client, perTheme, rounds int, say func(string, ...any), prog *progress) (*demoReport, error) {
	rep := &demoReport{}
	type sonaRun struct {
		rec   *messages.Sona
		turns []string
	}
	var runs []*sonaRun
	for _, th := range demoThemes {
		for i := 1; i <= perTheme; i++ {
			// A data directory or server that ran the demo before has these
			// names: the demo's sonas are its own, named by uuid from here.
			rec, err := c.CreateSonaWith(ctx, &messages.CreateSonaRequest{Name: fmt.Sprintf("%s-%d", th.persona, i), AllowDuplicate: true})
			if err != nil {
				return nil, err
			}
			runs = append(runs, &sonaRun{rec: rec, turns: th.turns})
		}
	}
	rep.Sonas = len(runs)
	total := len(runs) * rounds * len(demoThemes[0].turns)
	say("created %d sonas; running %d conversation turns concurrently through their actors…\n", len(runs), total)

	start := time.Now()
	prog.start("conversation turns", total)
	var done atomic.Int64
	var mu sync.Mutex
	last := map[string]*messages.ChatResponse{}
	eg, ectx := errgroup.WithContext(ctx)
	for _, r := range runs {
		eg.Go(func() error {
			for round := 0; round < rounds; round++ {
				for _, t := range r.turns {
					resp, err := c.Chat(ectx, r.rec.Uuid, &messages.ChatRequest{Content: t, Name: "user"})
					if err != nil {
						return fmt.Errorf("sona %s: %w", r.rec.Name, err)
					}
					done.Add(1)
					prog.add(1)
					mu.Lock()
					last[r.rec.Uuid] = resp
					mu.Unlock()
				}
			}
			return nil
		})
	}
	err := eg.Wait()
	prog.done()
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	rep.Advances = done.Load()
	rep.Seconds = took.Seconds()
	rep.AdvancesPS = float64(rep.Advances) / took.Seconds()
	say("%d advances in %s (%.0f advances/s, each one input and one response memory, durable)\n\n",
		rep.Advances, took.Round(time.Millisecond), rep.AdvancesPS)

	prog.start("verifying chains", len(runs))
	var lines []string
	for _, r := range runs {
		rec, err := c.Sona(ctx, r.rec.Uuid)
		if err != nil {
			return nil, err
		}
		n, err := verifyChain(ctx, c, rec)
		if err != nil {
			return nil, fmt.Errorf("chain of %s: %w", rec.Name, err)
		}
		rep.ACTs += n
		rep.Chains = append(rep.Chains, demoChain{Name: rec.Name, UUID: rec.Uuid, Length: rec.Length, Head: rec.GetHead()})
		lines = append(lines, fmt.Sprintf("  %-12s %s  length %3d  head %s\n", rec.Name, rec.Uuid, rec.Length, rec.GetHead()))
		prog.add(1)
	}
	prog.done()
	say("chains (each verified from its head back to seq 0 through the ACT blocks):\n%s", strings.Join(lines, ""))
	rep.Verified = true
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	rep.Memories = h.Memories
	say("all %d chains linear and complete: %d ACTs, %d memories\n\n", len(runs), rep.ACTs, rep.Memories)

	first := runs[0]
	rep.RecallQuery = "what keeps aphids away from my tomatoes?"
	if resp := last[first.rec.Uuid]; resp != nil {
		say("last exchange of %s:\n  input    %s\n  response %s\n  %s\n\n", first.rec.Name, resp.Input.Cid, resp.Response.Cid, resp.Response.Content)
	}
	rc, err := c.Recall(ctx, first.rec.Uuid, &messages.RecallRequest{Query: rep.RecallQuery, K: 5})
	if err != nil {
		return nil, err
	}
	say("recall in %s for %q (k 5: the five best hits, then what they lead to along edges):\n", first.rec.Name, rep.RecallQuery)
	printRecall(writerFunc(func(p []byte) (int, error) { say("%s", p); return len(p), nil }), rc, false)
	for _, m := range rc.Memories {
		rep.Recall = append(rep.Recall, demoRecalls{CID: m.Cid, Score: m.Score, Via: m.Via, Rank: m.GetRank(), Text: memoryText(m.Memory), Collapsed: len(m.Collapsed)})
	}
	return rep, nil
}

// verifyChain walks a sona's chain from its head through the ACT blocks
// (fetched as raw blocks and re-hashed), checking seq runs down to 0 with
// no gap, and returns the number of ACTs.
func verifyChain(ctx context.Context, c *client.Client, rec *messages.Sona) (int64, error) {
	if rec.Head == nil {
		if rec.Length != 0 {
			return 0, fmt.Errorf("no head but length %d", rec.Length)
		}
		return 0, nil
	}
	next, err := cid.Decode(*rec.Head)
	if err != nil {
		return 0, err
	}
	want := rec.Length - 1
	var n int64
	for {
		block, err := c.Block(ctx, next.String())
		if err != nil {
			return n, err
		}
		if got, err := memory.SumCID(memory.CodecDagCBOR, block); err != nil || got != next {
			return n, fmt.Errorf("block %s does not hash to its CID", next)
		}
		act, err := memory.DecodeAct(block)
		if err != nil {
			return n, err
		}
		if act.Seq != want || act.Sona != rec.Uuid {
			return n, fmt.Errorf("ACT %s has seq %d of sona %s, want seq %d of %s", next, act.Seq, act.Sona, want, rec.Uuid)
		}
		n++
		if act.Prev == nil {
			if act.Seq != 0 {
				return n, fmt.Errorf("chain ends at seq %d", act.Seq)
			}
			return n, nil
		}
		next, want = *act.Prev, want-1
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
