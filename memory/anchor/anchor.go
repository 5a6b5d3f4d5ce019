package anchor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/proto"

	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/memory/base"
	"github.com/memoria-ai/memoria/memory/model"
	"github.com/memoria-ai/memoria/memory/store"
	"github.com/memoria-ai/memoria/messages"
)

var (
	// KeyPrefix is the anchor list's key space: y/ seq (8 bytes BE).
	KeyPrefix = []byte("y/")
	// KeyCursor holds the seq of the last anchor the sink took (8 bytes BE).
	KeyCursor = []byte("x/anchored")
)

// Key orders anchors by the insertion-log position of their memory.
func Key(logSeq uint64) []byte { return base.Join(KeyPrefix, base.U64(logSeq)) }

// Anchor is a significant memory.
type Anchor struct {
	// Seq is the memory's insertion-log position: the anchor list's order
	// and its cursor.
	Seq      uint64
	CID      cid.Cid
	Category string
	// Time is the unix second of the append that made the anchor.
	Time int64
	// Sona is the uuid of the sona the memory was appended to.
	Sona string
}

// Proto returns the anchor as its API message.
func (a Anchor) Proto() *messages.Anchor {
	return &messages.Anchor{Cid: a.CID.String(), Category: a.Category, Time: a.Time, Sona: a.Sona}
}

// Sink hears new anchors, after they are durable and off the
// acknowledgement path of the append that made them. Delivery is at least
// once and in list order; a sink identifies an anchor by its CID. A
// failing sink is retried later; the anchor list keeps the anchor either
// way.
type Sink interface {
	Anchor(ctx context.Context, a Anchor) error
}

// Rules are the compiled significance rules of config.Anchoring.
type Rules []rule

type rule struct {
	category string
	words    []string // lower case
	kinds    []string
	labels   map[string]string
	data     []string
}

// CompileRules prepares the rules of a validated configuration.
func CompileRules(c config.Anchoring) Rules {
	out := make(Rules, len(c.Rules))
	for i, r := range c.Rules {
		words := make([]string, 0, len(r.Words))
		for _, w := range r.Words {
			words = append(words, strings.ToLower(strings.Join(strings.Fields(w), " ")))
		}
		out[i] = rule{category: r.Category, words: words, kinds: r.Kinds, labels: r.Labels, data: r.Data}
	}
	return out
}

// Match returns the category of the first rule that m, with its
// metadata, satisfies.
func (rs Rules) Match(m *model.Memory, meta *messages.MemoryMeta) (string, bool) {
	var text string // lower-cased on first use
	for _, r := range rs {
		if len(r.kinds) > 0 && !slices.Contains(r.kinds, meta.GetKind()) {
			continue
		}
		if len(r.data) > 0 && !slices.Contains(r.data, m.Data.Kind()) {
			continue
		}
		if !labelsMatch(r.labels, meta.GetLabels()) {
			continue
		}
		if len(r.words) > 0 {
			if text == "" {
				text = strings.ToLower(m.Text())
			}
			if !slices.ContainsFunc(r.words, func(w string) bool { return containsPhrase(text, w) }) {
				continue
			}
		}
		return r.category, true
	}
	return "", false
}

func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || (v != "*" && !strings.EqualFold(got, v)) {
			return false
		}
	}
	return true
}

// containsPhrase reports whether phrase occurs in text as whole words:
// neither preceded nor followed by a letter or digit. Runs of white space
// in text match the single spaces of phrase.
func containsPhrase(text, phrase string) bool {
	if phrase == "" {
		return false
	}
	words := strings.Fields(phrase)
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], words[0])
		if j < 0 {
			return false
		}
		start := i + j
		if end, ok := matchWords(text, start, words); ok && boundaryBefore(text, start) && boundaryAfter(text, end) {
			return true
		}
		_, size := utf8.DecodeRuneInString(text[start:])
		i = start + size
	}
	return false
}

