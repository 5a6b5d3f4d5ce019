package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/llm/providers"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/store"
)

func reindexCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the derived indexes of the data directory; re-embed it when the embedder changed",
		Long: "The full-text index is derived from the memories in the store: reindex deletes it and builds it\n" +
			"again. When the configured embedder (embedder.provider, model, dims) is not the one the store was\n" +
			"built with, every memory is first embedded again from the DAG — and the sona names, consensus\n" +
			"versions and tier statements with it — and the store takes the new embedder's identity. Progress\n" +
			"bars on a terminal. (The vector index is rebuilt at every start.) The server must not be running\n" +
			"on the data directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig("warn")
			if err != nil {
				return err
			}
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			emb, err := providers.Embedder(cfg, providers.Options{})
			if err != nil {
				return err
			}
			// Take the data directory's lock and read its embedder.
			so := store.OptionsOf(cfg.Store)
			so.Logger = log
			st, err := store.Open(filepath.Join(cfg.DataDir, "store"), so)
			if err != nil {
				return err
			}
			stored, err := st.EmbedderID()
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			if stored != "" && stored != emb.ID() {
				prog := newProgress(cmd.ErrOrStderr(), false)
				prog.start("re-embedding memories", 0)
				rep, err := memory.Reembed(cmd.Context(), cfg, emb, func(done, total int) {
					prog.mu.Lock()
					prog.tot = total
					prog.mu.Unlock()
					prog.set(done)
				})
				prog.done()
				if err != nil {
					return fmt.Errorf("re-embedding with %s: %w (the store still has %s; run reindex again)", emb.ID(), err, stored)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "re-embedded %d memories, %d sona names, %d tier records and %d consensus versions: %s → %s\n",
					rep.Memories, rep.Sonas, rep.Tiers, rep.Versions, rep.From, rep.To)
			}
			if err := os.RemoveAll(filepath.Join(cfg.DataDir, "text")); err != nil {
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
			if errors.Is(err, base.ErrEmbedderMismatch) {
				return fmt.Errorf("the store's embedder is still not the configured one: %w", err)
			}
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
