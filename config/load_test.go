package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExampleValidates(t *testing.T) {
	cfg := parseExample(t)
	cl := cfg.DefaultCluster()
	if cl == nil || cl.Name != "ml-prod-eks" {
		t.Fatalf("DefaultCluster = %+v, want ml-prod-eks", cl)
	}
	if cl.Kubeconfig != "" || cfg.Redis.URL != "" {
		t.Errorf("example must keep kubeconfig and redis.url empty, got %q and %q", cl.Kubeconfig, cfg.Redis.URL)
	}
	if got := cfg.Approvals.Rules[1].ExpiresAfter.Std(); got != 30*time.Minute {
		t.Errorf("rules[1].expiresAfter = %v, want 30m", got)
	}
	if arn, ok := cfg.RoleARN(cl.HyperPod.Templates["gpu-small"].ExecutionRole); !ok || !strings.HasPrefix(arn, "arn:aws:iam::") {
		t.Errorf("template role does not resolve: %q %v", arn, ok)
	}
}

// TestExampleDocumentsEveryKey keeps example.yaml complete as keys are added to the types.
func TestExampleDocumentsEveryKey(t *testing.T) {
	idx, fatal := indexYAML(Example)
	if fatal != nil {
		t.Fatal(fatal)
	}
	present := map[string]bool{}
	for _, k := range idx.keys {
		present[k.text] = true
	}
	for typ, keys := range knownKeys() {
		for _, k := range keys {
			if !present[k] {
				t.Errorf("example.yaml never shows key %q of %s", k, typ)
			}
		}
	}
}

func TestEnvExpansion(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantApp string
		wantBot string
		wantErr string
	}{
		{"set", map[string]string{"SLACK_APP_TOKEN": "xapp-1-A", "SLACK_BOT_TOKEN": "xoxb-2-B"}, "xapp-1-A", "xoxb-2-B", ""},
		{"unset becomes empty", map[string]string{"SLACK_APP_TOKEN": "", "SLACK_BOT_TOKEN": ""}, "", "", ""},
		{"line break refused", map[string]string{"SLACK_APP_TOKEN": "xapp-1\nappToken: x", "SLACK_BOT_TOKEN": ""}, "", "",
			"environment variable SLACK_APP_TOKEN (used as ${SLACK_APP_TOKEN}) contains a line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if tt.env["SLACK_APP_TOKEN"] == "" {
				os.Unsetenv("SLACK_APP_TOKEN") // t.Setenv restores it afterwards
			}
			cfg, err := Parse(Example, "example.yaml")
			if tt.wantErr != "" {
				ps := problemsOf(t, err)
				if len(ps) != 1 || !strings.Contains(ps[0].Message, tt.wantErr) || ps[0].Line != 10 {
					t.Fatalf("problems = %v, want one at line 10 containing %q", ps, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Slack.AppToken != tt.wantApp || cfg.Slack.BotToken != tt.wantBot {
				t.Errorf("tokens = %q, %q; want %q, %q", cfg.Slack.AppToken, cfg.Slack.BotToken, tt.wantApp, tt.wantBot)
			}
		})
	}
}

