package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/internal/loadgen"
	"github.com/memoria-ai/memoria/messages"
)

// The sized store is built the way users build one: the corpus's texts
// inserted through POST /memories by buildClients concurrent clients, text
// i into sona i mod StoreSonas, so it holds what inserts make beside the
// blocks — the similar-memory associations, each sona's similarity
// distribution (its emergent thresholds), the EUMAS evaluations — which an
// import of a generated export would lack. It grows to each size of a run
// in turn and is kept (dir/store, described by dir/store.json), so a later
// run with the same corpus, seed, binary and server arguments continues it
// instead of building it again.

// buildClients insert concurrently while the store grows.
const buildClients = 64

// manifestFormat names the layout of store.json.
const manifestFormat = "memoria-bench-store/1"

type manifest struct {
	Format     string   `json:"format"`
	Corpus     string   `json:"corpus"`
	Seed       int64    `json:"seed"`
	Binary     string   `json:"binary_sha256"`
	ServerArgs []string `json:"server_args"`
	// Sonas are the sonas' uuids: text i is in Sonas[i mod len(Sonas)].
	Sonas []string `json:"sonas"`
	// Tried texts 0 … Tried-1 were inserted; Skipped of them the server
	// did not store (it held the memory already, or reinforced a near
	// duplicate instead).
	Tried    int   `json:"tried"`
	Skipped  []int `json:"skipped"`
	Memories int   `json:"memories"`
	// BuildSeconds is the time spent inserting, over all runs.
	BuildSeconds float64 `json:"build_seconds"`
}

type store struct {
	r       *run
	dir     string
	man     manifest
	skipped map[int]bool
	srv     *loadgen.Server
	// unsure: texts before it (from man.Tried on) may be stored already
	// (openStore).
	unsure int
	// texts are the hashes of the texts whose memories the store holds
	// (growTo): a text inserted again into another sona is the same
	// memory, content-addressed — the store gains a sona for it, not a
	// memory — and a corpus may repeat a text (LoCoMo's short turns).
	texts    map[uint64]bool
	textSeed maphash.Seed
}

// newMemory records that the store holds text's memory and tells whether
// that memory is new to the store, not the memory of the same text
// inserted before into another sona. Not safe for concurrent use.
func (s *store) newMemory(text string) bool {
	h := maphash.String(s.textSeed, text)
	if s.texts[h] {
		return false
	}
	s.texts[h] = true
	return true
}

// knowTexts fills texts, the first time, with the texts inserted so far
// that the store holds.
func (s *store) knowTexts() {
	if s.texts != nil {
		return
	}
	s.texts, s.textSeed = map[uint64]bool{}, maphash.MakeSeed()
	for i := range s.man.Tried {
		if !s.skipped[i] {
			s.newMemory(s.r.o.Corpus.Text(i))
		}
	}
}

func (r *run) manifestPath() string { return filepath.Join(r.o.Dir, "store.json") }

