package forget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/internal/clock"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/meta"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

// ErrNotAllowed means a request named a CID its principal may not forget
// — or one stored nowhere, which a limited principal is told the same
// way, so that the answer says nothing of other sonas.
var ErrNotAllowed = errors.New("memory: not this principal's to forget")

// The rules a block is selected by (Tombstone.rule).
const (
	RuleCID      = "cid"      // named in the request
	RuleSelector = "selector" // matched its sona, label, agent or time range
	RuleDerived  = "derived"  // its edges reach a memory derived_from names
	RuleSummary  = "summary"  // an insight or a merge that restated a forgotten memory
	RuleFile     = "file"     // the content of a forgotten file memory
)

// Kinds of forgotten blocks (Tombstone.kind).
const (
	KindMemory = "memory"
	KindFile   = "file"
)

// DefaultBatch is how many blocks one transaction forgets: small enough
// for one Badger transaction with the rows they take along, large enough
// that a sona of 10,000 memories takes a few.
const DefaultBatch = 1000

// Env is what forgetting needs of the rest of memory/ (wired by package
// memory, as transfer.Env is).
type Env interface {
	// Meta reads a memory's metadata (base.ErrNotFound when c is no
	// stored memory).
	Meta(r store.Reader, c cid.Cid) (*messages.MemoryMeta, error)
	// Memory reads and decodes memory c.
	Memory(r store.Reader, c cid.Cid) (*model.Memory, error)
	// ScanMeta calls fn with every stored memory and its metadata.
	ScanMeta(r store.Reader, fn func(c cid.Cid, m *messages.MemoryMeta) error) error
	// Chain calls fn with the memories of sona's chain, in seq order.
	Chain(r store.Reader, sona string, fn func(c cid.Cid) error) error
	// Parts are the subsystems' shares of an excision, run in order in
	// each batch's transaction before the blocks, metadata and
	// embeddings are deleted (they may still read them).
	Parts() []Part
	// Purge makes the forgotten bytes leave the files: a pass of the
	// store's garbage collection and a compaction of the full-text index.
	Purge(ctx context.Context) (store.GCReport, error)
}

// A Part is a subsystem's share of an excision (perkeep's populators, as
// chain.Contribution is an append's): in tx, it removes the rows it keeps
// about the batch's forgotten blocks, and registers with tx.OnCommit what
// its in-memory state must drop once the batch is durable.
type Part func(tx store.Tx, b *Batch) error

// Gone is a memory of a batch.
type Gone struct {
	CID  cid.Cid
	Meta *messages.MemoryMeta
}

// Batch is what one transaction forgets.
type Batch struct {
	Memories []Gone
	Files    []cid.Cid
	// Sonas the memories belonged to, sorted.
	Sonas []string
	// Now is the time of the tombstones (unix seconds).
	Now  int64
	gone map[cid.Cid]bool // the whole request's selection
	tx   store.Tx
}

// IsGone reports whether c is forgotten: by this request (in this batch
// or another), or before it.
func (b *Batch) IsGone(c cid.Cid) bool {
	if b.gone[c] {
		return true
	}
	ok, err := b.tx.Has(store.TombstoneKey(c))
	return err == nil && ok
}

// Selected reports whether the request forgets ref (a CID's string
// form), without looking for older tombstones: for scans of rows that
// were cleaned when those were forgotten.
func (b *Batch) Selected(ref string) bool {
	c, err := cid.Decode(ref)
	return err == nil && b.gone[c]
}

// IsGoneRef is IsGone for a CID in its string form ("" is not gone).
func (b *Batch) IsGoneRef(ref string) bool {
	c, err := cid.Decode(ref)
	return err == nil && b.IsGone(c)
}

// CIDs are the batch's memories' CIDs.
func (b *Batch) CIDs() []cid.Cid {
	out := make([]cid.Cid, len(b.Memories))
	for i, g := range b.Memories {
		out[i] = g.CID
	}
	return out
}

// Selector says what to forget: the union of CIDs, the closure of
// DerivedFrom, and — when any of Sona, Label, Agent, Since, Until is set —
// the memories that match every one set.
type Selector struct {
	CIDs []cid.Cid
	// Sona is a sona's uuid.
	Sona string
	// Label is "key" (any value) or "key=value".
	Label string
	Agent string
	// Since and Until bound created_at (unix seconds): since ≤ t < until.
	Since, Until *int64
	DerivedFrom  []cid.Cid
}

func (s Selector) filters() bool {
	return s.Sona != "" || s.Label != "" || s.Agent != "" || s.Since != nil || s.Until != nil
}

