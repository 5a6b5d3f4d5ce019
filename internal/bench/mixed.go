package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/messages"
)

// mixed measures recalls, inserts and chats in one window, as a server of
// many agents sees them — most of them recalling while others write: on a
// fresh store of size memories (inserted as the sized store's are, 64
// clients over StoreSonas sonas), each of the Mixed clients recalls as
// recall's do while one more inserts new texts and another chats (the
// server's model), each one request after the other. A result for each
// route: the inserts' and the chats' latency is what a write waits while
// recalls keep the server busy.
func (r *run) mixed(ctx context.Context, size int) error {
	srv, stop, err := r.scratchServer(ctx, "mixed")
	if err != nil {
		return err
	}
	defer stop()
	most := max(buildClients, slices.Max(r.o.clients(Mixed))+2)
	c, closeClient := loadgen.NewClient(srv.URL, r.o.Token, most)
	defer closeClient()
	sonas, err := createSonas(ctx, c, r.o.StoreSonas, "mixed-%03d", nil)
	if err != nil {
		return err
	}
	var next atomic.Int64 // the next text to insert
	insert := func(ctx context.Context, _ int, _ *rand.Rand) (loadgen.Op, error) {
		i := int(next.Add(1) - 1)
		_, err := insertText(ctx, c, sonas[i%len(sonas)], r.o.Corpus.Text(i))
		return loadgen.OpInsert, err
	}
	phase := fmt.Sprintf("mixed: %s memories", FormatSize(size))
	fill := r.window(ctx, phase, loadgen.Window{Clients: buildClients, Duration: 24 * time.Hour, Requests: int64(size),
		Seed: r.o.Seed, Server: srv.Sample}, insert)
	if err := ctx.Err(); err != nil {
		return err
	}
	if fill.Errors > 0 {
		return fmt.Errorf("bench: filling the mixed scenario's store: %d of %d inserts failed (%v)", fill.Errors, fill.Requests, fill.ErrorSamples)
	}
	if _, err := r.waitIdle(ctx, srv, phase+", until idle"); err != nil {
		return err
	}
	held := size // texts 0 … size-1 were inserted (some maybe folded)
	for _, clients := range r.o.clients(Mixed) {
		var hits atomic.Int64
		req := func(ctx context.Context, i int, rng *rand.Rand) (loadgen.Op, error) {
			switch i {
			case clients: // the writer
				return insert(ctx, i, rng)
			case clients + 1: // the chatter
				_, err := c.Chat(ctx, sonas[0], &messages.ChatRequest{Content: r.o.Corpus.Text(int(next.Add(1) - 1)), Name: "user"})
				return loadgen.OpChat, err
			}
			t := rng.IntN(held)
			return recallText(ctx, c, sonas[t%len(sonas)], r.o.Corpus.Text(t), rng, &hits)
		}
		all, rep := r.measureLoad(ctx, Mixed, fmt.Sprintf("mixed: %s, %d clients recalling, 1 inserting, 1 chatting", FormatSize(size), clients), srv,
			loadgen.Window{Clients: clients + 2, Duration: r.o.Duration, Requests: r.o.Requests, Seed: r.o.Seed, Server: srv.Sample}, req)
		h, err := r.client(srv).Health(ctx)
		if err != nil {
			return err
		}
		for _, rt := range rep.Routes {
			res := all
			res.withRoute(rt)
			res.Ops, res.Errors, res.PerSecond = rt.Requests, rt.Errors, rt.PerSecond
			res.StoreSize, res.Sonas = int(h.Memories), len(sonas)
			res.Clients = 1
			if rt.Op == loadgen.OpRecall {
				res.Clients = clients
				if rt.Requests > 0 {
					hr := float64(hits.Load()) / float64(rt.Requests)
					res.HitRate = &hr
				}
			}
			res.Note = fmt.Sprintf("%d clients recalling, 1 inserting and 1 chatting in one window on a fresh store of %d memories over %d sonas; CPU/op is the window's, over all three",
				clients, size, len(sonas))
			r.add(res)
		}
	}
	return nil
}