// openStore starts the server on the kept store when there is one, or
// on a new one. A kept store is never deleted: one that does not fit this
// run (another corpus, seed, server arguments or number of sonas, more
// memories than size, or not what its store.json says) is an error that
// says what to do. One grown by another binary is continued — an A/B of
// two binaries measures both on the same store — and the report says so.
func (r *run) openStore(ctx context.Context, size int) (*store, error) {
	sum, err := fileSHA256(r.o.Binary)
	if err != nil {
		return nil, err
	}
	want := manifest{Format: manifestFormat, Corpus: r.o.Corpus.Name(), Seed: r.o.Seed, Binary: sum, ServerArgs: r.o.ServerArgs}
	s := &store{r: r, dir: filepath.Join(r.o.Dir, "store"), skipped: map[int]bool{}}
	have, err := readManifest(r.manifestPath())
	if err != nil {
		return nil, err
	}
	if have == nil {
		if entries, err := os.ReadDir(s.dir); err == nil && len(entries) > 0 {
			return nil, fmt.Errorf("%w: %s holds a store but %s is missing (not a bench store, or a run stopped while it made the sonas): remove the directory, or give another --data",
				ErrOptions, s.dir, r.manifestPath())
		}
		return s, s.create(ctx, want)
	}
	if err := have.fits(want, r.o.StoreSonas, size); err != nil {
		return nil, fmt.Errorf("%w: the kept store in %s %v", ErrOptions, s.dir, err)
	}
	if s.srv, err = r.startServer(ctx, s.dir); err != nil {
		return nil, err
	}
	h, err := s.client().Health(ctx)
	// A growth stopped between two saves of store.json (killed, or
	// failing) leaves up to saveEvery memories more than it says: the
	// texts from where it left off are inserted again, and one the store
	// holds already counts as stored (unsure).
	if err != nil || h.Memories < int64(have.Memories) || h.Memories > int64(have.Memories+saveEvery) {
		s.srv.Kill()
		held := fmt.Sprint(err)
		if err == nil {
			held = fmt.Sprintf("%d memories", h.Memories)
		}
		return nil, fmt.Errorf("%w: the kept store in %s does not hold what %s says (%d memories; the server: %s): remove both to build it again, or give another --data",
			ErrOptions, s.dir, r.manifestPath(), have.Memories, held)
	}
	s.man = *have
	for _, i := range have.Skipped {
		s.skipped[i] = true
	}
	r.note("store: continued the kept store of %d memories in %s", have.Memories, s.dir)
	if have.Binary != want.Binary {
		r.note("store: grown so far by another binary (sha256 %.12s…), continued with this one (%.12s…)", have.Binary, want.Binary)
	}
	if extra := h.Memories - int64(have.Memories); extra > 0 {
		s.unsure = have.Tried + saveEvery
		r.note("store: it holds %d memories more than store.json says (a growth stopped between saves); texts %d to %d already stored count as stored",
			extra, have.Tried, s.unsure-1)
	}
	return s, nil
}

// create starts the server on a new store of the sonas the run asks.
func (s *store) create(ctx context.Context, want manifest) error {
	var err error
	if s.srv, err = s.r.startServer(ctx, s.dir); err != nil {
		return err
	}
	s.man = want
	c := s.client()
	if s.man.Sonas, err = createSonas(ctx, c, s.r.o.StoreSonas, "bench-%03d", func(n int) { s.r.progress("store: sonas", n, s.r.o.StoreSonas) }); err != nil {
		s.srv.Kill()
		return err
	}
	return s.save()
}

// readManifest reads a kept store's store.json: nil when there is none.
func readManifest(path string) (*manifest, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := &manifest{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("%w: %s: %v (remove it and the store beside it to build one again)", ErrOptions, path, err)
	}
	return m, nil
}

// fits says why a kept store described by m cannot serve a run that asks
// want, storeSonas sonas and a first size of size, or nil. The binary
// that grew it does not matter.
func (m *manifest) fits(want manifest, storeSonas, size int) error {
	switch {
	case m.Format != want.Format:
		return fmt.Errorf("is of format %q, this binary's is %q: remove it, or give another --data", m.Format, want.Format)
	case m.Corpus != want.Corpus || m.Seed != want.Seed:
		return fmt.Errorf("holds the %s corpus of seed %d, this run asks %s of seed %d: give --locomo and --seed as it was built, or another --data",
			m.Corpus, m.Seed, want.Corpus, want.Seed)
	case !slices.Equal(m.ServerArgs, want.ServerArgs):
		return fmt.Errorf("was grown with the server arguments %q, this run has %q: give the same --config, or another --data", m.ServerArgs, want.ServerArgs)
	case len(m.Sonas) != storeSonas:
		return fmt.Errorf("spreads its memories over %d sonas, this run asks %d (--store-sonas)", len(m.Sonas), storeSonas)
	case m.Memories > size:
		return fmt.Errorf("holds %d memories, more than the smallest size asked (%s): a kept store only grows — ask sizes from %s, or give another --data",
			m.Memories, FormatSize(size), FormatSize(m.Memories))
	}
	return nil
}

// client is a client of the store's server for single requests.
func (s *store) client() *client.Client { return s.r.client(s.srv) }

func (s *store) save() error {
	b, err := json.MarshalIndent(s.man, "", "  ")
	if err != nil {
		return err
	}
	return writeWhole(s.r.manifestPath(), b)
}

