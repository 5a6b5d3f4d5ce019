package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/memoria-ai/memoria/config"
)

// writeFile writes a config file in a temporary directory.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "memoria.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantErr checks that err is not nil and mentions every fragment.
func wantErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error mentioning %q, got nil", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("error %q does not mention %q", err, f)
		}
	}
}

func TestDefaultValidates(t *testing.T) {
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default() does not validate: %v", err)
	}
	// Load without a file or environment is Default.
	got, err := config.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, config.Default()) {
		t.Fatalf("Load(\"\", nil) differs from Default()")
	}
	// Default returns a fresh kinds table each time.
	a, b := config.Default(), config.Default()
	a.Kinds["note"] = config.Kind{Weight: 0.1}
	if b.Kinds["note"].Weight != 0.5 {
		t.Fatal("Default() shares its kinds map between calls")
	}
	// The default kind is in the table and KindWeight falls back to it.
	if w := c.KindWeight("no-such-kind"); w != c.Kinds[c.DefaultKind].Weight {
		t.Fatalf("KindWeight of an unknown kind = %v, want the default kind's", w)
	}
	if w := c.KindWeight("fact"); w != 1.0 {
		t.Fatalf("KindWeight(fact) = %v", w)
	}
}

func TestFileOverrides(t *testing.T) {
	p := writeFile(t, `
data_dir: /var/lib/memoria
server:
  listen: 0.0.0.0:9000
  max_body_bytes: 1024
  request_timeout: 90s
recall:
  top_k: 3
  weights:
    sona: 0.3
tiers:
  mu: 1e7s
heartbeat:
  interval: 45s
log:
  level: debug
  format: json
`)
	c, err := config.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.DataDir = "/var/lib/memoria"
	want.Server.Listen = "0.0.0.0:9000"
	want.Server.MaxBodyBytes = 1024
	want.Server.RequestTimeout = config.Duration(90 * time.Second)
	want.Recall.TopK = 3
	want.Recall.Weights.Sona = 0.3
	want.Tiers.Mu = config.Duration(1e7 * time.Second)
	want.Heartbeat.Interval = config.Duration(45 * time.Second)
	want.Log.Level, want.Log.Format = "debug", "json"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	// An empty file (or only comments) changes nothing.
	for _, text := range []string{"", "\n\n", "# nothing here\n"} {
		c, err := config.Load(writeFile(t, text), nil)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if !reflect.DeepEqual(c, config.Default()) {
			t.Fatalf("%q changed the configuration", text)
		}
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name, text string
		fragments  []string
	}{
		{"unknown top-level key", "colour: blue\n", []string{"colour"}},
		{"unknown nested key", "server:\n  listen: 127.0.0.1:1\n  lisen: x\n", []string{"lisen"}},
		{"unknown key in a kind", "kinds:\n  note:\n    weight: 0.5\n    colour: red\n", []string{"colour"}},
		{"wrong type", "recall:\n  top_k: seven\n", []string{"seven"}},
		{"bad duration", "heartbeat:\n  interval: soon\n", []string{"soon"}},
		{"duration without unit", "heartbeat:\n  interval: 30\n", []string{"30"}},
		{"not YAML", "server: [unclosed\n", []string{"memoria.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.text)
			_, err := config.Load(p, nil)
			wantErr(t, err, append(tc.fragments, p)...)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
		wantErr(t, err, "nope.yaml")
	})
}

func TestKindsTableReplaced(t *testing.T) {
	p := writeFile(t, `
kinds:
  memo:
    weight: 0.7
  lesson:
    weight: 1
    ttl: 72h
default_kind: memo
`)
	c, err := config.Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]config.Kind{
		"memo":   {Weight: 0.7},
		"lesson": {Weight: 1, TTL: config.Duration(72 * time.Hour)},
	}
	if !reflect.DeepEqual(c.Kinds, want) {
		t.Fatalf("kinds %v, want exactly %v (the file's table replaces the default)", c.Kinds, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// A table without the default kind does not validate.
	c, err = config.Load(writeFile(t, "kinds:\n  memo:\n    weight: 0.7\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, c.Validate(), "default_kind", `"note"`, "memo")
	// An empty table does not validate either.
	c, err = config.Load(writeFile(t, "kinds: {}\ndefault_kind: note\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, c.Validate(), "kinds")
	// A file without kinds keeps the default table.
	c, err = config.Load(writeFile(t, "recall:\n  top_k: 4\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Kinds, config.DefaultKinds()) {
		t.Fatalf("kinds %v, want the default table", c.Kinds)
	}
}

func TestEnvOverrides(t *testing.T) {
	env := []string{
		"PATH=/usr/bin", // not ours: ignored
		"MEMORIA_RECALL_TOP_K=7",
		"MEMORIA_SERVER_LISTEN=0.0.0.0:8080",
		"MEMORIA_HEARTBEAT_INTERVAL=45s",
		"MEMORIA_TIERS_MU=1e7s",
		"MEMORIA_RECALL_WEIGHTS_IMPORTANCE=0.4",
		"MEMORIA_INDEX_SEED=-3",
		"MEMORIA_LOG_LEVEL= debug ",
		"MEMORIA_CONFIG=/somewhere/memoria.yaml", // read by the CLI, not an unknown name
	}
	c, err := config.Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Recall.TopK = 7
	want.Server.Listen = "0.0.0.0:8080"
	want.Heartbeat.Interval = config.Duration(45 * time.Second)
	want.Tiers.Mu = config.Duration(1e7 * time.Second)
	want.Recall.Weights.Importance = 0.4
	want.Index.Seed = -3
	want.Log.Level = "debug"
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", c, want)
	}

	// The environment overrides the file.
	p := writeFile(t, "recall:\n  top_k: 3\n  budget_chars: 123\n")
	c, err = config.Load(p, []string{"MEMORIA_RECALL_TOP_K=9"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Recall.TopK != 9 || c.Recall.BudgetChars != 123 {
		t.Fatalf("top_k %d budget %d, want 9 (env) and 123 (file)", c.Recall.TopK, c.Recall.BudgetChars)
	}
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		name      string
		env       []string
		fragments []string
	}{
		{"unknown name", []string{"MEMORIA_FOO=1"}, []string{"MEMORIA_FOO"}},
		{"typo", []string{"MEMORIA_RECALL_TOPK=1"}, []string{"MEMORIA_RECALL_TOPK"}},
		{"map", []string{"MEMORIA_KINDS=x"}, []string{"MEMORIA_KINDS"}},
		{"not an integer", []string{"MEMORIA_RECALL_TOP_K=seven"}, []string{"MEMORIA_RECALL_TOP_K", "seven"}},
		{"empty integer", []string{"MEMORIA_RECALL_TOP_K="}, []string{"MEMORIA_RECALL_TOP_K"}},
		{"not a number", []string{"MEMORIA_RECALL_LAMBDA=half"}, []string{"MEMORIA_RECALL_LAMBDA"}},
		{"not a duration", []string{"MEMORIA_HEARTBEAT_INTERVAL=often"}, []string{"MEMORIA_HEARTBEAT_INTERVAL", "often"}},
		{"several", []string{"MEMORIA_FOO=1", "MEMORIA_BAR=2", "MEMORIA_RECALL_TOP_K=x"},
			[]string{"MEMORIA_FOO", "MEMORIA_BAR", "MEMORIA_RECALL_TOP_K"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load("", tc.env)
			wantErr(t, err, tc.fragments...)
		})
	}
}

// A duration too long for time.Duration must be an error, not wrap around.
func TestEnvDurationOverflow(t *testing.T) {
	c, err := config.Load("", []string{"MEMORIA_TIERS_MU=1e10s"})
	if err == nil {
		t.Fatalf("MEMORIA_TIERS_MU=1e10s loaded as %v, want an out-of-range error", c.Tiers.Mu)
	}
	wantErr(t, err, "MEMORIA_TIERS_MU")
}

// index.graph "auto" is lazy unless recall.scope is self.
func TestLazyGraph(t *testing.T) {
	for _, c := range []struct {
		graph, scope string
		lazy         bool
	}{
		{config.GraphAuto, "sona", true}, {config.GraphAuto, "self", false},
		{config.GraphLazy, "self", true}, {config.GraphEager, "sona", false},
	} {
		cfg := config.Default()
		cfg.Index.Graph, cfg.Recall.Scope = c.graph, c.scope
		if got := cfg.LazyGraph(); got != c.lazy {
			t.Errorf("graph %s, scope %s: lazy %v, want %v", c.graph, c.scope, got, c.lazy)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(*config.Config)
		keys  []string
	}{
		{"top_k zero", func(c *config.Config) { c.Recall.TopK = 0 }, []string{"recall.top_k"}},
		{"embedder dims", func(c *config.Config) { c.Embedder.Dims = 3 }, []string{"embedder.dims"}},
		{"log level", func(c *config.Config) { c.Log.Level = "loud" }, []string{"log.level", "loud"}},
		{"log format", func(c *config.Config) { c.Log.Format = "xml" }, []string{"log.format"}},
		{"kind weight", func(c *config.Config) { c.Kinds["note"] = config.Kind{Weight: 2} }, []string{"kinds.note.weight"}},
		{"kind weight zero", func(c *config.Config) { c.Kinds["fact"] = config.Kind{Weight: 0} }, []string{"kinds.fact.weight"}},
		{"kind ttl", func(c *config.Config) { c.Kinds["fact"] = config.Kind{Weight: 1, TTL: -1} }, []string{"kinds.fact.ttl"}},
		{"kind name", func(c *config.Config) { c.Kinds["Big Kind"] = config.Kind{Weight: 1} }, []string{"kinds.Big Kind"}},
		{"default kind", func(c *config.Config) { c.DefaultKind = "diary" }, []string{"default_kind", "diary"}},
		{"data dir", func(c *config.Config) { c.DataDir = " " }, []string{"data_dir"}},
		{"listen", func(c *config.Config) { c.Server.Listen = "localhost" }, []string{"server.listen"}},
		{"body limit", func(c *config.Config) { c.Server.MaxBodyBytes = 0 }, []string{"server.max_body_bytes"}},
		{"server timeouts", func(c *config.Config) {
			c.Server.ReadTimeout, c.Server.IdleTimeout, c.Server.ReadHeaderTimeout = 0, -1, 0
		}, []string{"server.read_timeout", "server.idle_timeout", "server.read_header_timeout"}},
		{"header cap", func(c *config.Config) { c.Server.MaxHeaderBytes = 100 }, []string{"server.max_header_bytes"}},
		{"connections", func(c *config.Config) { c.Server.MaxConnections = -1 }, []string{"server.max_connections"}},
		{"memory limit", func(c *config.Config) { c.Server.MemoryLimit = "lots" }, []string{"server.memory_limit", "lots"}},
		{"memory limit small", func(c *config.Config) { c.Server.MemoryLimit = "1MiB" }, []string{"server.memory_limit", "64MiB"}},
		{"gc headroom", func(c *config.Config) { c.Server.GCHeadroom = "some" }, []string{"server.gc_headroom", "some"}},
		{"gc headroom small", func(c *config.Config) { c.Server.GCHeadroom = "1MiB" }, []string{"server.gc_headroom", "16MiB"}},
		{"memtables", func(c *config.Config) { c.Store.MemTableMB, c.Store.Memtables = 0, 1 }, []string{"store.memtable_mb", "store.memtables"}},
		{"compression", func(c *config.Config) { c.Store.Compression = "lz4" }, []string{"store.compression", "lz4"}},
		{"graph", func(c *config.Config) { c.Index.Graph = "later" }, []string{"index.graph", "later"}},
		{"backoff", func(c *config.Config) { c.Actors.RestartBackoff, c.Actors.ServiceMaxBackoff = -1, -2 }, []string{"actors.restart_backoff", "actors.service_max_backoff"}},
		{"backoff cap", func(c *config.Config) { c.Actors.MaxBackoff = config.Duration(time.Millisecond) }, []string{"actors.max_backoff"}},
		{"block limit", func(c *config.Config) { c.Store.MaxBlockBytes = 5 << 20 }, []string{"store.max_block_bytes"}},
		{"defer", func(c *config.Config) { c.Store.DeferFor = config.Duration(2 * time.Second) }, []string{"store.defer_for"}},
		{"negative defer", func(c *config.Config) { c.Store.DeferFor = config.Duration(-time.Millisecond) }, []string{"store.defer_for"}},
		{"commit interval", func(c *config.Config) { c.Store.CommitInterval = config.Duration(time.Second) }, []string{"store.commit_interval"}},
		{"negative commit interval", func(c *config.Config) { c.Store.CommitInterval = config.Duration(-time.Millisecond) }, []string{"store.commit_interval"}},
		{"coaccess flush", func(c *config.Config) { c.Recall.CoAccessFlush = config.Duration(2 * time.Minute) }, []string{"recall.coaccess_flush"}},
		{"negative coaccess flush", func(c *config.Config) { c.Recall.CoAccessFlush = config.Duration(-time.Second) }, []string{"recall.coaccess_flush"}},
		{"touch flush", func(c *config.Config) { c.Recall.TouchFlush = config.Duration(6 * time.Minute) }, []string{"recall.touch_flush"}},
		{"negative touch flush", func(c *config.Config) { c.Recall.TouchFlush = config.Duration(-time.Second) }, []string{"recall.touch_flush"}},
		{"candidates", func(c *config.Config) { c.Recall.Candidates = 5 }, []string{"recall.candidates"}},
		{"workers", func(c *config.Config) { c.Recall.Workers = -1 }, []string{"recall.workers"}},
		{"beta", func(c *config.Config) { c.Threshold.DedupBeta = 0 }, []string{"thresholds.dedup_beta"}},
		{"unit", func(c *config.Config) { c.Recall.ExpandDecay = 1.5 }, []string{"recall.expand_decay"}},
		{"expand per hit", func(c *config.Config) { c.Recall.ExpandPerHit = -1 }, []string{"recall.expand_per_hit"}},
		{"mmr lambda", func(c *config.Config) { c.Recall.MMRLambda = 1.5 }, []string{"recall.mmr_lambda"}},
		{"collapse", func(c *config.Config) { c.Recall.Collapse = -0.1 }, []string{"recall.collapse"}},
		{"phi", func(c *config.Config) { c.Living.Phi = 1 }, []string{"living.phi"}},
		{"duration", func(c *config.Config) { c.Heartbeat.Interval = 0 }, []string{"heartbeat.interval"}},
		{"provider", func(c *config.Config) { c.LLM.Provider = "gemini" }, []string{"llm.provider"}},
		{"provider model", func(c *config.Config) { c.LLM.Provider = "openai" }, []string{"llm.model"}},
		{"base url", func(c *config.Config) { c.LLM.BaseURL = "localhost:11434" }, []string{"llm.base_url"}},
		{"retries", func(c *config.Config) { c.LLM.MaxRetries = -1; c.LLM.RetryMax = config.Duration(time.Millisecond) }, []string{"llm.max_retries", "llm.retry_max"}},
		{"breaker", func(c *config.Config) { c.LLM.BreakerFailures = -1; c.LLM.BreakerCooldown = 0 }, []string{"llm.breaker_failures", "llm.breaker_cooldown"}},
		{"model2vec path", func(c *config.Config) { c.Embedder.Provider = "model2vec" }, []string{"embedder.path"}},
		{"glove dims", func(c *config.Config) { c.Embedder.Provider = "glove" }, []string{"embedder.dims"}},
		{"embedder model", func(c *config.Config) { c.Embedder.Provider = "openai"; c.Embedder.BatchSize = 0 }, []string{"embedder.model", "embedder.batch_size"}},
		{"embedder", func(c *config.Config) { c.Embedder.Provider = "bert" }, []string{"embedder.provider"}},
		{"index m", func(c *config.Config) { c.Index.M = 1 }, []string{"index.m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			tc.tweak(&c)
			wantErr(t, c.Validate(), tc.keys...)
		})
	}

	t.Run("several at once", func(t *testing.T) {
		c := config.Default()
		c.Recall.TopK = 0
		c.Embedder.Dims = 3
		c.Log.Level = "loud"
		c.Kinds["note"] = config.Kind{Weight: 2}
		c.DefaultKind = "diary"
		err := c.Validate()
		wantErr(t, err, "recall.top_k", "embedder.dims", "log.level", "kinds.note.weight", "default_kind")
		if n := strings.Count(err.Error(), "config: "); n < 5 {
			t.Fatalf("want at least 5 problems, got %d: %v", n, err)
		}
	})

	t.Run("from the environment", func(t *testing.T) {
		c, err := config.Load("", []string{"MEMORIA_RECALL_TOP_K=0", "MEMORIA_EMBEDDER_DIMS=3", "MEMORIA_LOG_LEVEL=loud"})
		if err != nil {
			t.Fatal(err) // parse errors only; range checks are Validate's
		}
		wantErr(t, c.Validate(), "recall.top_k", "embedder.dims", "log.level")
	})
}

func TestEnvNames(t *testing.T) {
	names := config.EnvNames()
	for _, want := range []string{
		"MEMORIA_RECALL_TOP_K", "MEMORIA_SERVER_LISTEN", "MEMORIA_HEARTBEAT_INTERVAL",
		"MEMORIA_TIERS_MU", "MEMORIA_DATA_DIR", "MEMORIA_RECALL_WEIGHTS_SONA", "MEMORIA_DEFAULT_KIND",
	} {
		if !slices.Contains(names, want) {
			t.Fatalf("EnvNames lacks %s", want)
		}
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Fatal("EnvNames is not sorted and unique")
	}
	for _, n := range names {
		if !strings.HasPrefix(n, config.EnvPrefix) || n != strings.ToUpper(n) {
			t.Fatalf("odd name %q", n)
		}
		if strings.HasPrefix(n, "MEMORIA_KINDS") {
			t.Fatalf("kinds are file-only, yet EnvNames lists %s", n)
		}
	}

	// Every listed name is read: setting each to its default value (as
	// the YAML rendering writes it) loads without error and changes nothing.
	def := config.Default()
	out, err := def.YAML()
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(out, &tree); err != nil {
		t.Fatal(err)
	}
	flat := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			if prefix == "MEMORIA_KINDS" || prefix == "MEMORIA_TIERS_AGENT_PROFILE" {
				return // maps are set in the file only
			}
			for k, sub := range m {
				walk(prefix+"_"+strings.ToUpper(k), sub)
			}
			return
		}
		if _, ok := v.([]any); ok {
			return // lists too
		}
		flat[prefix] = fmt.Sprint(v)
	}
	walk("MEMORIA", tree)
	var env []string
	for _, n := range names {
		v, ok := flat[n]
		if !ok {
			t.Fatalf("%s is not a key of the YAML rendering", n)
		}
		env = append(env, n+"="+v)
	}
	if len(flat) != len(names) {
		t.Fatalf("YAML has %d leaves, EnvNames %d", len(flat), len(names))
	}
	c, err := config.Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, def) {
		t.Fatalf("setting every variable to its default changed the configuration:\n%+v", c)
	}
}

// The YAML rendering (`memoria config`) loads back as the same config.
func TestYAMLRoundTrip(t *testing.T) {
	c := config.Default()
	c.Recall.TopK = 17
	c.Tiers.Mu = config.Duration(1e7 * time.Second)
	c.Kinds["custom"] = config.Kind{Weight: 0.3, TTL: config.Duration(36 * time.Hour)}
	out, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Load(writeFile(t, string(out)), nil)
	if err != nil {
		t.Fatalf("the YAML rendering does not load: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip changed the configuration:\n%s", out)
	}
	if !strings.Contains(string(out), "top_k: 17") || !strings.Contains(string(out), "ttl: 36h0m0s") {
		t.Fatalf("unexpected rendering:\n%s", out)
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		text string
		want time.Duration
	}{
		{"30s", 30 * time.Second},
		{"5m", 5 * time.Minute},
		{"6h", 6 * time.Hour},
		{"1e7s", 1e7 * time.Second},
		{"1.5s", 1500 * time.Millisecond},
		{"250ms", 250 * time.Millisecond},
	} {
		c, err := config.Load("", []string{"MEMORIA_HEARTBEAT_INTERVAL=" + tc.text})
		if err != nil {
			t.Fatalf("%s: %v", tc.text, err)
		}
		if got := c.Heartbeat.Interval.D(); got != tc.want {
			t.Fatalf("%s = %v, want %v", tc.text, got, tc.want)
		}
	}
	for _, bad := range []string{"", "30", "soon", "-1e7s", "NaNs", "Infs", "1e12s"} {
		if _, err := config.Load("", []string{"MEMORIA_HEARTBEAT_INTERVAL=" + bad}); err == nil {
			t.Fatalf("%q loaded as a duration", bad)
		}
	}
	if s := config.Duration(90 * time.Second).String(); s != "1m30s" {
		t.Fatalf("String() = %q", s)
	}
}

func TestMemoryLimitParse(t *testing.T) {
	for in, want := range map[config.MemoryLimit]config.MemoryLimitSpec{
		"auto":       {Auto: true},
		" OFF ":      {Off: true},
		"40%":        {Fraction: 0.4},
		"100%":       {Fraction: 1},
		"2GiB":       {Bytes: 2 << 30},
		"512 MiB":    {Bytes: 512 << 20},
		"1500MB":     {Bytes: 1_500_000_000},
		"1.5GB":      {Bytes: 1_500_000_000},
		"1073741824": {Bytes: 1 << 30},
		"67108864B":  {Bytes: 64 << 20},
	} {
		got, err := in.Parse()
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []config.MemoryLimit{"", "0", "0%", "101%", "-1GiB", "2XB", "1MiB", "NaN", "lots", "%"} {
		if got, err := in.Parse(); err == nil {
			t.Errorf("%q accepted as %+v", in, got)
		}
	}
}

func TestGCHeadroomParse(t *testing.T) {
	for in, want := range map[config.GCHeadroom]int64{
		"512MiB": 512 << 20,
		" off ":  0,
		"OFF":    0,
		"1GB":    1e9,
		"16MiB":  16 << 20,
		"1 GiB":  1 << 30,
	} {
		got, err := in.Parse()
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []config.GCHeadroom{"", "auto", "40%", "-1GiB", "NaN", "15MiB", "1048576"} {
		if got, err := in.Parse(); err == nil {
			t.Errorf("%q accepted as %d", in, got)
		}
	}
	if got, err := config.Default().Server.GCHeadroom.Parse(); err != nil || got != 512<<20 {
		t.Errorf("default: %d, %v", got, err)
	}
}
