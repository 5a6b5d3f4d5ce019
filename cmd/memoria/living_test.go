package main_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/memoria-ai/memoria/api/client"
	"github.com/memoria-ai/memoria/messages"
	"google.golang.org/protobuf/types/known/structpb"
)

// tickReport is the JSON `memoria heartbeat` and `memoria compact` print.
type tickReport struct {
	At           *int64 `json:"at"`
	Swept        int64  `json:"swept"`
	PassComplete bool   `json:"pass_complete"`
	Dreamed      bool   `json:"dreamed"`
	Insights     []struct {
		CID      string `json:"cid"`
		Category string `json:"category"`
	} `json:"insights"`
	Folds []struct {
		Sona    string   `json:"sona"`
		CID     string   `json:"cid"`
		Sources []string `json:"sources"`
	} `json:"folds"`
	Compressions []json.RawMessage `json:"compressions"`
}

// runTick runs a tick command that must succeed and print one line of JSON.
func runTick(t *testing.T, args ...string) tickReport {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("%v: want one line of JSON, got %q", args, out)
	}
	var rep tickReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: output is not a tick report: %v\n%s", args, err, out)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"at", "swept", "pass_complete", "expired", "pruned", "prune_threshold",
		"tier_wakes", "compressions", "dreamed", "insights", "folds"} {
		if _, ok := keys[k]; !ok {
			t.Fatalf("%v: report lacks %q: %s", args, k, out)
		}
	}
	if rep.At == nil || *rep.At <= 0 {
		t.Fatalf("%v: report without a time: %s", args, out)
	}
	return rep
}

func TestHeartbeatAndCompactCommands(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data)
	ctx := context.Background()
	c := client.New(srv.url, nil)
	for _, line := range []string{
		"I planted tomatoes and basil in my garden this spring.",
		"My garden tomatoes need more water in the summer heat.",
		"The tomatoes in my garden are finally turning red.",
	} {
		if _, code := runOK(t, "chat", "--server", srv.url, "--sona", "bob", line); code != 0 {
			t.Fatal("chat failed")
		}
	}

	// A plain tick sweeps bob's six memories and does not dream (bob was
	// just active); --dream forces dream mode and stores insights.
	plain := runTick(t, "heartbeat", "--server", srv.url)
	if plain.Swept != 6 || !plain.PassComplete || plain.Dreamed || len(plain.Insights) != 0 {
		t.Fatalf("heartbeat: %+v", plain)
	}
	dream := runTick(t, "heartbeat", "--server", srv.url, "--dream")
	if !dream.Dreamed || len(dream.Insights) == 0 {
		t.Fatalf("heartbeat --dream: %+v", dream)
	}
	ins, err := c.Insights(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var stored, printed []string
	for _, in := range ins.Items {
		stored = append(stored, in.Cid)
	}
	for _, in := range dream.Insights {
		printed = append(printed, in.CID)
	}
	slices.Reverse(printed)
	if !slices.Equal(stored, printed) {
		t.Fatalf("the server stored insights %v, the command printed %v", stored, printed)
	}

	// compact: a whole pass; only bob was ever active, so nothing is colder
	// than another branch.
	if rep := runTick(t, "compact", "--server", srv.url); !rep.PassComplete || rep.Dreamed || len(rep.Folds) != 0 {
		t.Fatalf("compact: %+v", rep)
	}

	// Embedded mode on the served directory: refused, in one line.
	_, errOut, code := run(t, "compact", "--data", data)
	if code == 0 || !strings.Contains(errOut, "in use") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("compact on a served data dir: exit %d, stderr %q", code, errOut)
	}

	// Stopped, the same directory compacts in process: a cold branch (a
	// sona never recalled, beside one that is) folds into an archive.
	ally, err := c.CreateSona(ctx, "ally")
	if err != nil {
		t.Fatal(err)
	}
	var cold []string
	for _, line := range []string{"Old note one about the roof.", "Old note two about the fence.", "Old note three about the gate."} {
		r, err := c.Insert(ctx, &messages.InsertRequest{Sona: ally.Uuid, Data: textData(t, line)})
		if err != nil {
			t.Fatal(err)
		}
		cold = append(cold, r.Cid)
	}
	bob, err := c.ResolveSona(ctx, "bob", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recall(ctx, bob.Uuid, &messages.RecallRequest{Query: "tomatoes in the garden", Scope: "sona"}); err != nil {
		t.Fatal(err)
	}
	srv.stop(t, syscall.SIGTERM)
	rep := runTick(t, "compact", "--data", data)
	if len(rep.Folds) != 1 || rep.Folds[0].Sona != ally.Uuid || !sameStrings(rep.Folds[0].Sources, cold) {
		t.Fatalf("compact after a recall of bob only: %+v, want ally's %v folded", rep, cold)
	}
	if again := runTick(t, "compact", "--data", data); len(again.Folds) != 0 {
		t.Fatalf("second compact folded again: %+v", again)
	}
}

func TestLivingCommandErrors(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, data)
	for _, args := range [][]string{
		{"heartbeat", "--server", "http://127.0.0.1:1"},        // no server
		{"compact", "--server", "http://127.0.0.1:1"},          // no server
		{"heartbeat", "--server", srv.url + "/nope"},           // not the API: a 404 error body
		{"compact", "--server", srv.url + "/nope"},             // likewise
		{"heartbeat", "--server", "http://127.0.0.1:1/%zz"},    // bad URL
		{"heartbeat", "--dream=maybe", "--server", srv.url},    // bad flag value
		{"heartbeat", "now", "--server", srv.url},              // stray argument
		{"compact", "--all", "--server", srv.url},              // unknown flag
		{"heartbeat", "--data", data},                          // the server holds the directory
		{"compact", "--data", data, "--log-level", "shouting"}, // bad config
	} {
		out, errOut, code := run(t, args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "memoria: ") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	// The 404 of a wrong server path is reported with the server's message.
	_, errOut, _ := run(t, "compact", "--server", srv.url+"/nope")
	if !strings.Contains(errOut, "no route for POST /nope/admin/compact") {
		t.Errorf("compact on a wrong path: %q", errOut)
	}
}

// runOK runs the binary and returns its stdout and exit code, logging stderr
// on failure.
func runOK(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := run(t, args...)
	if code != 0 {
		t.Logf("%v: exit %d: %s", args, code, errOut)
	}
	return out, code
}

func textData(t *testing.T, content string) *structpb.Struct {
	t.Helper()
	d, err := structpb.NewStruct(map[string]any{"kind": "text", "content": content})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