// matchWords matches words at text[start:], separated by white space.
func matchWords(text string, start int, words []string) (int, bool) {
	pos := start
	for k, w := range words {
		if k > 0 {
			n := pos
			for n < len(text) {
				r, size := utf8.DecodeRuneInString(text[n:])
				if !unicode.IsSpace(r) {
					break
				}
				n += size
			}
			if n == pos {
				return 0, false
			}
			pos = n
		}
		if !strings.HasPrefix(text[pos:], w) {
			return 0, false
		}
		pos += len(w)
	}
	return pos, true
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func boundaryBefore(text string, i int) bool {
	if i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return !isWordRune(r)
}

func boundaryAfter(text string, i int) bool {
	if i >= len(text) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return !isWordRune(r)
}

// List is the anchor list in the store: it judges new memories by the
// rules, writes their anchors in the append's transaction, and tells a
// listener when commits add anchors (it follows the store's commit
// events, whoever wrote the anchors: an append or an import).
type List struct {
	store store.Committer
	view  store.Viewer
	rules Rules
	hook  atomic.Pointer[func()]
}

// NewList is the anchor list of st, judging by the rules of c. It
// follows st's commits (the hook's reader must see them): make it before
// the first write.
func NewList(st interface {
	store.Committer
	store.Viewer
	Follow(func(store.Event))
}, c config.Anchoring) *List {
	l := &List{store: st, view: st, rules: CompileRules(c)}
	st.Follow(func(e store.Event) {
		for _, k := range e.Keys {
			if strings.HasPrefix(k, string(KeyPrefix)) {
				l.added()
				return
			}
		}
	})
	return l
}

// Judge decides, inside an append, whether a new memory is an anchor,
// and of what category. The heartbeat's own memories (merges and
// insights restate others) and imported memories (the export lists its
// anchors) are not judged.
func (l *List) Judge(item *model.Prepared, meta *messages.MemoryMeta) (string, bool) {
	if item.Imported || len(item.Archive) > 0 || meta.Insight != nil {
		return "", false
	}
	return l.rules.Match(item.Memory, meta)
}

// Put writes an anchor record in tx, at the insertion-log position of its
// memory: the append's contribution to the anchor list.
func Put(tx store.Tx, logSeq uint64, a *messages.Anchor) error {
	return store.SetProto(tx, Key(logSeq), a)
}

// OnAdded registers fn to be called, on the committer's goroutine, after
// every commit that added anchors: it must only signal (the actors wake
// the sink's deliverer with it).
func (l *List) OnAdded(fn func()) { l.hook.Store(&fn) }

func (l *List) added() {
	if fn := l.hook.Load(); fn != nil {
		(*fn)()
	}
}

// Page lists the anchor list in order, after the anchor at seq after
// (0: from the start), up to limit. The list is append-only: the CAR
// exporter takes its roots from it.
func (l *List) Page(after uint64, limit int) (base.Page[Anchor], error) {
	var page base.Page[Anchor]
	err := l.view.View(func(txn store.Reader) error {
		var start []byte
		if after > 0 {
			start = Key(after)
		}
		return store.ListKeys(txn, KeyPrefix, start, limit, func(k []byte) error {
			item, err := txn.Item(k)
			if err != nil {
				return err
			}
			a, err := Decode(k, item)
			if err != nil {
				return err
			}
			page.Items = append(page.Items, a)
			return nil
		}, func() { page.Next = fmt.Sprint(page.Items[len(page.Items)-1].Seq) })
	})
	return page, err
}

// Decode reads the anchor at key k (y/ seq) from its entry.
func Decode(k []byte, item store.Item) (Anchor, error) {
	if len(k) != len(KeyPrefix)+8 {
		return Anchor{}, fmt.Errorf("%w: anchor key %q", base.ErrCorrupt, k)
	}
	rec := &messages.Anchor{}
	if err := item.Value(func(v []byte) error { return proto.Unmarshal(v, rec) }); err != nil {
		return Anchor{}, fmt.Errorf("%w: anchor: %v", base.ErrCorrupt, err)
	}
	c, err := cid.Decode(rec.Cid)
	if err != nil {
		return Anchor{}, fmt.Errorf("%w: anchor CID: %v", base.ErrCorrupt, err)
	}
	return Anchor{
		Seq: binary.BigEndian.Uint64(k[len(KeyPrefix):]), CID: c,
		Category: rec.Category, Time: rec.Time, Sona: rec.Sona,
	}, nil
}

// Cursor is the seq of the last anchor the sink acknowledged (0:
// none yet).
func (l *List) Cursor() (uint64, error) {
	var n uint64
	err := l.view.View(func(txn store.Reader) error {
		item, err := txn.Item(KeyCursor)
		if errors.Is(err, base.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("%w: anchor cursor", base.ErrCorrupt)
			}
			n = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	return n, err
}

// SetCursor records that the sink acknowledged every anchor up to
// seq. The cursor only moves forward.
func (l *List) SetCursor(ctx context.Context, seq uint64) error {
	return l.store.Update(ctx, func(tx store.Tx) error {
		if v, err := tx.Get(KeyCursor); err == nil {
			if len(v) == 8 && binary.BigEndian.Uint64(v) >= seq {
				return nil
			}
		} else if !errors.Is(err, base.ErrNotFound) {
			return err
		}
		tx.Set(KeyCursor, base.U64(seq))
		return nil
	})
}