func TestEnvExpansionInOtherValues(t *testing.T) {
	t.Setenv("HP_NS", "team-a")
	t.Setenv("HP_WORKERS", "3")
	cfg, err := Parse([]byte("slack: {channels: [C0123OPS], workers: ${HP_WORKERS}}\nclusters: [{name: dev, namespaces: [${HP_NS}]}]\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Slack.Workers != 3 || cfg.Clusters[0].DefaultNamespace != "team-a" {
		t.Errorf("workers = %d, defaultNamespace = %q; want 3, team-a", cfg.Slack.Workers, cfg.Clusters[0].DefaultNamespace)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimal+"approvals:\n  groups: {leads: {users: [U0LEAD1]}}\n  rules: [{approvers: leads, required: 1}]\n"+
		"reports: [{name: r, schedule: '@daily', channel: C0123OPS}]\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"slack.command", cfg.Slack.Command, "/hp"},
		{"slack.workers", cfg.Slack.Workers, 8},
		{"slack.queueSize", cfg.Slack.QueueSize, 256},
		{"slack.approvalsChannel", cfg.Slack.ApprovalsChannel, "C0123OPS"},
		{"redis.keyPrefix", cfg.Redis.KeyPrefix, "hyperops"},
		{"redis.requestTTL", cfg.Redis.RequestTTL.Std(), 720 * time.Hour},
		{"redis.dedupeTTL", cfg.Redis.DedupeTTL.Std(), time.Hour},
		{"environment", cfg.Clusters[0].Environment, EnvProduction},
		{"defaultNamespace", cfg.Clusters[0].DefaultNamespace, "ml"},
		{"profiles", cfg.Clusters[0].Profiles["default"].ServiceAccount, "default"},
		{"rule expiresAfter", cfg.Approvals.Rules[0].ExpiresAfter.Std(), time.Hour},
		{"risk medium", cfg.Risk.HourlyCost.Medium, 50.0},
		{"risk high", cfg.Risk.HourlyCost.High, 500.0},
		{"reservation outlived", cfg.Risk.ReservationOutlived, ReservationRefuse},
		{"reservation warning", cfg.Risk.ReservationWarnBefore.Std(), time.Hour},
		{"pricing.source", cfg.Pricing.Source, "builtin"},
		{"pricing.cacheTTL", cfg.Pricing.CacheTTL.Std(), 24 * time.Hour},
		{"report timezone", cfg.Reports[0].Timezone, "UTC"},
		{"report samples", cfg.Reports[0].Samples, 30},
		{"server.listen", cfg.Server.Listen, ":8080"},
		{"log.level", cfg.Log.Level, "info"},
		{"log.format", cfg.Log.Format, "auto"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestDefaultsKeepExplicitValues(t *testing.T) {
	cfg, err := Parse([]byte(`
slack: {channels: [C0123OPS, C0456OPS], approvalsChannel: C0456OPS, workers: 2, apiURL: "http://127.0.0.1:9000/api"}
clusters: [{name: dev, namespaces: [a, b], defaultNamespace: b, environment: staging}]
`), "x")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Slack.ApprovalsChannel != "C0456OPS" || cfg.Slack.Workers != 2 || cfg.Clusters[0].DefaultNamespace != "b" ||
		cfg.Clusters[0].Environment != EnvStaging {
		t.Errorf("explicit values overwritten: %+v %+v", cfg.Slack, cfg.Clusters[0])
	}
	if cfg.Slack.APIURL != "http://127.0.0.1:9000/api/" {
		t.Errorf("apiURL = %q, want a trailing slash added", cfg.Slack.APIURL)
	}
}

// TestAllProblemsAtOnce is the acceptance case of issue 2: an unknown key, a negative limit and a bad cron
// expression are all named in one error.
func TestAllProblemsAtOnce(t *testing.T) {
	data := []byte(`slack:
  channels: [C0123OPS]
clusters:
  - name: dev
    namespaces: [ml]
    limits:
      maxNodesPerGroup: -1
    gpuNodez: {}
reports:
  - name: nightly
    schedule: "0 0 9 * * 1-5"
    channel: C0123OPS
`)
	_, err := Parse(data, "bad.yaml")
	ps := problemsOf(t, err)
	want := []struct {
		path string
		line int
		msg  string
	}{
		{"clusters[0].limits.maxNodesPerGroup", 7, "got -1"},
		{"clusters[0].gpuNodez", 8, `unknown key "gpuNodez"`},
		{"reports[0].schedule", 11, `report "nightly": bad cron expression "0 0 9 * * 1-5"`},
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), err)
	}
	for i, w := range want {
		p := ps[i]
		if p.Path != w.path || p.Line != w.line || !strings.Contains(p.Message, w.msg) || p.Source != "bad.yaml" {
			t.Errorf("problem %d = %+v, want path %s line %d containing %q", i, p, w.path, w.line, w.msg)
		}
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "bad.yaml:7: clusters[0].limits.maxNodesPerGroup: ") {
		t.Errorf("Error() = %q, want one problem a line as file:line: path: message", err.Error())
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, yaml string
		path       string
		line       int
		msg        string
	}{
		{"top level", "slak: {}\n", "slak", 1, `unknown key "slak" (allowed here: access, agents, approvals, audit, aws,`},
		{"nested", "slack:\n  channels: [C0123OPS]\n  chanels: []\n", "slack.chanels", 3, `unknown key "chanels"`},
		{"case", "slack:\n  apiUrl: x\n", "slack.apiUrl", 2, `did you mean "apiURL"?`},
		{"in a list item", "clusters:\n  - name: a\n    namespace: [x]\n", "clusters[0].namespace", 3, `unknown key "namespace"`},
		{"second list item", "clusters:\n  - name: a\n  - name: b\n    nmae: c\n", "clusters[1].nmae", 4, `unknown key "nmae"`},
		{"flow mapping", "risk: {hourlyCost: {medium: 1, hihg: 2}}\n", "risk.hourlyCost.hihg", 1, `unknown key "hihg"`},
		{"in a map value", "approvals:\n  groups:\n    leads:\n      members: [U0LEAD1]\n", "approvals.groups.leads.members", 4, `unknown key "members"`},
		{"under a template", "clusters:\n  - hyperpod:\n      templates:\n        t:\n          role: x\n",
			"clusters[0].hyperpod.templates.t.role", 5, `unknown key "role"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parseProblem(t, tt.yaml, tt.path, tt.line, tt.msg)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		path       string
		line       int
		msg        string
	}{
		{"string for int", "slack:\n  workers: many\n", "slack.workers", 2, `cannot use "many" here: want a whole number`},
		{"scalar for list", "slack:\n  channels: C0123OPS\n", "slack.channels", 2, `want a list`},
		{"list for mapping", "risk: [1]\n", "risk", 1, `cannot use a list here: want a mapping (Risk)`},
		{"bad duration", "redis:\n  dedupeTTL: 10 minutes\n", "redis.dedupeTTL", 2, `invalid duration "10 minutes"`},
		{"duration without unit", "pricing: {cacheTTL: 30}\n", "pricing.cacheTTL", 1, `invalid duration "30"`},
		{"flow values on one line", "risk: {hourlyCost: {medium: 1, high: lots}}\n", "risk.hourlyCost.high", 1, `"lots"`},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", "log.level", 3, `key "level" is already defined at line 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, p := parseProblem(t, tt.yaml, tt.path, tt.line, tt.msg)
			for _, other := range ps {
				if other != p && other.Path == tt.path {
					t.Errorf("the same path is reported twice: %+v", other)
				}
			}
		})
	}
}

func TestFatalInput(t *testing.T) {
	tests := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"empty", "", 0, "the configuration is empty"},
		{"only comments", "# nothing\n", 0, "the configuration is empty"},
		{"unclosed flow list", "slack:\n  channels: [C0123OPS\nredis: {}\n", 2, "invalid YAML: did not find expected ',' or ']'"},
		{"list item in a mapping", "slack:\n  command: /hp\n  - C0123OPS\n", 2, "invalid YAML: did not find expected key"},
		{"scanner error", "a: 1\nb: 2\n c: 3\n", 3, "invalid YAML: mapping values are not allowed"},
		{"tab indentation", "slack:\n\tchannels: []\n", 2, "invalid YAML"},
		{"two documents", minimal + "---\nslack: {}\n", 7, "more than one YAML document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "x.yaml")
			if cfg != nil {
				t.Fatalf("got a config: %+v", cfg)
			}
			ps := problemsOf(t, err)
			if len(ps) != 1 || ps[0].Line != tt.line || !strings.Contains(ps[0].Message, tt.msg) {
				t.Errorf("problems = %+v, want one at line %d containing %q", ps, tt.line, tt.msg)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "hyperops.yaml")
	if err := os.WriteFile(good, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good); err != nil {
		t.Errorf("Load(%s) = %v", good, err)
	}
	_, err := Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("slack: {channels: [general]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if ps := problemsOf(t, err); ps[0].Source != bad {
		t.Errorf("problem source = %q, want %q", ps[0].Source, bad)
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Source: "a.yaml", Line: 3, Path: "log.level", Message: "bad"}, "a.yaml:3: log.level: bad"},
		{Problem{Source: "a.yaml", Path: "clusters", Message: "none"}, "a.yaml: clusters: none"},
		{Problem{Line: 3, Path: "log.level", Message: "bad"}, "line 3: log.level: bad"},
		{Problem{Path: "log.level", Message: "bad"}, "log.level: bad"},
		{Problem{Message: "empty"}, "empty"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
