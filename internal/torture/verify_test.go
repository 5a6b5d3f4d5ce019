package torture

import (
	"context"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/memory/model"
)

// TestVerifyFindsLosses checks the checker: against a real server, the
// writes it made verify clean, and acknowledgements the store never got
// are reported as losses and a missed recall.
func TestVerifyFindsLosses(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Evaluation.Mode = "off"
	cfg.Log.Level = "warn"
	log, sync := app.NewLogger(cfg.Log, nil)
	defer sync()
	a, err := app.Open(ctx, cfg, log, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	hs := httptest.NewServer(a.API)
	defer hs.Close()
	c := client.New(hs.URL, nil)

	tr := &run{o: Options{ChatShare: 0.5, RecallChecks: 4, IndexDeadline: time.Minute}, rng: rand.New(rand.NewPCG(1, 0)), rep: &Report{}}
	for _, name := range []string{"a", "b"} {
		s, err := c.CreateSona(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		tr.sonas = append(tr.sonas, s.Uuid)
	}
	rng := rand.New(rand.NewPCG(2, 0))
	for i := range 20 {
		if err := tr.write(ctx, c, rng, "t"+string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.verify(ctx, c); err != nil {
		t.Fatal(err)
	}
	if tr.rep.Losses != 0 || tr.rep.Violations != 0 || tr.rep.ACTs < 20 {
		t.Fatalf("clean store: %+v", tr.rep)
	}

	// Acknowledgements of memories the store does not have.
	ghost, err := model.SumCID(model.CodecDagCBOR, []byte("never written"))
	if err != nil {
		t.Fatal(err)
	}
	seq := tr.rep.ACTs + 5
	tr.ledger.addInsert(ackInsert{sona: tr.sonas[0], seq: &seq, cid: ghost.String(), text: "zoqufeza never written"})
	real := tr.ledger.inserts[0]
	wrongSeq := int64(99)
	tr.ledger.addInsert(ackInsert{sona: real.sona, seq: &wrongSeq, cid: real.cid, text: real.text})
	tr.ledger.addChat(ackChat{sona: tr.sonas[1], input: ghost.String(), response: ghost.String()})
	if err := tr.verify(ctx, c); err != nil {
		t.Fatal(err)
	}
	// The ghost insert (not in its chain, not served), the wrong seq, the
	// ghost chat (not in its chain, input and response not served).
	if tr.rep.Losses != 6 || tr.rep.Violations == 0 {
		t.Fatalf("losses %d, violations %d: %s", tr.rep.Losses, tr.rep.Violations, strings.Join(tr.rep.Problems, "\n"))
	}
	if !strings.Contains(strings.Join(tr.rep.Problems, "\n"), "recall in sona") {
		t.Fatalf("the missed recall of the ghost insert is not reported: %s", strings.Join(tr.rep.Problems, "\n"))
	}
}
