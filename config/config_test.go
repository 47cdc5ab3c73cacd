package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testRegistry describes two adapter types the way real registrations do;
// the factories are never called by the config package.
func testRegistry(t testing.TB) *provider.Registry {
	t.Helper()
	never := func(provider.Settings) (provider.Adapter, error) {
		t.Fatal("config must not build adapters")
		return nil, nil
	}
	r, err := provider.NewRegistry(
		provider.Registration{Type: "anthropic", New: never,
			Credentials:   []provider.CredentialField{{Name: "api_key", EnvVars: []string{"ANTHROPIC_API_KEY"}, Secret: true, Required: true}},
			DefaultModels: map[provider.Tier]string{provider.TierBalanced: "claude-sonnet-4-6", provider.TierFastCheap: "claude-haiku-4-5"}},
		provider.Registration{Type: "openai_compatible", New: never, Profiles: []string{"openai", "ollama", "vllm", "lmstudio", "gateway"},
			Credentials: []provider.CredentialField{{Name: "api_key", EnvVars: []string{"OPENAI_API_KEY"}, Secret: true}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const valid = `version: 1
orchestration: true
providers:
  anthropic:
    type: anthropic
    credentials:
      api_key: ${TEST_ANTHROPIC_KEY}
    models:
      reasoning_heavy: claude-opus-4-7
  local:
    type: openai_compatible
    profile: ollama
    base_url: http://127.0.0.1:11434/v1
    timeout: 120s
    max_response_bytes: 1048576
routing:
  preference: [local, anthropic]
  allow_alternates: true
  max_retry_after: 30s
agents:
  critic:
    tier: reasoning_heavy
    providers: [anthropic]
    budget: "0.50"
    over_budget: escalate
  explore:
    cache: true
  doc_writer:
    tier: fast_cheap
budgets:
  task: 5
  project_monthly: "200.00"
  timezone: Europe/Paris
cache:
  backend: redis
  url: ${REDIS_URL}
  ttl: 24h
store:
  backend: sqlite
`

func TestParseValid(t *testing.T) {
	f, err := Parse("llm-config.yaml", []byte(valid), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Providers["local"].Profile; got != "ollama" {
		t.Errorf("profile = %q", got)
	}
	if *f.Agents["critic"].Budget != provider.MustMoney("0.50") || *f.Budgets.Task != 5*provider.Dollar {
		t.Errorf("budgets = %v %v", f.Agents["critic"].Budget, f.Budgets.Task)
	}
	if f.Providers["local"].Timeout.Seconds() != 120 || f.Routing.MaxRetryAfter.Seconds() != 30 {
		t.Error("durations not decoded")
	}
	if !f.OrchestrationEnabled(func(string) string { return "" }) || f.OrchestrationEnabled(func(string) string { return "0" }) {
		t.Error("orchestration switch wrong")
	}
	env := map[string]string{"TEST_ANTHROPIC_KEY": "sk-test-123"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, err := f.Resolve("anthropic", testRegistry(t), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if s.Credentials["api_key"] != "sk-test-123" || s.Models[provider.TierReasoningHeavy] != "claude-opus-4-7" || s.Models[provider.TierBalanced] != "claude-sonnet-4-6" {
		t.Errorf("settings = %+v", s)
	}
	if s.MaxResponseBytes != 0 {
		t.Errorf("max response bytes %d without max_response_bytes; want 0 (the adapters' default)", s.MaxResponseBytes)
	}
	// The optional key of a local server may stay unset.
	if s, err := f.Resolve("local", testRegistry(t), lookup); err != nil {
		t.Errorf("optional credential: %v", err)
	} else if s.MaxResponseBytes != 1048576 {
		t.Errorf("max response bytes %d; want max_response_bytes (1048576)", s.MaxResponseBytes)
	}
}

func TestCredentialFromSchemaEnvVar(t *testing.T) {
	f, err := Parse("c.yaml", []byte("providers:\n  claude:\n    type: anthropic\n"), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Resolve("claude", testRegistry(t), func(k string) (string, bool) { return "sk-env", k == "ANTHROPIC_API_KEY" })
	if err != nil || s.Credentials["api_key"] != "sk-env" {
		t.Fatalf("resolve from schema env var = %v, %v", s.Credentials, err)
	}
	_, err = f.Resolve("claude", testRegistry(t), func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "c.yaml:3:5") || !strings.Contains(err.Error(), "export ANTHROPIC_API_KEY") {
		t.Errorf("missing credential error = %v", err)
	}
}

func TestUnsetEnvVarNamesFileAndLine(t *testing.T) {
	f, err := Parse("llm-config.yaml", []byte(valid), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Resolve("anthropic", testRegistry(t), func(string) (string, bool) { return "", false })
	want := "llm-config.yaml:7:16: providers.anthropic.credentials.api_key: environment variable TEST_ANTHROPIC_KEY is not set"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error = %v\nwant %q", err, want)
	}
	if _, err := f.Resolve("antropic", testRegistry(t), nil); err == nil || !strings.Contains(err.Error(), `did you mean "anthropic"`) {
		t.Errorf("unknown provider error = %v", err)
	}
}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"invalid yaml", "providers:\n  a: [1,\n", "cfg.yaml:2:1: invalid YAML"},
		{"tab indent", "providers:\n\ta: 1\n", "indent with spaces"},
		{"unknown top key", "provders: {}\n", `cfg.yaml:1:1: unknown key "provders" at the top level (did you mean "providers"?)`},
		{"unknown provider type", "providers:\n  x:\n    type: antropic\n", `cfg.yaml:3:11: providers.x.type: unknown provider type "antropic" (did you mean "anthropic"?); known types: "anthropic", "openai_compatible"`},
		{"missing type", "providers:\n  x:\n    base_url: http://127.0.0.1:1/v1\n", `cfg.yaml:3:5: missing required key "type" in providers.x`},
		{"misspelt tier", "providers:\n  x:\n    type: anthropic\n    models:\n      reasoning-heavy: m\n", `cfg.yaml:5:7: providers.x.models: unknown tier "reasoning-heavy" (did you mean "reasoning_heavy"?)`},
		{"misspelt agent tier", "agents:\n  critic:\n    tier: balance\n", `cfg.yaml:3:11: agents.critic.tier: unknown tier "balance" (did you mean "balanced"?)`},
		{"negative budget", "budgets:\n  task: \"-5\"\n", `cfg.yaml:2:9: budgets.task must not be negative, got -5.00; write an amount in USD such as "25.00"`},
		{"non-numeric budget", "budgets:\n  project_monthly: lots\n", `cfg.yaml:2:20: budgets.project_monthly: invalid amount "lots": write a decimal number of US dollars such as 12.34`},
		{"budget as list", "budgets:\n  task: [1]\n", "cfg.yaml:2:9: budgets.task: expected a single value, got a list"},
		{"wrong type bool", "orchestration: maybe\n", "cfg.yaml:1:16: orchestration: expected true or false"},
		{"wrong type int", "agents:\n  builder:\n    max_tokens: lots\n", "cfg.yaml:3:17: agents.builder.max_tokens: expected a whole number"},
		{"duration without unit", "routing:\n  max_retry_after: 30\n", "add a unit: 30s"},
		{"unknown agent", "agents:\n  critc:\n    budget: \"1\"\n", `cfg.yaml:3:5: unknown agent "critc" (did you mean "critic"?)`},
		{"undefined provider ref", "providers:\n  anthropic: {type: anthropic}\nrouting:\n  preference: [anthropc]\n", `cfg.yaml:4:15: routing.preference: provider "anthropc" is not defined under providers: (did you mean "anthropic"?)`},
		{"bad profile", "providers:\n  l:\n    type: openai_compatible\n    profile: olama\n", `cfg.yaml:4:14: providers.l.profile: unknown profile "olama" (did you mean "ollama"?)`},
		{"profile on wrong type", "providers:\n  a:\n    type: anthropic\n    profile: ollama\n", "type \"anthropic\" has no profiles"},
		{"bad url", "providers:\n  a:\n    type: anthropic\n    base_url: localhost:11434\n", `is not an http(s) URL`},
		{"credentials in url", "providers:\n  a:\n    type: anthropic\n    base_url: http://u:p@127.0.0.1/\n", "do not put credentials in the URL"},
		{"unknown credential field", "providers:\n  a:\n    type: anthropic\n    credentials:\n      apikey: ${K}\n", `cfg.yaml:5:15: providers.a.credentials: unknown field "apikey" for type "anthropic" (did you mean "api_key"?)`},
		{"malformed env ref", "providers:\n  a:\n    type: anthropic\n    credentials:\n      api_key: $ANTHROPIC_API_KEY\n", "write ${NAME}"},
		{"bad over_budget", "agents:\n  critic:\n    over_budget: escalte\n", `did you mean "escalate"?`},
		{"bad locality", "locality:\n  mode: offline\n", `cfg.yaml:2:9: locality.mode: "offline" is not valid; write one of: consent, local-only`},
		{"redis without url", "cache:\n  backend: redis\n", "cache.url is not set"},
		{"postgres without dsn", "store:\n  backend: postgres\n", "store.dsn is not set"},
		{"bad timezone", "budgets:\n  timezone: Mars/Olympus\n", "unknown time zone"},
		{"negative max_response_bytes", "providers:\n  a:\n    type: anthropic\n    max_response_bytes: -1\n", "cfg.yaml:4:25: providers.a.max_response_bytes must not be negative, got -1"},
		{"duplicate key", "budgets:\n  task: \"1\"\n  task: \"2\"\n", `cfg.yaml:3:3: duplicate key "task" in budgets`},
		{"project id with spaces", "version: 1\nproject: My Service\n", `cfg.yaml:2:10: project "My Service" is not a project id: write 1 to 100 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. project: my-service)`},
		{"project id of a list", "project: [a]\n", `cfg.yaml:1:10: project: expected text, got a list`},
		{"future version", "version: 2\n", "version 2 is not supported"},
		{"top level list", "- a\n", "expected a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("cfg.yaml", []byte(tt.yaml), testRegistry(t))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.yaml)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n  %v\nwant it to contain:\n  %s", err, tt.want)
			}
		})
	}
}

func TestProjectID(t *testing.T) {
	f, err := Parse("cfg.yaml", []byte("project: billing.api_v2\n"), testRegistry(t))
	if err != nil || f.ProjectID("/srv/x") != "billing.api_v2" {
		t.Fatalf("explicit project: %v %v", f, err)
	}
	a, b := DeriveProjectID("/home/a/My Service"), DeriveProjectID("/home/b/My Service")
	if a == b || !strings.HasPrefix(a, "my-service-") || len(a) != len("my-service-")+8 {
		t.Errorf("derived ids %q and %q: want my-service-<8 hex digits>, different for different paths", a, b)
	}
	if DeriveProjectID("/home/a/My Service/") != a {
		t.Errorf("a trailing slash changes the id")
	}
	if got := DeriveProjectID("/"); got != "project-"+DeriveProjectID("/")[len("project-"):] {
		t.Errorf("root: %q", got)
	}
	for _, root := range []string{"/", "/srv/Ünïcode", "/srv/" + strings.Repeat("x", 300)} {
		if id := DeriveProjectID(root); !ledger.ValidProject(id) {
			t.Errorf("DeriveProjectID(%q) = %q, not a valid project id", root, id)
		}
	}
}

func TestEmptyFileIsDefaults(t *testing.T) {
	for _, body := range []string{"", "# only a comment\n"} {
		f, err := Parse("cfg.yaml", []byte(body), testRegistry(t))
		if err != nil || len(f.Providers) != 0 || f.OrchestrationEnabled(func(string) string { return "" }) {
			t.Errorf("%q: %v", body, err)
		}
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	_, err := Parse("cfg.yaml", []byte("budgets:\n  task: x\nlocality:\n  mode: y\nprovidrs: {}\n"), testRegistry(t))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "cfg.yaml:2:") || !strings.HasPrefix(lines[2], "cfg.yaml:5:") {
		t.Errorf("want three problems in file order, got:\n%v", err)
	}
}

func TestWarningsForLiteralSecrets(t *testing.T) {
	f, err := Parse("cfg.yaml", []byte("providers:\n  a:\n    type: anthropic\n    credentials:\n      api_key: sk-literal-value\n"), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	w := f.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "cfg.yaml:5:16") || strings.Contains(w[0], "sk-literal") {
		t.Errorf("warnings = %q", w)
	}
	b, _ := json.Marshal(f.Providers["a"].Credentials)
	if strings.Contains(string(b), "sk-literal") {
		t.Errorf("secret leaked through JSON: %s", b)
	}
}

func TestStarterIsValid(t *testing.T) {
	f, err := Parse("starter.yaml", Starter(), testRegistry(t))
	if err != nil {
		t.Fatalf("the starter configuration does not validate:\n%v", err)
	}
	if len(f.Warnings()) != 0 {
		t.Errorf("starter warns: %v", f.Warnings())
	}
}

func TestWriteStarterNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	path, err := WriteStarter(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("# mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteStarter(dir, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second init = %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "# mine\n" {
		t.Error("user file overwritten")
	}
	if _, err := WriteStarter(dir, true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, Starter()) {
		t.Error("--force did not write the starter")
	}
	found, err := Find(filepath.Join(dir, Dir))
	if err != nil || found != path {
		t.Errorf("Find from a subdirectory = %q, %v", found, err)
	}
	if _, err := Find(t.TempDir(), os.TempDir()); err == nil {
		t.Error("Find in an empty tree succeeded")
	}
}

// Find does not enter a ceiling directory from below, spelled as the path
// or through a symbolic link, and always searches where it starts.
func TestFindStopsBelowACeiling(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, Dir, FileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(root, "a")
	sub := filepath.Join(a, "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	type findCase struct {
		from     string
		ceilings []string
		found    bool
	}
	cases := []findCase{
		{sub, nil, true},
		{sub, []string{root}, false},
		{sub, []string{a}, false},
		{sub, []string{filepath.Join(root, "nowhere"), a}, false},
		{sub, []string{sub}, true},   // the start is searched, and its parents
		{a, []string{sub}, true},     // a ceiling below the start does nothing
		{root, []string{root}, true}, // the start is always searched
	}
	if link := filepath.Join(t.TempDir(), "link"); os.Symlink(a, link) == nil {
		cases = append(cases, findCase{sub, []string{link}, false})
	}
	for _, tc := range cases {
		got, err := Find(tc.from, tc.ceilings...)
		switch {
		case tc.found && (err != nil || got != path):
			t.Errorf("Find(%s, %v) = %q, %v; want %s", tc.from, tc.ceilings, got, err, path)
		case !tc.found && !errors.Is(err, ErrNotFound):
			t.Errorf("Find(%s, %v) = %q, %v; want ErrNotFound", tc.from, tc.ceilings, got, err)
		}
	}
	_, err := Find(sub, a)
	if want := "or its parents below " + a + " (" + CeilingEnv + ")"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v does not say %q", err, want)
	}
	sep := string(filepath.ListSeparator)
	y := filepath.Join(root, "x", "..", "y") + string(filepath.Separator)
	if got := Ceilings("relative" + sep + sep + y + sep + root); !slices.Equal(got, []string{filepath.Join(root, "y"), root}) {
		t.Errorf("Ceilings = %q", got)
	}
}

// The committed schema must match the Go types; run with -update after
// changing them.
func TestSchemaGolden(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "llm-config.schema.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "schema", "llm-config.schema.json"), got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("schema drifted from %s; run go test ./config -update", golden)
	}
	pub, err := os.ReadFile(filepath.Join("..", "schema", "llm-config.schema.json"))
	if err != nil || !bytes.Equal(pub, want) {
		t.Errorf("schema/llm-config.schema.json is stale; run go test ./config -update")
	}
	var doc map[string]any
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	props := doc["properties"].(map[string]any)
	for _, k := range []string{"providers", "agents", "budgets", "locality", "cache", "store", "routing", "pricing"} {
		if _, ok := props[k]; !ok {
			t.Errorf("schema lacks %s", k)
		}
	}
}

