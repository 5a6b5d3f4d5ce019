package main

import (
	"github.com/spf13/cobra"
)

func tiersCmd(g *globals) *cobra.Command {
	var sona string
	cmd := &cobra.Command{
		Use:   "tiers --sona NAME",
		Short: "Print a sona's MemoryOS tiers (STM pages, MTM segments, persona) as JSON",
		Long: "Print a sona's MemoryOS tiers as GET /sona/{uuid}/tiers returns them: the short-term pages,\n" +
			"the mid-term segments hottest first with their pages and heat, the work on its way between\n" +
			"the tiers, and the long-term persona.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, rec, release, err := g.connectSona(ctx, sona, false)
			if err != nil {
				return err
			}
			defer release()
			v, err := c.Tiers(ctx, rec.Uuid)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), v)
		},
	}
	cmd.Flags().StringVar(&sona, "sona", "", "sona uuid or name")
	clientFlags(cmd, g)
	return cmd
}
