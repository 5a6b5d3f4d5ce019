package memory

import (
	"context"
	"path/filepath"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/llm"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/memory/transfer"
)

// Export and import live in memory/transfer (Self.Transfer); these
// aliases keep package memory's callers compiling during the move
// (issue 14).
type (
	ExportWriter  = transfer.ExportWriter
	ImportPlan    = transfer.ImportPlan
	ImportStep    = transfer.ImportStep
	ReembedReport = transfer.ReembedReport
)

// The export document's format and sections (see memory/transfer).
const ExportFormat = transfer.ExportFormat

var (
	ExportSections = transfer.ExportSections
	ExportedMemory = transfer.ExportedMemory
)

// Reembed opens the store under cfg.DataDir, which nothing else may hold,
// and moves it into emb's embedding space (transfer.Reembed).
func Reembed(ctx context.Context, cfg config.Config, emb llm.Embedder, progress func(done, total int)) (ReembedReport, error) {
	st, err := OpenStore(filepath.Join(cfg.DataDir, "store"), store.OptionsOf(cfg.Store))
	if err != nil {
		return ReembedReport{}, err
	}
	defer st.Close()
	return transfer.Reembed(ctx, st, records{}, emb, progress)
}