// Empty reports whether the selector selects nothing at all.
func (s Selector) Empty() bool {
	return len(s.CIDs) == 0 && len(s.DerivedFrom) == 0 && !s.filters()
}

// Request is one forget.
type Request struct {
	Selector
	Reason string
	By     string
	DryRun bool
	// Limit, when set, limits the request to the memories all of whose
	// sonas it allows, never the backbone's: a named CID it refuses is
	// ErrNotAllowed, as is one stored nowhere; selected ones it refuses
	// are left out. The summaries of what goes go with it whatever their
	// sonas.
	Limit *Limit
	// Tolerant skips the named CIDs stored nowhere here (Report.Missing
	// lists them) instead of failing: a cluster member planning its part
	// of a forget another member took.
	Tolerant bool
	// Files allows naming raw blocks (admin only).
	Files bool
	// Batch is how many blocks a transaction forgets (DefaultBatch).
	Batch int
	// Progress, when set, is told after each durable batch how many
	// blocks are forgotten of how many.
	Progress func(done, total int)
}

// Limit is a limited principal's reach, as a value (it travels between
// cluster members): the memories all of whose sonas are in Sonas (nil:
// any sona), never the backbone's.
type Limit struct {
	Sonas []string
}

// May reports whether the limit allows forgetting a memory of sonas.
func (l *Limit) May(sonas []string, backbone bool) bool {
	if l == nil {
		return true
	}
	if backbone || len(sonas) == 0 {
		return false
	}
	return l.Sonas == nil || !slices.ContainsFunc(sonas, func(id string) bool { return !slices.Contains(l.Sonas, id) })
}

// Report is what a forget did (or, dry, would do).
type Report struct {
	// Missing are the named CIDs stored nowhere here (Request.Tolerant).
	Missing  []cid.Cid
	DryRun   bool
	Memories int
	Files    int
	// Already counts the CIDs named that were forgotten before.
	Already int
	Batches int
	Took    time.Duration
	// Tombstones written (or that would be), in the order selected.
	Tombstones []*messages.Tombstone
}

// Forgetter excises memories from the store.
type Forgetter struct {
	st    *store.Store
	env   Env
	clock clock.Clock
	extra []Part // AddPart's
}

// AddPart adds p to the parts every batch runs, after the env's: a
// subsystem outside memory/ that keeps rows about memories (a cluster
// member's staged appends). Call it before the first forget.
func (f *Forgetter) AddPart(p Part) { f.extra = append(f.extra, p) }

// New is the forgetter of the self kept in st.
func New(st *store.Store, env Env, clk clock.Clock) *Forgetter {
	return &Forgetter{st: st, env: env, clock: clock.Or(clk)}
}

// Forget plans the request on one snapshot — checking everything it
// names first, so that a bad request writes nothing — and then, unless it
// is a dry run, excises the selection in batches, each one durable
// operation: all of a batch or none of it is forgotten, whatever stops
// the process.
func (f *Forgetter) Forget(ctx context.Context, req Request) (Report, error) {
	start := f.clock.Now()
	rep := Report{DryRun: req.DryRun}
	if req.Selector.Empty() {
		return rep, fmt.Errorf("%w: name what to forget: cids, a sona, a label, an agent, a time range or derived_from", base.ErrInvalid)
	}
	if req.Since != nil && req.Until != nil && *req.Until <= *req.Since {
		return rep, fmt.Errorf("%w: until (%d) must be after since (%d)", base.ErrInvalid, *req.Until, *req.Since)
	}
	if err := validLabel(req.Label); err != nil {
		return rep, err
	}
	var p *plan
	if err := f.st.View(func(r store.Reader) error {
		var err error
		p, err = f.plan(ctx, r, req)
		return err
	}); err != nil {
		return rep, err
	}
	rep.Already, rep.Missing = p.already, p.missing
	p.sign(req.Reason, req.By)
	err := f.run(ctx, p, req.DryRun, req.Batch, req.Progress, &rep)
	rep.Took = f.clock.Since(start)
	return rep, err
}

