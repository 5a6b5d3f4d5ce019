package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/messages"
)

func heartbeatCmd(g *globals) *cobra.Command {
	var dream bool
	cmd := tickCmd(g, &cobra.Command{
		Use:   "heartbeat [--dream]",
		Short: "Run one heartbeat tick now and print its report as JSON",
		Long: "Run one heartbeat tick now (POST /admin/heartbeat): a bounded sweep (TTL, link pruning, branch\n" +
			"statistics), a wake of the active sonas' mid-term tiers and the compression of oversized branches;\n" +
			"with --dream, dream mode too (insights from each sona's recent memories, cold branches folded).\n" +
			"Prints the tick report as JSON.",
	}, func(ctx context.Context, c *client.Client) (*messages.TickReport, error) {
		return c.Heartbeat(ctx, dream)
	})
	cmd.Flags().BoolVar(&dream, "dream", false, "force dream mode")
	return cmd
}

func compactCmd(g *globals) *cobra.Command {
	return tickCmd(g, &cobra.Command{
		Use:   "compact",
		Short: "Sweep every memory, fold the cold branches now and print the report as JSON",
		Long: "Run POST /admin/compact: a whole sweep pass, then each cold branch (accessed per memory below\n" +
			"living.cold_branch_ratio of the mean) folded into one archive memory, its sources archived.\n" +
			"Prints the tick report as JSON.",
	}, func(ctx context.Context, c *client.Client) (*messages.TickReport, error) { return c.Compact(ctx) })
}

// tickCmd completes cmd into a command that runs one heartbeat call and
// prints its tick report as JSON.
func tickCmd(g *globals, cmd *cobra.Command, call func(context.Context, *client.Client) (*messages.TickReport, error)) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		c, release, err := g.connect(ctx)
		if err != nil {
			return err
		}
		defer release()
		rep, err := call(ctx, c)
		if err != nil {
			return err
		}
		return printJSON(cmd.OutOrStdout(), rep)
	}
	clientFlags(cmd, g)
	return cmd
}