func TestGatewaySection(t *testing.T) {
	ok := `providers:
  anthropic:
    type: anthropic
gateway:
  listen: 127.0.0.1:9000
  shutdown_timeout: 10s
  max_body_bytes: 1048576
  models:
    claude-sonnet-4-6: {agent: builder}
    cheap: {agent: builder, tier: fast_cheap}
    pinned: {model: claude-opus-4-7, provider: anthropic}
    "GPT-5 (copilot)": {agent: builder}
    "claude-opus-*": {tier: balanced}
`
	f, err := Parse("cfg.yaml", []byte(ok), testRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	if f.Gateway.Models["GPT-5 (copilot)"] == nil || f.Gateway.Models["claude-opus-*"] == nil {
		t.Errorf("a display name with spaces or a pattern was not kept: %v", f.Gateway.Models)
	}
	if m := f.Gateway.Models["pinned"]; m == nil || m.Provider != "anthropic" || f.Gateway.Listen != "127.0.0.1:9000" || f.Gateway.MaxBodyBytes != 1<<20 {
		t.Errorf("gateway = %+v", f.Gateway)
	}
	bad := `providers:
  anthropic:
    type: anthropic
gateway:
  listen: nowhere
  models:
    a: {agent: buidler}
    b: {tier: balanced, model: x}
    c: {provider: anthropc, tier: fast_cheap}
    d: {}
    e: {tier: fastest}
    " padded": {tier: balanced}
`
	_, err = Parse("cfg.yaml", []byte(bad), testRegistry(t))
	if err == nil {
		t.Fatal("bad gateway section accepted")
	}
	for _, want := range []string{"gateway.listen: \"nowhere\" is not host:port", `gateway.models.a.agent: unknown agent "buidler" (did you mean "builder"?)`,
		"gateway.models.b: model overrides tier", `gateway.models.c.provider: provider "anthropc" is not defined under providers: (did you mean "anthropic"?)`,
		"gateway.models.d: write agent:, tier: or model:", "fastest",
		// the entry's own line, not the first entry's
		`cfg.yaml:12:16: gateway.models." padded": a model name must be non-empty, without leading or trailing spaces`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
