package main

import (
	"github.com/spf13/cobra"
)

func heartbeatCmd(g *globals) *cobra.Command {
	var dream bool
	cmd := &cobra.Command{
		Use:   "heartbeat [--dream]",
		Short: "Run one heartbeat tick now and print its report as JSON",
		Long: "Run one heartbeat tick now (POST /admin/heartbeat): a bounded sweep (TTL, link pruning, branch\n" +
			"statistics), a wake of the active sonas' mid-term tiers and the compression of oversized branches;\n" +
			"with --dream, dream mode too (insights from each sona's recent memories, cold branches folded).\n" +
			"Prints the tick report as JSON.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			rep, err := c.Heartbeat(ctx, dream)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), rep)
		},
	}
	cmd.Flags().BoolVar(&dream, "dream", false, "force dream mode")
	clientFlags(cmd, g)
	return cmd
}

func compactCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Sweep every memory, fold the cold branches now and print the report as JSON",
		Long: "Run POST /admin/compact: a whole sweep pass, then each cold branch (accessed per memory below\n" +
			"living.cold_branch_ratio of the mean) folded into one archive memory, its sources archived.\n" +
			"Prints the tick report as JSON.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			rep, err := c.Compact(ctx)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), rep)
		},
	}
	clientFlags(cmd, g)
	return cmd
}
