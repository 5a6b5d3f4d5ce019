package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/memory"
)

func reindexCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the derived indexes (full text) of the data directory from the store",
		Long: "The full-text index is derived from the memories in the store: reindex deletes it and builds it\n" +
			"again, with a progress bar on a terminal. (The vector index is rebuilt at every start.) The server\n" +
			"must not be running on the data directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig("warn")
			if err != nil {
				return err
			}
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			// Take the data directory's lock before touching its indexes.
			st, err := memory.OpenStore(filepath.Join(cfg.DataDir, "store"), memory.StoreOptions{Logger: log})
			if err != nil {
				return err
			}
			if err := os.RemoveAll(filepath.Join(cfg.DataDir, "text")); err != nil {
				st.Close()
				return err
			}
			if err := st.Close(); err != nil {
				return err
			}
			prog := newProgress(cmd.ErrOrStderr(), false)
			started := false
			a, err := app.Open(cmd.Context(), cfg, log, app.Options{Progress: func(stage string, done, total uint64) {
				if !started {
					prog.start(stage, int(total))
					started = true
				}
				prog.set(int(done))
			}})
			if err != nil {
				return err
			}
			prog.done()
			_, mems := a.Self.Counts()
			fmt.Fprintf(cmd.OutOrStdout(), "reindexed %d memories\n", mems)
			return a.Close()
		},
	}
}
