package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/messages"
)

func sonasCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sonas",
		Short: "List sonas",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			items, err := allPages(func(cursor string) ([]*messages.Sona, string, error) {
				page, err := c.ListSonas(ctx, "", cursor, 1000)
				return page.GetItems(), page.GetNextCursor(), err
			})
			if err != nil {
				return err
			}
			all := &messages.ListSonasResponse{Items: items}
			if g.json {
				return printJSON(cmd.OutOrStdout(), all)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "UUID\tNAME\tLENGTH\tHEAD")
			for _, s := range all.Items {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", s.Uuid, s.Name, s.Length, s.GetHead())
			}
			return tw.Flush()
		},
	}
	clientFlags(cmd, g)
	var duplicate bool
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a sona and print its uuid",
		Long: "Create a sona and print its uuid. Names are unique: a name another sona has is refused,\n" +
			"unless --allow-duplicate (the name then names neither sona: use their uuids).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, release, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer release()
			s, err := c.CreateSonaWith(ctx, &messages.CreateSonaRequest{Name: args[0], AllowDuplicate: duplicate})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Uuid)
			return nil
		},
	}
	clientFlags(create, g)
	create.Flags().BoolVar(&duplicate, "allow-duplicate", false, "create the sona even when another has this name")
	cmd.AddCommand(create)
	return cmd
}