// writeWhole writes b to path whole or not at all: a file beside it,
// renamed over it.
func writeWhole(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// close stops the server (SIGTERM).
func (s *store) close() error {
	if s.srv == nil {
		return nil
	}
	err := s.srv.Stop(5 * time.Minute)
	s.srv = nil
	return err
}

// sona is the uuid of the sona holding text i.
func (s *store) sona(i int) string { return s.man.Sonas[i%len(s.man.Sonas)] }

// pick draws a text the store holds.
func (s *store) pick(rng *rand.Rand) int {
	for {
		if i := rng.IntN(s.man.Tried); !s.skipped[i] {
			return i
		}
	}
}

// grow makes the store hold at least size memories, reporting each step
// of its growth (at 10k, 20k, 50k, 100k, … and size) as a build result,
// then waits until the server is idle: the measurements start on a warm
// server whose background work is done.
func (r *run) grow(ctx context.Context, size int) error {
	if r.store == nil {
		s, err := r.openStore(ctx, size)
		if err != nil {
			return err
		}
		r.store = s
	}
	s := r.store
	grown := s.man.Memories < size
	if grown {
		c, closeClient := loadgen.NewClient(s.srv.URL, r.o.Token, buildClients)
		defer closeClient()
		for _, step := range steps(s.man.Memories, size) {
			if err := s.growTo(ctx, c, step, size); err != nil {
				return err
			}
		}
	}
	wrote := time.Now()
	idle, err := r.waitIdle(ctx, s.srv, fmt.Sprintf("store: %s, until idle", FormatSize(s.man.Memories)))
	if err != nil {
		return err
	}
	if grown {
		last := &r.rep.Results[len(r.rep.Results)-1]
		last.Note += fmt.Sprintf("; the server was idle %.0f s after the last insert", max(0, idle.Sub(wrote).Seconds()))
	}
	return nil
}

// steps are the sizes between from and to (exclusive, inclusive) at which
// the store's growth is reported: 1, 2, 5 × powers of ten, and to.
func steps(from, to int) []int {
	var out []int
	for p := 10_000; p < to; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			if n := m * p; n > from && n < to {
				out = append(out, n)
			}
		}
	}
	return append(out, to)
}

// growTo inserts texts until the store holds target memories.
func (s *store) growTo(ctx context.Context, c *client.Client, target, size int) error {
	r := s.r
	phase := fmt.Sprintf("store: growing to %s", FormatSize(size))
	start := time.Now()
	var rep *loadgen.Report
	var stored atomic.Int64
	var mu sync.Mutex
	var skipped []int
	folded, joined := 0, 0
	s.knowTexts()
	// added counts an insert answered as new to its sona: a new memory,
	// unless the store held the text's memory already, in another sona.
	added := func(text string) {
		mu.Lock()
		isNew := s.newMemory(text)
		if !isNew {
			joined++
		}
		mu.Unlock()
		if !isNew {
			return
		}
		if n := stored.Add(1); n%256 == 0 {
			r.progress(phase, s.man.Memories+int(n), size)
		}
	}
	saved := start
	next := atomic.Int64{}
	next.Store(int64(s.man.Tried))
	for s.man.Memories < target {
		need := int64(min(target-s.man.Memories, saveEvery))
		req := func(ctx context.Context, _ int, _ *rand.Rand) (loadgen.Op, error) {
			i := int(next.Add(1) - 1)
			text := r.o.Corpus.Text(i)
			resp, retried, err := insertRetried(ctx, c, s.sona(i), text)
			switch {
			case err != nil: // the growth fails: see part.Errors
			case (retried || i < s.unsure) && resp.Existed:
				// An earlier attempt stored it and its answer was lost
				// (a timeout on a loaded machine): it counts as stored.
				added(text)
			case resp.Existed || resp.Deduplicated:
				mu.Lock()
				skipped = append(skipped, i)
				mu.Unlock()
			default:
				added(text)
			}
			return loadgen.OpInsert, err
		}
		w := loadgen.Window{Clients: buildClients, Duration: 24 * time.Hour, Requests: need, Seed: r.o.Seed + int64(s.man.Tried),
			Server: s.srv.Sample}
		part := loadgen.Drive(ctx, w, req)
		if err := ctx.Err(); err != nil {
			return err
		}
		if part.Errors > 0 {
			return fmt.Errorf("bench: growing the store: %d of %d inserts failed (%v)", part.Errors, part.Requests, part.ErrorSamples)
		}
		s.man.Tried = int(next.Load())
		s.man.Memories += int(stored.Swap(0))
		rep = mergeLoad(rep, part)
		mu.Lock()
		for _, i := range skipped {
			s.skipped[i] = true
		}
		s.man.Skipped = append(s.man.Skipped, skipped...)
		slices.Sort(s.man.Skipped)
		folded += len(skipped)
		skipped = skipped[:0]
		mu.Unlock()
		// Saved every saveEvery texts: a run stopped (or failing) while
		// the store grows keeps what was acknowledged up to the last save
		// only if the store then holds exactly that, so a long growth is
		// saved in parts.
		s.man.BuildSeconds += time.Since(saved).Seconds()
		saved = time.Now()
		if err := s.save(); err != nil {
			return err
		}
	}
	took := time.Since(start)
	h, err := s.client().Health(ctx)
	if err != nil {
		return err
	}
	if h.Memories != int64(s.man.Memories) {
		return fmt.Errorf("bench: the store holds %d memories, %d were acknowledged", h.Memories, s.man.Memories)
	}
	res := fromLoad(Build, rep)
	res.Name, res.StoreSize, res.Sonas = "POST /memories (growing the store)", s.man.Memories, len(s.man.Sonas)
	res.Note = fmt.Sprintf("%d clients into %d sonas; %d of the %d inserts were folded into a near-duplicate, %d were of a text another sona holds", buildClients,
		len(s.man.Sonas), folded, rep.Requests, joined)
	bs := took.Seconds()
	res.BuildSeconds = &bs
	r.add(res)
	return nil
}

