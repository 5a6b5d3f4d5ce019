package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/config"
)

func configCmd(g *globals) *cobra.Command {
	var env bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration as YAML (defaults, file, environment, flags)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if env {
				fmt.Fprintln(cmd.OutOrStdout(), strings.Join(append([]string{config.EnvConfigFile}, config.EnvNames()...), "\n"))
				return nil
			}
			cfg, err := g.loadConfig("")
			if err != nil {
				return err
			}
			out, err := cfg.YAML()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&env, "env", false, "list the environment variables the configuration reads")
	return cmd
}
