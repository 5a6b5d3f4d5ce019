package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/memoria-ai/memoria/memory/base"
	memchain "github.com/memoria-ai/memoria/memory/chain"
	"github.com/memoria-ai/memoria/memory/transfer"
	"github.com/memoria-ai/memoria/messages"
)

// An import that brings a backbone other than the cluster's is refused
// when it is planned, before anything is written, though the member's
// store records no backbone until it first holds the cluster's; the
// cluster's own backbone is still imported.
func TestImportOfAnotherBackboneIsRefused(t *testing.T) {
	c := startMember(t, startEtcd(t))
	ctx := context.Background()
	if got := c.self.Backbone.Sona(); got != "" {
		t.Fatalf("the member holds backbone %s before anything is written to it", got)
	}
	exportOf := func(id string, backbone bool) *messages.Export {
		return &messages.Export{Format: transfer.ExportFormat, Sonas: []*messages.ExportSona{
			{Uuid: id, Name: memchain.BackboneName, CreatedAt: 1, Backbone: backbone},
		}}
	}
	other := uuid.NewString()
	for _, tc := range []struct {
		what string
		doc  *messages.Export
	}{
		{"another backbone", exportOf(other, true)},
		{"the cluster's backbone's uuid as a plain sona", exportOf(c.backbone.Uuid, false)},
	} {
		if _, err := c.self.Transfer.PlanImport(ctx, tc.doc); !errors.Is(err, base.ErrChainConflict) {
			t.Fatalf("import of %s: %v, not a chain conflict", tc.what, err)
		}
	}
	if _, err := c.self.Sonas.Get(other); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("the refused import's sona: %v", err)
	}
	if got := c.self.Backbone.Sona(); got != "" {
		t.Fatalf("the refused import made %s this member's backbone", got)
	}
	if _, err := c.self.Transfer.PlanImport(ctx, exportOf(c.backbone.Uuid, true)); err != nil {
		t.Fatalf("import of the cluster's backbone: %v", err)
	}
}
