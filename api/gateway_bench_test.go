package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
)

// benchApp opens an app with a chain of n ACTs (buildChain).
func benchApp(b *testing.B, n int) (*app.App, *chainDAG) {
	b.Helper()
	cfg := config.Default()
	cfg.DataDir = b.TempDir()
	quiet(&cfg)
	noEvaluation(&cfg)
	a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return a, buildChain(b, a.Self, n)
}

// BenchmarkGatewayPath resolves /ipfs/{head}/prev/prev/… through the whole
// handler (a CAR of the path's blocks, dag-scope=block): the cost should
// grow linearly with the segments.
//
//	go test -run '^$' -bench GatewayPath -benchtime 20x -count 3 ./api
func BenchmarkGatewayPath(b *testing.B) {
	a, d := benchApp(b, 1001)
	for _, segs := range []int{100, 500, 1000} {
		path := "/ipfs/" + d.head().String() + prevPath(segs) + "?format=car&dag-scope=block"
		b.Run(fmt.Sprintf("segments=%d", segs), func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				a.API.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*segs), "ns/segment")
		})
	}
}

// BenchmarkGatewayCAR streams the CAR of a whole chain of 20,000 ACTs
// (40,001 blocks) from its head.
//
//	go test -run '^$' -bench GatewayCAR -benchtime 5x -count 3 ./api
func BenchmarkGatewayCAR(b *testing.B) {
	const n = 20000
	a, d := benchApp(b, n)
	path := "/ipfs/" + d.head().String() + "?format=car"
	b.ReportAllocs()
	for b.Loop() {
		w := &discardWriter{header: http.Header{}}
		a.API.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.code != 200 || w.n == 0 {
			b.Fatalf("%d, %d bytes", w.code, w.n)
		}
	}
	b.ReportMetric(float64(b.N*len(d.all()))/b.Elapsed().Seconds(), "blocks/s")
}

// discardWriter is a ResponseWriter that keeps nothing of the body, so
// allocations are the server's own.
type discardWriter struct {
	header http.Header
	code   int
	n      int64
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	w.n += int64(len(p))
	return len(p), nil
}
