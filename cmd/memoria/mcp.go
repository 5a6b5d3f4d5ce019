package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/app"
)

// mcpCmd serves MCP over stdio on the data directory: an MCP host (Claude
// Desktop, an IDE) starts it as a child process. stdout carries the
// protocol only; logs go to stderr.
func mcpCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve MCP over stdio (for MCP hosts such as Claude Desktop); logs go to stderr",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig("warn")
			if err != nil {
				return err
			}
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			a, err := app.Open(cmd.Context(), cfg, log, app.Options{})
			if err != nil {
				return err
			}
			defer a.Close()
			log.Info("memoria mcp serving on stdio", "data", cfg.DataDir)
			return a.API.ServeMCPStdio(cmd.Context())
		},
	}
}