// run writes p's tombstones (times, reason and principal as they are, or
// now when unset) into rep and, unless dry, excises p in batches of size.
func (f *Forgetter) run(ctx context.Context, p *plan, dry bool, size int, progress func(done, total int), rep *Report) error {
	now := f.clock.Now().Unix()
	for _, s := range p.order {
		t := p.tombs[s]
		if t.ForgottenAt == 0 {
			t.ForgottenAt = now
		}
		rep.Tombstones = append(rep.Tombstones, t)
		if t.Kind == KindFile {
			rep.Files++
		} else {
			rep.Memories++
		}
	}
	if dry {
		return nil
	}
	if size <= 0 {
		size = DefaultBatch
	}
	for from := 0; from < len(p.order); {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(size, len(p.order)-from)
		err := f.st.Update(ctx, f.excise(p, p.order[from:from+n]))
		if errors.Is(err, base.ErrTooLarge) && n > 1 {
			size = max(1, n/2) // the rows this batch takes along do not fit one transaction
			continue
		}
		if err != nil {
			return fmt.Errorf("memory: forget: after %d of %d blocks: %w", from, len(p.order), err)
		}
		from += n
		rep.Batches++
		if progress != nil {
			progress(from, len(p.order))
		}
	}
	return nil
}

// Apply forgets the blocks tombs name, as another member of a cluster
// forgot them: the memories and files stored here are excised, the
// others only get their tombstone (so that nothing fetched later brings
// them back), then the summaries held here of anything that goes, and
// the content of the file memories. Tombstones kept here already are
// left as they are. The report lists the tombstones written here.
func (f *Forgetter) Apply(ctx context.Context, tombs []*messages.Tombstone) (Report, error) {
	start := f.clock.Now()
	var rep Report
	var p *plan
	err := f.st.View(func(r store.Reader) error {
		p = &plan{tombs: map[cid.Cid]*messages.Tombstone{}, gone: map[cid.Cid]bool{}}
		for _, in := range tombs {
			c, err := cid.Decode(in.Cid)
			if err != nil {
				return fmt.Errorf("%w: tombstone of %q: %v", base.ErrInvalid, in.Cid, err)
			}
			if ok, err := r.Has(store.TombstoneKey(c)); err != nil {
				return err
			} else if ok {
				p.already++
				continue
			}
			if p.gone[c] {
				continue
			}
			t := proto.Clone(in).(*messages.Tombstone)
			if m, err := f.env.Meta(r, c); err == nil {
				t.Kind, t.Sonas, t.Backbone = KindMemory, slices.Clone(m.Sonas), m.Backbone
			} else if !errors.Is(err, base.ErrNotFound) {
				return err
			}
			p.gone[c] = true
			p.order = append(p.order, c)
			p.tombs[c] = t
		}
		if err := f.derived(ctx, r, p, nil, nil); err != nil {
			return err
		}
		return f.files(r, p)
	})
	if err != nil {
		return rep, err
	}
	rep.Already = p.already
	if len(tombs) > 0 {
		p.sign(tombs[0].Reason, tombs[0].By) // the summaries found here
	}
	err = f.run(ctx, p, false, 0, nil, &rep)
	rep.Took = f.clock.Since(start)
	return rep, err
}

// Purge runs the env's purge (see Env.Purge).
func (f *Forgetter) Purge(ctx context.Context) (store.GCReport, error) { return f.env.Purge(ctx) }

func validLabel(l string) error {
	if l == "" {
		return nil
	}
	k, _, _ := strings.Cut(l, "=")
	if strings.TrimSpace(k) == "" {
		return fmt.Errorf("%w: label %q: write key or key=value", base.ErrInvalid, l)
	}
	return nil
}

// plan is what a request selects, in order.
type plan struct {
	order   []cid.Cid // memories and files, in the order selected
	tombs   map[cid.Cid]*messages.Tombstone
	gone    map[cid.Cid]bool
	already int
	missing []cid.Cid // named, stored nowhere here (Request.Tolerant)
}

// sign puts reason and principal on the tombstones that lack them.
func (p *plan) sign(reason, by string) {
	for _, t := range p.tombs {
		if t.By == "" && t.Reason == "" {
			t.Reason, t.By = reason, by
		}
	}
}

func (p *plan) add(c cid.Cid, kind, rule string, m *messages.MemoryMeta) bool {
	if p.gone[c] {
		return false
	}
	p.gone[c] = true
	p.order = append(p.order, c)
	t := &messages.Tombstone{Cid: c.String(), Kind: kind, Rule: rule}
	if m != nil {
		t.Sonas, t.Backbone = slices.Clone(m.Sonas), m.Backbone
	}
	p.tombs[c] = t
	return true
}