// saveEvery is how many memories the store grows by between saves of
// store.json.
const saveEvery = 20_000

// insertRetried inserts a text, trying again (twice at most) when an
// attempt fails with the context still live: on a loaded machine an insert
// can outlast the server's request timeout and be stored all the same, so
// retried says a later attempt answered (an Existed answer then may be the
// earlier attempt's memory).
func insertRetried(ctx context.Context, c *client.Client, sona, text string) (resp *messages.InsertResponse, retried bool, err error) {
	for attempt := range 3 {
		if resp, err = insertText(ctx, c, sona, text); err == nil || ctx.Err() != nil {
			return resp, attempt > 0, err
		}
	}
	return resp, true, err
}

// mergeLoad adds a later window's single route to an earlier one's
// (latency percentiles of the parts are weighed by their requests: the
// last top-up of a step is small).
func mergeLoad(a, b *loadgen.Report) *loadgen.Report {
	if a == nil {
		return b
	}
	if b.Requests > a.Requests {
		a.Routes = b.Routes
	}
	a.Seconds += b.Seconds
	a.Requests += b.Requests
	a.Errors += b.Errors
	a.PerSecond = float64(a.Requests) / a.Seconds
	a.ServerCPUSeconds += b.ServerCPUSeconds
	a.ServerCPUPerRequestMs = 1000 * a.ServerCPUSeconds / float64(a.Requests)
	a.PeakRSS = max(a.PeakRSS, b.PeakRSS)
	if len(b.Memory) > 0 {
		a.Memory = append(a.Memory[:len(a.Memory):len(a.Memory)], b.Memory[len(b.Memory)-1])
	}
	return a
}

func insertText(ctx context.Context, c *client.Client, sona, text string) (*messages.InsertResponse, error) {
	data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": text})
	if err != nil {
		return nil, err
	}
	return c.Insert(ctx, &messages.InsertRequest{Sona: sona, Data: data})
}

// createSonas creates n sonas named by format over HTTP, 16 at a time.
func createSonas(ctx context.Context, c *client.Client, n int, format string, done func(int)) ([]string, error) {
	out := make([]string, n)
	var made atomic.Int64
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(16)
	for i := range out {
		eg.Go(func() error {
			s, err := c.CreateSona(ectx, fmt.Sprintf(format, i))
			if err != nil {
				return fmt.Errorf("bench: create sona: %w", err)
			}
			out[i] = s.Uuid
			if m := made.Add(1); done != nil && (m%64 == 0 || int(m) == n) {
				done(int(m))
			}
			return nil
		})
	}
	return out, eg.Wait()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
