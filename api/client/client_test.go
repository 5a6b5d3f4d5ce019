package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/config"
	"github.com/memoria-ai/memoria/internal/app"
	"github.com/memoria-ai/memoria/messages"
)

// transports runs fn against a client over HTTP and an embedded client,
// each on its own fresh data directory.
func transports(t *testing.T, fn func(t *testing.T, c *client.Client, a *app.App)) {
	for _, mode := range []string{"http", "embedded"} {
		t.Run(mode, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir = t.TempDir()
			a, err := app.Open(context.Background(), cfg, slog.New(slog.DiscardHandler), app.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var c *client.Client
			if mode == "http" {
				srv := httptest.NewServer(a.API)
				t.Cleanup(srv.Close)
				c = client.New(srv.URL+"/", srv.Client()) // a trailing slash is fine
			} else {
				c = client.Embedded(a.API)
			}
			t.Cleanup(func() {
				if err := a.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			fn(t, c, a)
		})
	}
}

// wantAPIError checks err is a *client.Error with the status and code.
func wantAPIError(t *testing.T, err error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *client.Error", err, err)
	}
	if e.Status != status || e.Code != code || e.Message == "" {
		t.Fatalf("error %+v, want status %d code %q and a message", e, status, code)
	}
	if !strings.Contains(e.Error(), code) {
		t.Fatalf("Error() = %q does not name the code", e.Error())
	}
	return e
}

func TestClientFlow(t *testing.T) {
	transports(t, func(t *testing.T, c *client.Client, a *app.App) {
		ctx := context.Background()

		h, err := c.Health(ctx)
		if err != nil || h.Status != "ok" || h.Sonas != 0 || h.Memories != 0 {
			t.Fatalf("health %v, %v", h, err)
		}

		s, err := c.CreateSona(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := uuid.Parse(s.Uuid); err != nil || s.Name != "alice" || s.Length != 0 || s.Head != nil || s.LastMemory != nil {
			t.Fatalf("created %v (%v)", s, err)
		}
		got, err := c.Sona(ctx, s.Uuid)
		if err != nil || !proto.Equal(got, s) {
			t.Fatalf("Sona = %v, %v; want %v", got, err, s)
		}

		chat, err := c.Chat(ctx, s.Uuid, &messages.ChatRequest{Content: "I keep bees on the roof of my house."})
		if err != nil {
			t.Fatal(err)
		}
		if chat.GetInput().GetCid() == "" || chat.GetResponse().GetCid() == "" ||
			!strings.HasPrefix(chat.GetResponse().GetContent(), "[offline model]") {
			t.Fatalf("chat %v", chat)
		}
		if s, _ = c.Sona(ctx, s.Uuid); s.Length != 2 || s.GetLastMemory() != chat.Response.Cid {
			t.Fatalf("after chat: %v", s)
		}

		data, err := structpb.NewStruct(map[string]any{"kind": "text", "content": "The bees make honey in summer."})
		if err != nil {
			t.Fatal(err)
		}
		ins, err := c.Insert(ctx, &messages.InsertRequest{
			Sona: "alice", Data: data, Kind: "fact", Labels: map[string]string{"topic": "bees"},
			Edges: []*messages.Edge{{Target: &messages.Link{Cid: chat.Input.Cid}, Weight: 0.5}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if ins.Existed || ins.Seq == nil || *ins.Seq != 2 || ins.Cid == "" {
			t.Fatalf("insert %v", ins)
		}
		again, err := c.Insert(ctx, &messages.InsertRequest{
			Sona: s.Uuid, Data: data, Kind: "fact", Labels: map[string]string{"topic": "bees"},
			Edges: []*messages.Edge{{Target: &messages.Link{Cid: chat.Input.Cid}, Weight: 0.5}},
		})
		if err != nil || !again.Existed || again.Seq != nil || again.Cid != ins.Cid {
			t.Fatalf("re-insert %v, %v", again, err)
		}

		m, err := c.Memory(ctx, ins.Cid)
		if err != nil {
			t.Fatal(err)
		}
		if m.Cid != ins.Cid || m.Data.AsMap()["content"] != "The bees make honey in summer." ||
			m.Meta.GetKind() != "fact" || m.Meta.GetLabels()["topic"] != "bees" ||
			len(m.Edges) != 1 || m.Edges[0].GetTarget().GetCid() != chat.Input.Cid || m.Edges[0].Weight != 0.5 {
			t.Fatalf("memory %v", m)
		}

		rec, err := c.Recall(ctx, s.Uuid, &messages.RecallRequest{Query: "honey from bees", K: 3, Explain: true})
		if err != nil {
			t.Fatal(err)
		}
		var recalled []string
		for _, r := range rec.Memories {
			recalled = append(recalled, r.Cid)
			if r.Memory.GetCid() != r.Cid || r.Explain == nil || (r.Via != "hit" && r.Via != "expansion" && r.Via != "coaccess") {
				t.Fatalf("recalled %v", r)
			}
		}
		if !slices.Contains(recalled, ins.Cid) {
			t.Fatalf("recall %v lacks %s", recalled, ins.Cid)
		}
		raw, err := c.RecallJSON(ctx, s.Uuid, &messages.RecallRequest{Query: "honey from bees", K: 3})
		var asJSON messages.RecallResponse
		if err != nil || protojson.Unmarshal(raw, &asJSON) != nil ||
			!slices.ContainsFunc(asJSON.Memories, func(r *messages.RecalledMemory) bool { return r.Cid == ins.Cid }) {
			t.Fatalf("recall as JSON %s, %v: lacks %s", raw, err, ins.Cid)
		}

		q, err := c.Query(ctx, s.Uuid, &messages.ChatRequest{Content: "Where do I keep bees?"})
		if err != nil || !strings.Contains(q.GetResponse().GetContent(), "roof") {
			t.Fatalf("query %v, %v", q, err)
		}
		if s, _ = c.Sona(ctx, s.Uuid); s.Length != 3 {
			t.Fatalf("length %d after query, want 3", s.Length)
		}

		// Listings.
		ls, err := c.ListSonas(ctx, "", "", 0)
		if err != nil || len(ls.Items) != 1 || ls.NextCursor != nil {
			t.Fatalf("ListSonas %v, %v", ls, err)
		}
		var chain []string
		cursor := ""
		for {
			page, err := c.ListMemories(ctx, "alice", cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range page.Items {
				chain = append(chain, m.Cid)
			}
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
		if want := []string{chat.Input.Cid, chat.Response.Cid, ins.Cid}; !slices.Equal(chain, want) {
			t.Fatalf("chain %v, want %v", chain, want)
		}

		// Files and blocks.
		content := bytes.Repeat([]byte("hive "), 100)
		f, err := c.PutFile(ctx, bytes.NewReader(content))
		if err != nil || f.Size != int64(len(content)) {
			t.Fatalf("PutFile %v, %v", f, err)
		}
		for _, id := range []string{f.Cid, ins.Cid, chat.Response.Cid, s.GetHead()} {
			block, err := c.Block(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want, err := cid.Decode(id)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := want.Prefix().Sum(block)
			if err != nil || !sum.Equals(want) {
				t.Fatalf("block of %s hashes to %s", id, sum)
			}
		}
		if block, _ := c.Block(ctx, f.Cid); !bytes.Equal(block, content) {
			t.Fatal("file block differs from the upload")
		}

		h, err = c.Health(ctx)
		if err != nil || h.Sonas != 1 || h.Memories != 3 || h.Indexed != 3 {
			t.Fatalf("health %v, %v", h, err)
		}
	})
}

func TestClientResolveSona(t *testing.T) {
	transports(t, func(t *testing.T, c *client.Client, a *app.App) {
		ctx := context.Background()
		alice, err := c.CreateSona(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{alice.Uuid, "alice"} {
			got, err := c.ResolveSona(ctx, ref, false)
			if err != nil || got.Uuid != alice.Uuid {
				t.Fatalf("ResolveSona(%q) = %v, %v", ref, got, err)
			}
		}

		// A missing name is an error, or created on request.
		if _, err := c.ResolveSona(ctx, "bob", false); err == nil || !strings.Contains(err.Error(), "bob") {
			t.Fatalf("ResolveSona(bob) = %v", err)
		}
		bob, err := c.ResolveSona(ctx, "bob", true)
		if err != nil || bob.Name != "bob" {
			t.Fatalf("ResolveSona(bob, create) = %v, %v", bob, err)
		}
		again, err := c.ResolveSona(ctx, "bob", true)
		if err != nil || again.Uuid != bob.Uuid {
			t.Fatalf("ResolveSona(bob, create) again = %v, %v; want the same sona", again, err)
		}
		if h, _ := c.Health(ctx); h.Sonas != 2 {
			t.Fatalf("%d sonas, want 2", h.Sonas)
		}

		// An unknown uuid is not created as a name.
		if _, err := c.ResolveSona(ctx, uuid.NewString(), false); err == nil {
			t.Fatal("ResolveSona of an unknown uuid succeeded")
		}

		// Two sonas with one name are ambiguous, create or not.
		if _, err := c.CreateSona(ctx, "alice"); err == nil || !strings.Contains(err.Error(), "409 exists") {
			t.Fatalf("a second alice: %v", err)
		}
		if _, err := c.CreateSonaWith(ctx, &messages.CreateSonaRequest{Name: "alice", AllowDuplicate: true}); err != nil {
			t.Fatal(err)
		}
		for _, create := range []bool{false, true} {
			_, err := c.ResolveSona(ctx, "alice", create)
			if err == nil || !strings.Contains(err.Error(), "more than one") || !strings.Contains(err.Error(), "alice") {
				t.Fatalf("ResolveSona(alice, %v) with two alices = %v", create, err)
			}
		}
		if h, _ := c.Health(ctx); h.Sonas != 3 {
			t.Fatalf("%d sonas, want 3", h.Sonas)
		}
		// Each can still be resolved by uuid.
		if got, err := c.ResolveSona(ctx, alice.Uuid, false); err != nil || got.Uuid != alice.Uuid {
			t.Fatalf("ResolveSona(uuid) with two alices = %v, %v", got, err)
		}
	})
}

func TestClientErrors(t *testing.T) {
	transports(t, func(t *testing.T, c *client.Client, a *app.App) {
		ctx := context.Background()
		s, err := c.CreateSona(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		unknownCID, _ := cid.Prefix{Version: 1, Codec: 0x71, MhType: 0x12, MhLength: -1}.Sum([]byte("x"))

		_, err = c.CreateSona(ctx, "")
		wantAPIError(t, err, 400, "invalid")
		_, err = c.Sona(ctx, uuid.NewString())
		wantAPIError(t, err, 404, "not_found")
		_, err = c.Sona(ctx, "not-a-sona")
		wantAPIError(t, err, 404, "not_found")
		_, err = c.Chat(ctx, s.Uuid, &messages.ChatRequest{Content: ""})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.Chat(ctx, s.Uuid, &messages.ChatRequest{Content: "x", K: 100000})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.Query(ctx, uuid.NewString(), &messages.ChatRequest{Content: "x"})
		wantAPIError(t, err, 404, "not_found")
		_, err = c.Recall(ctx, s.Uuid, &messages.RecallRequest{})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.Insert(ctx, &messages.InsertRequest{Sona: "nobody"})
		wantAPIError(t, err, 404, "not_found")
		_, err = c.Insert(ctx, &messages.InsertRequest{Sona: s.Uuid})
		wantAPIError(t, err, 400, "invalid")
		_, err = c.Memory(ctx, "garbage")
		wantAPIError(t, err, 400, "invalid_cid")
		_, err = c.Memory(ctx, unknownCID.String())
		wantAPIError(t, err, 404, "not_found")
		_, err = c.ListSonas(ctx, "", "", 100000)
		wantAPIError(t, err, 400, "invalid_limit")
		_, err = c.ListMemories(ctx, "", "bad-cursor", 0)
		wantAPIError(t, err, 400, "invalid_cursor")
		_, err = c.Block(ctx, unknownCID.String())
		wantAPIError(t, err, 404, "not_found")
		_, err = c.Block(ctx, "garbage")
		wantAPIError(t, err, 400, "invalid_cid")
		big := bytes.Repeat([]byte{1}, a.Config.Store.MaxBlockBytes+1)
		_, err = c.PutFile(ctx, bytes.NewReader(big))
		wantAPIError(t, err, http.StatusRequestEntityTooLarge, "too_large")

		// A server that is not Memoria: the error still carries the status.
		other := client.Embedded(http.NotFoundHandler())
		_, err = other.Health(ctx)
		e := wantAPIError(t, err, 404, "http")
		if !strings.Contains(e.Message, "404") {
			t.Fatalf("non-JSON error message %q", e.Message)
		}
	})
}

// An empty reference names no sona.
func TestClientResolveSonaEmpty(t *testing.T) {
	transports(t, func(t *testing.T, c *client.Client, a *app.App) {
		ctx := context.Background()
		if _, err := c.CreateSona(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		for _, create := range []bool{false, true} {
			if s, err := c.ResolveSona(ctx, "", create); err == nil {
				t.Fatalf("ResolveSona(\"\", %v) = %v, want an error", create, s)
			}
		}
	})
}
