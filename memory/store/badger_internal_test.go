package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/memoria-ai/memoria/config"
)

// TestUnsyncedValueLogFailsTheCommit: Badger only logs a failed sync of
// its value log (valueLog.write, with this very format); the commit it
// happened in is refused, not acknowledged, and the next one goes on.
func TestUnsyncedValueLogFailsTheCommit(t *testing.T) {
	s, err := Open(t.TempDir(), OptionsOf(config.Default().Store))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	set := func() error {
		return s.Update(context.Background(), func(tx Tx) error {
			tx.Set([]byte("v/x"), []byte("vector"))
			return nil
		})
	}
	s.DB().Opts().Logger.Errorf("Error while curlf sync: %v\n", errors.New("sync /data/000001.vlog: input/output error"))
	if err := set(); err == nil || !strings.Contains(err.Error(), "the value log was not synced: sync /data/000001.vlog: input/output error") {
		t.Fatalf("commit after a failed sync of the value log: %v", err)
	}
	if err := set(); err != nil {
		t.Fatalf("the next commit: %v", err)
	}
}
