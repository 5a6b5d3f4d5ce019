package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/messages"
)

func recallCmd(g *globals) *cobra.Command {
	var sona string
	var k, budget int
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
			resp, err := c.Recall(ctx, rec.Uuid, &messages.RecallRequest{Query: strings.Join(args, " "), K: int32(k), BudgetChars: int32(budget)})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			printRecall(cmd.OutOrStdout(), resp)
			return nil
		},
	}
	cmd.Flags().StringVar(&sona, "sona", "", "sona uuid or name")
	cmd.Flags().IntVarP(&k, "k", "k", 0, "memories before expansion (default from config)")
	cmd.Flags().IntVar(&budget, "budget", 0, "character budget (default from config)")
	clientFlags(cmd, g)
	return cmd
}

// printRecall prints a recall result as a table, in its topological order.
func printRecall(w interface{ Write([]byte) (int, error) }, resp *messages.RecallResponse) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSCORE\tVIA\tREL\tDECAY\tIMP\tSONA\tCID\tMEMORY")
	for i, m := range resp.Memories {
		p := m.GetParts()
		fmt.Fprintf(tw, "%d\t%.3f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\n", i+1, m.Score, m.Via,
			p.GetRelevance(), p.GetDecay(), p.GetImportance(), p.GetSonaSimilarity(), shortCID(m.Cid), excerpt(memoryText(m.Memory), 60))
	}
	tw.Flush()
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
