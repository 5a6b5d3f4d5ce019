package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/memoria-ai/memoria/memory/model"
)

// hc is the tests' HTTP client: every call is bounded.
var hc = &http.Client{Timeout: 5 * time.Second}

// call makes one JSON call and returns the status and the body.
func call(method, url string, in any) (int, []byte, error) {
	status, b, _, err := authCall(method, url, "", in)
	return status, b, err
}

func createSona(t *testing.T, url, name string) string {
	t.Helper()
	status, b, err := call("POST", url+"/sonas", map[string]string{"name": name})
	if err != nil || status != http.StatusCreated {
		t.Fatalf("POST %s/sonas: %d %s %v", url, status, b, err)
	}
	var s struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s.UUID
}

// acked is an acknowledged append.
type acked struct {
	sona string
	seq  int64
	cid  string
}

// insert appends a text memory (no dedup) through url; it returns the
// acknowledgement, or the status and body of a refusal.
func insert(url, sona, text string) (acked, int, string, error) {
	status, b, err := call("POST", url+"/memories", map[string]any{
		"sona": sona, "dedup": false, "data": map[string]string{"kind": "text", "content": text}})
	if err != nil {
		return acked{}, 0, "", err
	}
	if status != http.StatusCreated {
		return acked{}, status, string(b), nil
	}
	var r struct {
		CID string `json:"cid"`
		Seq *int64 `json:"seq"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Seq == nil {
		return acked{}, status, string(b), fmt.Errorf("bad insert answer %s: %v", b, err)
	}
	return acked{sona, *r.Seq, r.CID}, status, "", nil
}

type sonaRec struct {
	UUID   string  `json:"uuid"`
	Head   *string `json:"head"`
	Length int64   `json:"length"`
}

func getSona(url, sona string) (sonaRec, int, error) {
	status, b, err := call("GET", url+"/sona/"+sona, nil)
	if err != nil || status != http.StatusOK {
		return sonaRec{}, status, err
	}
	var s sonaRec
	return s, status, json.Unmarshal(b, &s)
}

// block fetches a block through url's gateway and verifies it against its
// CID.
func block(url string, c cid.Cid) ([]byte, error) {
	req, _ := http.NewRequest("GET", url+"/ipfs/"+c.String(), nil)
	req.Header.Set("Accept", "application/vnd.ipld.raw")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /ipfs/%s: %d %s", c, resp.StatusCode, b)
	}
	got, err := model.SumCID(c.Prefix().Codec, b)
	if err != nil || !got.Equals(c) {
		return nil, fmt.Errorf("block %s hashes to %s", c, got)
	}
	return b, nil
}

// chain walks a sona's ACT chain from its head through url's gateway,
// every block verified, and returns the memory CID at each seq. It fails
// unless the chain is linear: seqs head..0, each ACT's prev the next.
func chain(url, sona string) ([]string, error) { return chainSkipping(url, sona, nil) }

// chainSkipping is chain for a chain whose memories forgotten were
// forgotten: their blocks must answer 410, their CIDs stay in the ACTs.
func chainSkipping(url, sona string, forgotten []string) ([]string, error) {
	rec, status, err := getSona(url, sona)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("GET /sona/%s: %d %v", sona, status, err)
	}
	mems := make([]string, rec.Length)
	if rec.Head == nil {
		if rec.Length != 0 {
			return nil, fmt.Errorf("no head, length %d", rec.Length)
		}
		return mems, nil
	}
	at, err := cid.Decode(*rec.Head)
	if err != nil {
		return nil, err
	}
	for seq := rec.Length - 1; ; seq-- {
		b, err := block(url, at)
		if err != nil {
			return nil, err
		}
		act, err := model.DecodeAct(b)
		if err != nil {
			return nil, err
		}
		if act.Seq != seq || act.Sona != sona {
			return nil, fmt.Errorf("ACT %s is seq %d of %s, want seq %d of %s", at, act.Seq, act.Sona, seq, sona)
		}
		if slices.Contains(forgotten, act.Memory.String()) {
			if _, err := block(url, act.Memory); err == nil || !strings.Contains(err.Error(), ": 410 ") {
				return nil, fmt.Errorf("forgotten memory %s: %v, want 410", act.Memory, err)
			}
		} else if _, err := block(url, act.Memory); err != nil {
			return nil, err
		}
		mems[seq] = act.Memory.String()
		if act.Prev == nil {
			if seq != 0 {
				return nil, fmt.Errorf("the chain ends at seq %d", seq)
			}
			return mems, nil
		}
		at = *act.Prev
	}
}

// head is a sona's head as etcd keeps it.
type head struct {
	Seq      int64    `json:"seq"`
	CID      string   `json:"cid"`
	Replicas []string `json:"replicas"`
}

// sonaKeys reads the keys under /memoria/sona/ from etcd, by sona and
// then by name (owner, head, info).
func sonaKeys(t *testing.T, etcdURL string) map[string]map[string][]byte {
	t.Helper()
	out := map[string]map[string][]byte{}
	for _, kv := range etcdGet(t, etcdURL, "/memoria/sona/", clientv3.WithPrefix()) {
		sona, name, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), "/memoria/sona/"), "/")
		if !ok {
			continue
		}
		if out[sona] == nil {
			out[sona] = map[string][]byte{}
		}
		out[sona][name] = kv.Value
	}
	return out
}

// etcdGet reads key (with opts) from etcd.
func etcdGet(t *testing.T, etcdURL, key string, opts ...clientv3.OpOption) []*mvccpb.KeyValue {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Get(ctx, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

// etcdHeads reads every sona's head from etcd.
func etcdHeads(t *testing.T, etcdURL string) map[string]head {
	t.Helper()
	out := map[string]head{}
	for sona, keys := range sonaKeys(t, etcdURL) {
		if v, ok := keys["head"]; ok {
			var h head
			if err := json.Unmarshal(v, &h); err != nil {
				t.Fatal(err)
			}
			out[sona] = h
		}
	}
	return out
}

// etcdOwners maps each owned sona to its owner's member id.
func etcdOwners(t *testing.T, etcdURL string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for sona, keys := range sonaKeys(t, etcdURL) {
		if v, ok := keys["owner"]; ok {
			out[sona] = string(v)
		}
	}
	return out
}

// selfID is the member id of the member at url.
func selfID(url string) (string, error) {
	status, b, err := call("GET", url+"/cluster", nil)
	if err != nil || status != http.StatusOK {
		return "", fmt.Errorf("GET /cluster: %d %v", status, err)
	}
	var st struct {
		Self string `json:"self"`
	}
	return st.Self, json.Unmarshal(b, &st)
}

// jsonCode reports whether b is an API error with code.
func jsonCode(b []byte, code string) bool {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(b, &e) == nil && e.Error.Code == code
}
