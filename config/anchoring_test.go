package config_test

import (
	"testing"
	"time"

	"github.com/memoria-ai/memoria/config"
)

func TestAnchoringRulesFromFile(t *testing.T) {
	c, err := config.Load(writeFile(t, `
anchoring:
  rules:
    - {category: release, words: ["tagged v"], kinds: [fact]}
    - {category: escalation, labels: {severity: "*"}, data: [text]}
server: {max_import_bytes: 1024, transfer_timeout: 10m}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := c.Anchoring.Rules
	if len(r) != 2 || r[0].Category != "release" || r[1].Labels["severity"] != "*" || r[1].Data[0] != "text" {
		t.Fatalf("rules from the file replace the defaults as a whole: %+v", r)
	}
	if c.Server.MaxImportBytes != 1024 || c.Server.TransferTimeout.D() != 10*time.Minute {
		t.Fatalf("server transfer limits: %+v", c.Server)
	}
	off, err := config.Load(writeFile(t, "anchoring: {rules: []}\n"), nil)
	if err != nil || off.Validate() != nil || len(off.Anchoring.Rules) != 0 {
		t.Fatalf("no rules: %v %+v", err, off.Anchoring)
	}
	def := config.Default()
	cats := map[string]bool{}
	for _, r := range def.Anchoring.Rules {
		cats[r.Category] = true
	}
	if len(cats) != 3 || !cats["milestone"] || !cats["decision"] || !cats["incident"] {
		t.Fatalf("default categories %v, want XmetaV's milestone, decision, incident", cats)
	}
}

func TestAnchoringValidation(t *testing.T) {
	for _, tc := range []struct {
		rule config.AnchorRule
		key  string
	}{
		{config.AnchorRule{Category: "Big News", Words: []string{"x"}}, "anchoring.rules[0].category"},
		{config.AnchorRule{Category: "x"}, "needs words, kinds or labels"},
		{config.AnchorRule{Category: "x", Words: []string{" "}}, "anchoring.rules[0].words"},
		{config.AnchorRule{Category: "x", Kinds: []string{"rumour"}}, "anchoring.rules[0].kinds"},
		{config.AnchorRule{Category: "x", Labels: map[string]string{"": "y"}}, "anchoring.rules[0].labels"},
		{config.AnchorRule{Category: "x", Words: []string{"y"}, Data: []string{"video"}}, "anchoring.rules[0].data"},
	} {
		c := config.Default()
		c.Anchoring.Rules = []config.AnchorRule{tc.rule}
		wantErr(t, c.Validate(), tc.key)
	}
	c := config.Default()
	c.Server.MaxImportBytes, c.Server.TransferTimeout = 0, 0
	wantErr(t, c.Validate(), "server.max_import_bytes", "server.transfer_timeout")
}
