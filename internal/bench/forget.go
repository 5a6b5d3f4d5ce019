package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/messages"
)

// Forgetting a sona: a scratch server; per run, a sona of ForgetSize
// memories inserted over HTTP (64 at a time), then one POST /forget
// {"sona"} timed from request to answer. Each run forgets a new sona of
// the same store, which holds the runs before as tombstones.
const (
	ForgetSize = 10_000
	ForgetRuns = 3
)

func (r *run) forget(ctx context.Context) error {
	srv, stop, err := r.scratchServer(ctx, "forget")
	if err != nil {
		return err
	}
	defer stop()
	const clients = 64
	c, closeClient := loadgen.NewClient(srv.URL, r.o.Token, clients)
	defer closeClient()
	var next atomic.Int64
	noDedup := false
	for run := range ForgetRuns {
		sonas, err := createSonas(ctx, c, 1, fmt.Sprintf("forget-%d-%%d", run), nil)
		if err != nil {
			return err
		}
		phase := fmt.Sprintf("forget %d/%d: inserting", run+1, ForgetRuns)
		var done atomic.Int64
		eg, ectx := errgroup.WithContext(ctx)
		eg.SetLimit(clients)
		for range ForgetSize {
			eg.Go(func() error {
				i := int(next.Add(1) - 1)
				data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": fmt.Sprintf("%s (#%d)", r.o.Corpus.Text(i), i)})
				if err != nil {
					return err
				}
				// No dedup: the sona must hold ForgetSize memories.
				resp, err := c.Insert(ectx, &messages.InsertRequest{Sona: sonas[0], Data: data, Dedup: &noDedup})
				if err == nil && (resp.Deduplicated || resp.Existed) {
					err = fmt.Errorf("insert %d was folded into another memory", i)
				}
				if n := done.Add(1); n%500 == 0 {
					r.progress(phase, int(n), ForgetSize)
				}
				return err
			})
		}
		if err := eg.Wait(); err != nil {
			return fmt.Errorf("bench: forget: %w", err)
		}
		before, err := srv.Sample()
		if err != nil {
			return err
		}
		r.progress(fmt.Sprintf("forget %d/%d: forgetting", run+1, ForgetRuns), 0, 1)
		start := time.Now()
		rep, err := c.Forget(ctx, &messages.ForgetRequest{Sona: sonas[0], Reason: "bench"})
		took := time.Since(start)
		if err != nil {
			return fmt.Errorf("bench: forget: %w", err)
		}
		after, err := srv.Sample()
		if err != nil {
			return err
		}
		res := Result{Scenario: Forget, Name: "POST /forget {sona}", Path: "http", Sonas: 1, Clients: 1, Ops: 1,
			Seconds: took.Seconds(), PerSecond: float64(rep.Memories) / took.Seconds(),
			P50Ms: float64(took.Milliseconds()), P99Ms: float64(took.Milliseconds()), MaxMs: float64(took.Milliseconds()),
			CPUMsPerOp: float64((after.CPU - before.CPU).Milliseconds())}
		if h, err := r.client(srv).Health(ctx); err == nil {
			res.StoreSize = int(h.Memories)
		}
		if rep.Memories != ForgetSize {
			return fmt.Errorf("bench: forget: %d memories forgotten, want %d", rep.Memories, ForgetSize)
		}
		res.Note = fmt.Sprintf("run %d: %d memories forgotten in %d batches (server: %.2f s); per_second is memories a second",
			run+1, rep.Memories, rep.Batches, rep.TookSeconds)
		r.add(res)
	}
	return nil
}
