package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/messages"
)

func recallCmd(g *globals) *cobra.Command {
	var sona, scope, agent string
	var k, budget int
	var asOf int64
	var explain bool
	cmd := &cobra.Command{
		Use:   "recall --sona NAME QUERY",
		Short: "Show the memories a sona would recall for a query, with their scores",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, rec, release, err := g.connectSona(ctx, sona, false)
			if err != nil {
				return err
			}
			defer release()
			req := &messages.RecallRequest{Query: strings.Join(args, " "), K: int32(k), BudgetChars: int32(budget),
				Explain: explain, Scope: scope, AgentId: agent}
			if cmd.Flags().Changed("as-of") {
				req.AsOf = &asOf
			}
			resp, err := c.Recall(ctx, rec.Uuid, req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			printRecall(cmd.OutOrStdout(), resp, explain)
			return nil
		},
	}
	cmd.Flags().StringVar(&sona, "sona", "", "sona uuid or name")
	cmd.Flags().IntVarP(&k, "k", "k", 0, "memories before expansion (default from config)")
	cmd.Flags().IntVar(&budget, "budget", 0, "character budget (default from config)")
	cmd.Flags().BoolVar(&explain, "explain", false, "show every score component and the path each memory came by")
	cmd.Flags().Int64Var(&asOf, "as-of", 0, "time travel: an ACT seq of the sona, or unix seconds (≥ 1000000000)")
	cmd.Flags().StringVar(&scope, "scope", "", "self (every sona) or sona (this sona and the backbone); default from config")
	cmd.Flags().StringVar(&agent, "agent", "", "agent id (co-access is learnt per agent)")
	clientFlags(cmd, g)
	return cmd
}

// printRecall prints a recall result as a table, in its topological
// order; with explain, every score component.
func printRecall(w io.Writer, resp *messages.RecallResponse, explain bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if explain {
		fmt.Fprintln(tw, "#\tSCORE\tVIA\tDENSE\tBM25\tAFFIN\tMETRIC\tREL\tKIND\tRECENCY\tIMP\tSONA\tCOACC\tPATH\tCID\tMEMORY")
	} else {
		fmt.Fprintln(tw, "#\tSCORE\tVIA\tCID\tMEMORY")
	}
	for i, m := range resp.Memories {
		text := excerpt(memoryText(m.Memory), 56)
		if !explain {
			fmt.Fprintf(tw, "%d\t%.3f\t%s\t%s\t%s\n", i+1, m.Score, m.Via, shortCID(m.Cid), text)
			continue
		}
		e := m.GetExplain()
		fmt.Fprintf(tw, "%d\t%.3f\t%s\t%s\t%s\t%s\t%s\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%s\t%s\n", i+1, m.Score, m.Via,
			ranked(e.GetDense(), e.GetDenseRank()), ranked(e.GetBm25(), e.GetBm25Rank()), ranked(e.GetAffinity(), e.GetAffinityRank()), ranked(e.GetMetric(), e.GetMetricRank()),
			e.GetRelevance(), e.GetKindWeight(), e.GetRecency(), e.GetImportance(), e.GetSonaSimilarity(), e.GetCoaccess(),
			e.GetContributions().GetPath(), shortCID(m.Cid), text)
	}
	tw.Flush()
}

// ranked shows a path's evidence with its rank, or "-" when the path did
// not find the memory.
func ranked(v float64, rank int32) string {
	if rank == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f#%d", v, rank)
}

// memoryText renders a memory's data in one line for tables.
func memoryText(m *messages.Memory) string {
	f := m.GetData().GetFields()
	switch f["kind"].GetStringValue() {
	case "self":
		var parts []string
		for _, p := range f["parts"].GetListValue().GetValues() {
			parts = append(parts, p.GetStructValue().GetFields()["content"].GetStringValue())
		}
		return f["name"].GetStringValue() + ": " + strings.Join(parts, " ")
	case "other":
		if n := f["name"].GetStringValue(); n != "" {
			return n + ": " + f["content"].GetStringValue()
		}
		return f["content"].GetStringValue()
	case "text":
		return f["content"].GetStringValue()
	case "file":
		return "[file " + f["name"].GetStringValue() + "]"
	}
	return ""
}
