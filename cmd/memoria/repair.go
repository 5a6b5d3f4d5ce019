package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/llm/providers"
	"github.com/memoria-ai/memoria/memory"
	"github.com/memoria-ai/memoria/memory/base"
)

func repairCmd(g *globals) *cobra.Command {
	var acceptLoss bool
	cmd := &cobra.Command{
		Use:   "repair",
		Short: "Check the data directory; with --accept-loss, open a store that lost acknowledged writes",
		Long: "repair opens the data directory with every check the server makes at start: each Badger table\n" +
			"against its checksums (whatever store.verify_tables says), the write-ahead logs, the acknowledged\n" +
			"mark (the store must hold every write it acknowledged) and the full-text index (rebuilt from the\n" +
			"store when damaged). It says what it finds.\n\n" +
			"A store whose write-ahead log was damaged lost acknowledged writes, and refuses to serve. With\n" +
			"--accept-loss it is opened anyway: what was lost is logged and printed, and what remains becomes\n" +
			"the acknowledged state, so that serve opens it again (the full-text index is rebuilt when it\n" +
			"held more than the store). A damaged table cannot be repaired: restore the data directory from a\n" +
			"backup or an export. The server must not be running on the data directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig("warn")
			if err != nil {
				return err
			}
			cfg.Store.VerifyTables = true
			log, sync := app.NewLogger(cfg.Log, os.Stderr)
			defer sync()
			emb, err := providers.Embedder(cfg, providers.Options{})
			if err != nil {
				return err
			}
			self, err := memory.Open(cmd.Context(), memory.Options{Config: cfg, Embedder: emb, Logger: log, AcceptLoss: acceptLoss})
			if errors.Is(err, base.ErrCorrupt) {
				return fmt.Errorf("%w (repair cannot mend this: restore the data directory from a backup or an export)", err)
			}
			if err != nil {
				return err // a lost write says how to go on
			}
			sonas, mems := self.Counts()
			if lost := self.Store().AcceptedLoss(); lost != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "accepted the loss: %s\nthe store now holds %d sonas and %d memories\n", lost, sonas, mems)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "the store is sound: %d sonas, %d memories\n", sonas, mems)
			}
			return self.Close()
		},
	}
	cmd.Flags().BoolVar(&acceptLoss, "accept-loss", false, "open a store that lost acknowledged writes: log what is gone and make what remains the acknowledged state")
	return cmd
}