func (f *Forgetter) plan(ctx context.Context, r store.Reader, req Request) (*plan, error) {
	p := &plan{tombs: map[cid.Cid]*messages.Tombstone{}, gone: map[cid.Cid]bool{}}
	may := func(m *messages.MemoryMeta) bool { return req.Limit.May(m.Sonas, m.Backbone) }
	// Named CIDs and the roots of derived_from, all checked first.
	named := func(c cid.Cid, rule string) (bool, error) {
		if t, err := ReadTombstone(r, c); err == nil {
			if !req.Limit.May(t.Sonas, t.Backbone) {
				return false, notAllowed(c)
			}
			p.already++
			return false, nil
		} else if !errors.Is(err, base.ErrNotFound) {
			return false, err
		}
		m, err := f.env.Meta(r, c)
		switch {
		case err == nil:
			if !may(m) {
				return false, notAllowed(c)
			}
			p.add(c, KindMemory, rule, m)
			return true, nil
		case !errors.Is(err, base.ErrNotFound):
			return false, err
		}
		if c.Prefix().Codec == cid.Raw && req.Files {
			if ok, err := r.Has(store.BlockKey(c)); err != nil {
				return false, err
			} else if ok {
				p.add(c, KindFile, rule, nil)
				return false, nil
			}
		}
		if req.Tolerant && (req.Files || c.Prefix().Codec != cid.Raw) {
			p.missing = append(p.missing, c)
			return false, nil
		}
		if req.Limit != nil || (c.Prefix().Codec == cid.Raw && !req.Files) {
			return false, notAllowed(c)
		}
		return false, fmt.Errorf("%w: %s is no stored memory or file (an ACT is kept: forget the memory it names)", base.ErrNotFound, c)
	}
	for _, c := range req.CIDs {
		if _, err := named(c, RuleCID); err != nil {
			return nil, err
		}
	}
	var roots []cid.Cid
	for _, c := range req.DerivedFrom {
		ok, err := named(c, RuleCID)
		if err != nil {
			return nil, err
		}
		if ok || p.gone[c] {
			roots = append(roots, c)
		}
	}
	if req.filters() {
		if err := f.selectBy(r, req, p, may); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := f.derived(ctx, r, p, roots, may); err != nil {
		return nil, err
	}
	return p, f.files(r, p)
}

func notAllowed(c cid.Cid) error {
	return fmt.Errorf("%w: %s is not a memory of a sona it may forget", ErrNotAllowed, c)
}

// selectBy adds the memories that match every filter of req.
func (f *Forgetter) selectBy(r store.Reader, req Request, p *plan, may func(*messages.MemoryMeta) bool) error {
	key, value, hasValue := strings.Cut(req.Label, "=")
	match := func(m *messages.MemoryMeta) bool {
		if req.Label != "" {
			v, ok := m.Labels[key]
			if !ok || hasValue && v != value {
				return false
			}
		}
		switch {
		case req.Agent != "" && m.AgentId != req.Agent,
			req.Since != nil && m.CreatedAt < *req.Since,
			req.Until != nil && m.CreatedAt >= *req.Until:
			return false
		}
		return may(m)
	}
	if req.Sona == "" {
		return f.env.ScanMeta(r, func(c cid.Cid, m *messages.MemoryMeta) error {
			if match(m) {
				p.add(c, KindMemory, RuleSelector, m)
			}
			return nil
		})
	}
	return f.env.Chain(r, req.Sona, func(c cid.Cid) error {
		m, err := f.env.Meta(r, c)
		if errors.Is(err, base.ErrNotFound) {
			return nil // forgotten before
		}
		if err != nil {
			return err
		}
		if match(m) {
			p.add(c, KindMemory, RuleSelector, m)
		}
		return nil
	})
}

// derived adds what the reverse edges reach from roots (those the
// request may forget), and then, whatever their sonas, every insight
// and merge whose edges reach a memory that goes: a summary that
// restated a forgotten memory is forgotten too. It reads every memory's
// block when there are roots, else only the summaries'.
func (f *Forgetter) derived(ctx context.Context, r store.Reader, p *plan, roots []cid.Cid, may func(*messages.MemoryMeta) bool) error {
	type node struct {
		meta    *messages.MemoryMeta
		summary bool
	}
	nodes := map[cid.Cid]node{}
	reverse := map[cid.Cid][]cid.Cid{} // target → memories whose edges name it
	err := f.env.ScanMeta(r, func(c cid.Cid, m *messages.MemoryMeta) error {
		summary := m.Insight != nil || m.Labels[labelMerge] != ""
		if len(roots) == 0 && !summary {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		mem, err := f.env.Memory(r, c)
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		nodes[c] = node{meta: m, summary: summary}
		for _, e := range mem.Edges {
			reverse[e.Target] = append(reverse[e.Target], c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Reverse edges from the roots, as far as the request may go.
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, d := range reverse[c] {
			if n := nodes[d]; n.meta != nil && !p.gone[d] && may(n.meta) {
				p.add(d, KindMemory, RuleDerived, n.meta)
				queue = append(queue, d)
			}
		}
	}
	// Summaries of anything that goes, to a fixed point (a summary of
	// summaries).
	for changed := true; changed; {
		changed = false
		for target, froms := range reverse {
			if !p.gone[target] {
				continue
			}
			for _, d := range froms {
				if n := nodes[d]; n.summary && !p.gone[d] {
					p.add(d, KindMemory, RuleSummary, n.meta)
					changed = true
				}
			}
		}
	}
	return nil
}

// labelMerge is the label a heartbeat merge (compression, cold branch)
// puts on the memory it writes (living.LabelMerge; not imported, to keep
// this package below living).
const labelMerge = "merge"

// files adds the content block of every file memory that goes.
func (f *Forgetter) files(r store.Reader, p *plan) error {
	for _, c := range slices.Clone(p.order) {
		if p.tombs[c].Kind != KindMemory {
			continue
		}
		m, err := f.env.Memory(r, c)
		if errors.Is(err, base.ErrNotFound) {
			continue // not held here (Apply): only its tombstone is written
		}
		if err != nil {
			return err
		}
		if m.Data.File == nil || p.gone[m.Data.File.Content] {
			continue
		}
		content := m.Data.File.Content
		if ok, err := r.Has(store.BlockKey(content)); err != nil {
			return err
		} else if ok {
			p.add(content, KindFile, RuleFile, nil)
		}
	}
	return nil
}

// excise is the operation that forgets the blocks batch of p: the parts
// first, then the tombstones, and the blocks, metadata and embeddings
// deleted.
func (f *Forgetter) excise(p *plan, batch []cid.Cid) store.Op {
	return func(tx store.Tx) error {
		b := &Batch{Now: p.tombs[batch[0]].ForgottenAt, gone: p.gone, tx: tx}
		sonas := map[string]bool{}
		var todo []cid.Cid
		for _, c := range batch {
			if ok, err := tx.Has(store.TombstoneKey(c)); err != nil {
				return err
			} else if ok {
				continue // forgotten meanwhile
			}
			todo = append(todo, c)
			if p.tombs[c].Kind == KindFile {
				b.Files = append(b.Files, c)
				continue
			}
			m, err := meta.Read(tx, c)
			if errors.Is(err, base.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			b.Memories = append(b.Memories, Gone{CID: c, Meta: m})
			for _, s := range m.Sonas {
				sonas[s] = true
			}
		}
		for s := range sonas {
			b.Sonas = append(b.Sonas, s)
		}
		slices.Sort(b.Sonas)
		for _, part := range append(f.env.Parts(), f.extra...) {
			if err := part(tx, b); err != nil {
				return err
			}
		}
		for _, c := range todo {
			t := p.tombs[c]
			if err := store.SetProto(tx, store.TombstoneKey(c), t); err != nil {
				return err
			}
			tx.Delete(store.BlockKey(c))
			if t.Kind == KindMemory {
				tx.Delete(meta.Key(c))
				tx.Delete(meta.HotKey(c))
				tx.Delete(meta.VectorKey(c))
			}
		}
		return nil
	}
}

// ReadTombstone reads the tombstone of block c (base.ErrNotFound when c
// is not forgotten).
func ReadTombstone(r store.Reader, c cid.Cid) (*messages.Tombstone, error) {
	t := &messages.Tombstone{}
	ok, err := store.GetProto(r, store.TombstoneKey(c), t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: no tombstone for %s", base.ErrNotFound, c)
	}
	return t, nil
}

// Tombstones pages the tombstones in key order (multihash): cursor is
// the last CID of the previous page ("" from the start).
func Tombstones(r store.Reader, cursor string, limit int, fn func(t *messages.Tombstone) error) (next string, err error) {
	seek := store.PrefixTombstone
	if cursor != "" {
		c, err := cid.Decode(cursor)
		if err != nil {
			return "", fmt.Errorf("%w: cursor %q", base.ErrInvalid, cursor)
		}
		seek = append(store.TombstoneKey(c), 0)
	}
	it := r.NewIterator(store.IterOptions{Prefix: store.PrefixTombstone, PrefetchValues: true})
	defer it.Close()
	n := 0
	for it.Seek(seek); it.Valid(); it.Next() {
		if limit > 0 && n == limit {
			return next, nil
		}
		t := &messages.Tombstone{}
		if err := it.Item().Value(func(v []byte) error { return proto.Unmarshal(v, t) }); err != nil {
			return "", fmt.Errorf("%w: tombstone: %v", base.ErrCorrupt, err)
		}
		if err := fn(t); err != nil {
			return "", err
		}
		n++
		next = t.Cid
	}
	return "", nil
}
