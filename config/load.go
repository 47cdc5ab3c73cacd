package config

import (
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/provider"
)

// ErrNotFound is returned by [Find] when no configuration file exists in
// the directory or any parent.
var ErrNotFound = errors.New("no " + Dir + "/" + FileName + " found")

// CeilingEnv names the environment variable that bounds the upward search
// for a project, like git's GIT_CEILING_DIRECTORIES: a list of absolute
// directories, separated like PATH, that the search does not enter from
// below. The directory it starts in is always searched.
const CeilingEnv = "CORTEXBUILD_CEILING_DIRECTORIES"

// Ceilings parses a [CeilingEnv] value; empty and relative entries are
// ignored.
func Ceilings(v string) []string {
	var cs []string
	for _, c := range filepath.SplitList(v) {
		if filepath.IsAbs(c) {
			cs = append(cs, filepath.Clean(c))
		}
	}
	return cs
}

// Upward yields dir, an absolute path, then its parents, nearest first,
// up to the root or to the first of ceilings, which is not yielded. A
// ceiling matches a parent spelled the same or, symbolic links resolved,
// the same directory.
func Upward(dir string, ceilings []string) iter.Seq[string] {
	stop := map[string]bool{}
	for _, c := range ceilings {
		stop[filepath.Clean(c)] = true
		if real, err := filepath.EvalSymlinks(c); err == nil {
			stop[real] = true
		}
	}
	stopAt := func(d string) bool {
		if len(stop) == 0 {
			return false
		}
		if stop[d] {
			return true
		}
		real, err := filepath.EvalSymlinks(d)
		return err == nil && stop[real]
	}
	return func(yield func(string) bool) {
		for d := filepath.Clean(dir); ; {
			if !yield(d) {
				return
			}
			parent := filepath.Dir(d)
			if parent == d || stopAt(parent) {
				return
			}
			d = parent
		}
	}
}

// Find returns the configuration file for a project: dir/.cortexbuild/
// llm-config.yaml, or the same in the nearest parent directory that has one,
// not searching a ceiling (see [CeilingEnv]) or above it.
func Find(dir string, ceilings ...string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	last := abs
	for d := range Upward(abs, ceilings) {
		p := filepath.Join(d, Dir, FileName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		last = d
	}
	where := "or its parents"
	if parent := filepath.Dir(last); parent != last {
		where = fmt.Sprintf("or its parents below %s (%s)", parent, CeilingEnv)
	}
	return "", fmt.Errorf("%w in %s %s: run 'cortexbuild init' to create one", ErrNotFound, abs, where)
}

// Load reads, decodes and validates the file at path against the adapter
// types in reg. Credentials are not resolved here; see [File.Resolve].
func Load(path string, reg *provider.Registry) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, data, reg)
	if f != nil {
		if st, serr := os.Stat(path); serr == nil {
			f.perm, f.permKnown = st.Mode().Perm(), true
		}
	}
	return f, err
}

// Parse decodes and validates data; file names it in messages.
func Parse(file string, data []byte, reg *provider.Registry) (*File, error) {
	var f File
	derr := yamlx.Decode(file, data, &f)
	var errs yamlx.Errors
	if derr != nil && !errors.As(derr, &errs) {
		return nil, derr
	}
	if len(errs) == 1 && strings.HasPrefix(errs[0].Msg, "invalid YAML") {
		return nil, errs.Err()
	}
	f.Path = file
	// Validate what decoded too, so one run reports every problem.
	var verrs yamlx.Errors
	if verr := f.validate(reg); verr != nil {
		errors.As(verr, &verrs)
	}
	if all := append(errs, verrs...); len(all) > 0 {
		return nil, all.Err()
	}
	return &f, nil
}

// Default returns the configuration used when a project has no file.
func Default() *File { return &File{Version: CurrentVersion} }

var instanceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func suggest(s string, names []string) string {
	if c := provider.Closest(s, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

func (f *File) validate(reg *provider.Registry) error {
	var errs yamlx.Errors
	add := func(p yamlx.Pos, format string, args ...any) { errs = append(errs, p.Errorf(format, args...)) }

	if f.Version != 0 && f.Version != CurrentVersion {
		add(f.Pos.Key("version"), "version %d is not supported by this build: write version: %d", f.Version, CurrentVersion)
	}
	if f.Project != "" && !ledger.ValidProject(f.Project) {
		add(f.Pos.Key("project"), "project %q is not a project id: write 1 to 100 lower-case letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. project: %s), or remove the key to derive it from the project directory", f.Project, projectSlug(f.Project))
	}
	names := f.ProviderNames()
	for _, name := range names {
		p := f.Providers[name]
		where := "providers." + name
		if p == nil {
			add(f.Pos.Key("providers"), "%s is empty: give it at least type:", where)
			continue
		}
		if !instanceName.MatchString(name) {
			add(p.Pos, "%s: provider names use lower-case letters, digits, '-' and '_' (for example %q)", where, strings.ToLower(name))
		}
		r, err := reg.Lookup(p.Type)
		if err != nil {
			add(p.Pos.Key("type"), "%s.type: %v", where, err)
			continue
		}
		switch {
		case len(r.Profiles) == 0 && p.Profile != "":
			add(p.Pos.Key("profile"), "%s.profile: type %q has no profiles; remove profile:", where, p.Type)
		case len(r.Profiles) > 0 && p.Profile != "" && !slices.Contains(r.Profiles, p.Profile):
			add(p.Pos.Key("profile"), "%s.profile: unknown profile %q%s; valid: %s", where, p.Profile, suggest(p.Profile, r.Profiles), strings.Join(r.Profiles, ", "))
		}
		if p.BaseURL != "" {
			u, err := url.Parse(p.BaseURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(p.Pos.Key("base_url"), "%s.base_url: %q is not an http(s) URL; write e.g. http://127.0.0.1:11434/v1", where, p.BaseURL)
			} else if u.User != nil {
				add(p.Pos.Key("base_url"), "%s.base_url: do not put credentials in the URL; use credentials:", where)
			}
		}
		var fields []string
		for _, c := range r.Credentials {
			fields = append(fields, c.Name)
		}
		for _, key := range slices.Sorted(maps.Keys(p.Credentials)) {
			if _, ok := r.Credential(key); !ok {
				add(p.Credentials[key].Pos(), "%s.credentials: unknown field %q for type %q%s; valid fields: %s", where, key, p.Type, suggest(key, fields), strings.Join(fields, ", "))
			}
		}
		if p.MaxResponseBytes < 0 {
			add(p.Pos.Key("max_response_bytes"), "%s.max_response_bytes must not be negative, got %d; write a size in bytes such as 33554432 (0 means the default, 32 MiB)", where, p.MaxResponseBytes)
		}
		for tier, model := range p.Models {
			if strings.TrimSpace(model) == "" {
				add(p.Pos.Key("models"), "%s.models.%s: write a model id, e.g. %q", where, tier, r.DefaultModels[tier])
			}
		}
	}
	checkRefs := func(pos yamlx.Pos, where string, refs []string) {
		seen := map[string]bool{}
		for _, r := range refs {
			if _, ok := f.Providers[r]; !ok {
				add(pos, "%s: provider %q is not defined under providers:%s; defined: %s", where, r, suggest(r, names), orNone(names))
			}
			if seen[r] {
				add(pos, "%s: provider %q is listed twice", where, r)
			}
			seen[r] = true
		}
	}
	checkRefs(f.Routing.Pos.Key("preference"), "routing.preference", f.Routing.Preference)
	if f.Routing.MaxRetryAfter > 24*time.Hour {
		add(f.Routing.Pos.Key("max_retry_after"), "routing.max_retry_after: %s is longer than a day; write e.g. 60s", f.Routing.MaxRetryAfter)
	}
	cb := f.Routing.CircuitBreaker
	if cb.Failures < 0 {
		add(cb.Pos.Key("failures"), "routing.circuit_breaker.failures must be positive, got %d; write e.g. 5 (or enabled: false to turn the breakers off)", cb.Failures)
	}
	for key, d := range map[string]time.Duration{"cooldown": cb.Cooldown, "max_cooldown": cb.MaxCooldown} {
		if d > 24*time.Hour {
			add(cb.Pos.Key(key), "routing.circuit_breaker.%s: %s is longer than a day; write e.g. 30s", key, d)
		}
	}
	if cb.Cooldown > 0 && cb.MaxCooldown > 0 && cb.MaxCooldown < cb.Cooldown {
		add(cb.Pos.Key("max_cooldown"), "routing.circuit_breaker.max_cooldown (%s) is shorter than cooldown (%s); write at least %s", cb.MaxCooldown, cb.Cooldown, cb.Cooldown)
	}
	for key, v := range map[string]*int64{"requests": f.Routing.RateLimitHeadroom.Requests, "tokens": f.Routing.RateLimitHeadroom.Tokens} {
		if v != nil && *v < 0 {
			add(f.Routing.RateLimitHeadroom.Pos.Key(key), "routing.rate_limit_headroom.%s must not be negative, got %d; write 0 to turn the check off", key, *v)
		}
	}
	known := orchestrator.AgentNames()
	for _, name := range slices.Sorted(maps.Keys(f.Agents)) {
		a := f.Agents[name]
		where := "agents." + name
		if a == nil {
			add(f.Pos.Key("agents"), "%s is empty: remove it or set tier:", where)
			continue
		}
		if _, ok := orchestrator.DefaultAgentRouting[name]; !ok && a.Tier == "" {
			add(a.Pos, "unknown agent %q%s: the agents are %s; a custom agent must set tier:", name, suggest(name, known), strings.Join(known, ", "))
		}
		checkRefs(a.Pos.Key("providers"), where+".providers", a.Providers)
		if a.Budget != nil && *a.Budget < 0 {
			add(a.Pos.Key("budget"), "%s.budget must not be negative, got %s", where, a.Budget)
		}
		if a.OverBudget != "" && a.OverBudget != OverBudgetAbort && a.OverBudget != OverBudgetEscalate {
			add(a.Pos.Key("over_budget"), "%s.over_budget: %q is not an action%s; write abort or escalate", where, a.OverBudget, suggest(string(a.OverBudget), []string{"abort", "escalate"}))
		}
		if a.MaxTokens < 0 {
			add(a.Pos.Key("max_tokens"), "%s.max_tokens must be positive, got %d", where, a.MaxTokens)
		}
	}
	for key, m := range map[string]*provider.Money{"task": f.Budgets.Task, "project_monthly": f.Budgets.ProjectMonthly, "confirm_above": f.Budgets.ConfirmAbove} {
		if m != nil && *m < 0 {
			add(f.Budgets.Pos.Key(key), "budgets.%s must not be negative, got %s; write an amount in USD such as \"25.00\"", key, m)
		}
	}
	f.Budgets.validateAlerts(add)
	if tz := f.Budgets.Timezone; tz != "" {
		if _, err := time.LoadLocation(tz); err != nil {
			add(f.Budgets.Pos.Key("timezone"), "budgets.timezone: unknown time zone %q; write an IANA name such as UTC or Europe/Paris", tz)
		}
	}
	enum := func(pos yamlx.Pos, where, v string, valid ...string) {
		if v != "" && !slices.Contains(valid, v) {
			add(pos, "%s: %q is not valid%s; write one of: %s", where, v, suggest(v, valid), strings.Join(valid, ", "))
		}
	}
	enum(f.Locality.Pos.Key("mode"), "locality.mode", f.Locality.Mode, LocalityConsent, LocalityLocalOnly)
	enum(f.Cache.Pos.Key("backend"), "cache.backend", f.Cache.Backend, CacheMemory, CacheRedis, CacheOff)
	enum(f.Store.Pos.Key("backend"), "store.backend", f.Store.Backend, StoreSQLite, StorePostgres)
	if f.Cache.Backend == CacheRedis && f.Cache.URL.IsZero() {
		add(f.Cache.Pos.Key("backend"), "cache.backend is redis but cache.url is not set; write url: ${REDIS_URL} or redis://127.0.0.1:6379/0")
	}
	if f.Cache.MaxEntries < 0 {
		add(f.Cache.Pos.Key("max_entries"), "cache.max_entries must be positive, got %d", f.Cache.MaxEntries)
	}
	f.validateGateway(add, names, known)
	if f.Store.Backend == StorePostgres && f.Store.DSN.IsZero() {
		add(f.Store.Pos.Key("backend"), "store.backend is postgres but store.dsn is not set; write dsn: ${DATABASE_URL}")
	}
	errs = append(errs, f.Observability.validate(f.Locality.Mode == LocalityLocalOnly)...)
	return errs.Err()
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ProviderNames returns the configured provider instance names, sorted.
func (f *File) ProviderNames() []string { return slices.Sorted(maps.Keys(f.Providers)) }

// OrchestrationEnabled reports whether the orchestration engine is on: the
// environment's CORTEXBUILD_LLM=1 (or true) or orchestration: true.
func (f *File) OrchestrationEnabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch strings.ToLower(getenv("CORTEXBUILD_LLM")) {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off":
		return false
	}
	return f.Orchestration != nil && *f.Orchestration
}

// Warnings returns advice that is not an error: inline secrets, for
// example.
func (f *File) Warnings() []string {
	var out []string
	for _, name := range f.ProviderNames() {
		p := f.Providers[name]
		for _, key := range slices.Sorted(maps.Keys(p.Credentials)) {
			s := p.Credentials[key]
			if s.EnvVar() == "" && !s.IsZero() {
				out = append(out, fmt.Sprintf("%s: providers.%s.credentials.%s holds a literal value; prefer ${ENV_VAR} so the secret stays out of the file", s.Pos(), name, key))
			}
		}
	}
	out = append(out, f.Observability.warnings()...)
	if w := f.permissionWarning(); w != "" {
		out = append(out, w)
	}
	return out
}

// inlineSecrets names the fields of f that hold a secret in the file
// itself rather than a ${ENV_VAR} reference: literal credentials, trace
// export headers and webhook URLs, and store or cache URLs that carry a
// password.
func (f *File) inlineSecrets() []string {
	var out []string
	literal := func(s Secret) bool { return s.EnvVar() == "" && !s.IsZero() }
	for _, name := range f.ProviderNames() {
		p := f.Providers[name]
		for _, key := range slices.Sorted(maps.Keys(p.Credentials)) {
			if literal(p.Credentials[key]) {
				out = append(out, "providers."+name+".credentials."+key)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.Observability.Traces.Headers)) {
		if literal(f.Observability.Traces.Headers[name]) {
			out = append(out, "observability.traces.headers."+name)
		}
	}
	if literal(f.Notifications.WebhookURL) {
		out = append(out, "notifications.webhook_url")
	}
	for field, s := range map[string]Secret{"store.dsn": f.Store.DSN, "cache.url": f.Cache.URL} {
		if literal(s) && hasPassword(s.raw) {
			out = append(out, field)
		}
	}
	slices.Sort(out)
	return out
}

// hasPassword reports whether a connection URL or key=value DSN carries a
// password.
func hasPassword(raw string) bool {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return true
		}
	}
	return strings.Contains(strings.ToLower(raw), "password=")
}

// permissionWarning warns when the file Load read holds secrets inline
// and its group or others may read it.
func (f *File) permissionWarning() string {
	if runtime.GOOS == "windows" || !f.permKnown || f.perm&0o077 == 0 {
		return ""
	}
	fields := f.inlineSecrets()
	if len(fields) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: mode %04o lets group or others read it, and it holds secrets inline (%s): run 'chmod 600 %s', or write them as ${ENV_VAR}",
		f.Path, f.perm, strings.Join(fields, ", "), f.Path)
}

// Resolve returns the settings to build provider name's adapter:
// credentials resolved from the file's ${ENV_VAR} references or, when the
// file sets none, from the schema's environment variables; f.Secrets, when
// set, is asked last (for a field the file does not set, or whose
// referenced variable is unset). A required
// credential that cannot be resolved is an error naming the variable and
// the file line.
func (f *File) Resolve(name string, reg *provider.Registry, lookup func(string) (string, bool)) (provider.Settings, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	p, ok := f.Providers[name]
	if !ok {
		return provider.Settings{}, fmt.Errorf("provider %q is not configured%s; configured: %s", name, suggest(name, f.ProviderNames()), orNone(f.ProviderNames()))
	}
	r, err := reg.Lookup(p.Type)
	if err != nil {
		return provider.Settings{}, p.Pos.Key("type").Errorf("providers.%s.type: %v", name, err)
	}
	s := provider.Settings{Name: name, Profile: p.Profile, BaseURL: p.BaseURL, Timeout: p.Timeout, MaxResponseBytes: p.MaxResponseBytes, Capabilities: provider.NewCapabilitySet(p.Capabilities...), Credentials: map[string]string{}, Models: map[provider.Tier]string{}}
	for t, m := range r.DefaultModels {
		s.Models[t] = m
	}
	for t, m := range p.Models {
		s.Models[t] = m
	}
	var errs, missing yamlx.Errors
	for _, field := range r.Credentials {
		if sec, ok := p.Credentials[field.Name]; ok {
			v, err := sec.Resolve(lookup)
			if err != nil {
				if sv, ok, serr := f.secret(name, field.Name); ok || serr != nil {
					if serr != nil {
						errs = append(errs, p.Pos.Errorf("providers.%s: %v", name, serr))
					}
					s.Credentials[field.Name] = sv
					continue
				}
				var pe *yamlx.Error
				if errors.As(err, &pe) {
					pe.Msg = fmt.Sprintf("providers.%s.credentials.%s: %s", name, field.Name, pe.Msg)
					missing = append(missing, pe)
				}
				continue
			}
			s.Credentials[field.Name] = v
			continue
		}
		envVars := r.EnvVarsFor(field, p.Profile, p.BaseURL)
		for _, env := range envVars {
			if v, ok := lookup(env); ok && v != "" {
				s.Credentials[field.Name] = v
				break
			}
		}
		if s.Credentials[field.Name] == "" {
			sv, _, serr := f.secret(name, field.Name)
			if serr != nil {
				errs = append(errs, p.Pos.Errorf("providers.%s: %v", name, serr))
			}
			if sv != "" {
				s.Credentials[field.Name] = sv
			}
		}
		if s.Credentials[field.Name] == "" && field.RequiredFor(p.Profile) {
			hint := "set credentials." + field.Name + " in the file"
			if len(envVars) > 0 {
				hint = "export " + envVars[0] + " or write credentials: {" + field.Name + ": ${" + envVars[0] + "}}"
			} else if len(field.EnvVars) > 0 {
				hint = "write credentials: {" + field.Name + ": ${" + field.EnvVars[0] + "}} (the environment is read only for " + r.DefaultBaseURL + ", not for base_url " + p.BaseURL + ")"
			}
			missing = append(missing, p.Pos.Errorf("providers.%s: credential %q is required and not set: %s", name, field.Name, hint))
		}
	}
	if all := append(errs, missing...); len(all) > 0 {
		return s, &MissingCredentialError{Provider: name, Errs: all}
	}
	return s, nil
}

// MissingCredentialError is the error of [File.Resolve] when credentials
// are not set (an unset ${VAR}, a required field with nothing in the
// environment or the secrets file) or the secrets file, which the
// provider needed, cannot be read (readable by others, not JSON): the
// provider cannot be used until they are, while the rest of the
// configuration can. Its Errs name the variables or the file, the lines
// and the fix.
type MissingCredentialError struct {
	Provider string
	Errs     yamlx.Errors
}

func (e *MissingCredentialError) Error() string { return e.Errs.Error() }
func (e *MissingCredentialError) Unwrap() error { return e.Errs }

// secret asks f.Secrets, when set, for a provider's credential field.
func (f *File) secret(name, field string) (string, bool, error) {
	if f.Secrets == nil {
		return "", false, nil
	}
	return f.Secrets.Credential(name, field)
}

// validateGateway checks the gateway section: a listen address, limits,
// and model names that resolve to a known agent, a tier or a model on a
// defined provider.
func (f *File) validateGateway(add func(yamlx.Pos, string, ...any), providers, agents []string) {
	g := &f.Gateway
	if g.Listen != "" {
		if _, port, err := net.SplitHostPort(g.Listen); err != nil || port == "" {
			add(g.Pos.Key("listen"), "gateway.listen: %q is not host:port; write e.g. 127.0.0.1:8787", g.Listen)
		}
	}
	if g.MaxBodyBytes < 0 {
		add(g.Pos.Key("max_body_bytes"), "gateway.max_body_bytes must be positive, got %d", g.MaxBodyBytes)
	}
	if g.MaxInFlight < 0 {
		add(g.Pos.Key("max_in_flight"), "gateway.max_in_flight must be positive, got %d", g.MaxInFlight)
	}
	if g.MaxInFlightPerKey < 0 {
		add(g.Pos.Key("max_in_flight_per_key"), "gateway.max_in_flight_per_key must be positive, got %d", g.MaxInFlightPerKey)
	}
	if g.HeaderTimeout < 0 {
		add(g.Pos.Key("header_timeout"), "gateway.header_timeout must not be negative, got %s", g.HeaderTimeout)
	}
	if g.BodyTimeout < 0 {
		add(g.Pos.Key("body_timeout"), "gateway.body_timeout must not be negative, got %s", g.BodyTimeout)
	}
	for _, h := range g.AllowedHosts {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, " \t\n/") {
			add(g.Pos.Key("allowed_hosts"), "gateway.allowed_hosts: %q is not a host name; write a name or name:port such as gateway.internal:8787", h)
		}
	}
	if g.ShutdownTimeout < 0 {
		add(g.Pos.Key("shutdown_timeout"), "gateway.shutdown_timeout must not be negative, got %s", g.ShutdownTimeout)
	}
	for _, name := range slices.Sorted(maps.Keys(g.Models)) {
		m := g.Models[name]
		where := "gateway.models." + name
		at := g.Pos.Key("models")
		if m != nil {
			at = m.Pos
		}
		if strings.TrimSpace(name) != name || name == "" || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			add(at, "gateway.models.%q: a model name must be non-empty, without leading or trailing spaces or control characters (inner spaces, as in \"GPT-5 (copilot)\", are fine)", name)
		}
		if m == nil {
			add(at, "%s is empty: write agent:, tier: or model:", where)
			continue
		}
		if m.Agent == "" && m.Tier == "" && m.Model == "" {
			add(m.Pos, "%s: write agent:, tier: or model: (for example {tier: balanced})", where)
		}
		if m.Tier != "" && m.Model != "" {
			add(m.Pos.Key("model"), "%s: model overrides tier; write one of them", where)
		}
		if m.Agent != "" {
			if _, ok := orchestrator.DefaultAgentRouting[m.Agent]; !ok {
				if _, ok := f.Agents[m.Agent]; !ok {
					add(m.Pos.Key("agent"), "%s.agent: unknown agent %q%s; the agents are %s, or one defined under agents:", where, m.Agent, suggest(m.Agent, agents), strings.Join(agents, ", "))
				}
			}
		}
		if m.Provider != "" {
			if _, ok := f.Providers[m.Provider]; !ok {
				add(m.Pos.Key("provider"), "%s.provider: provider %q is not defined under providers:%s; defined: %s", where, m.Provider, suggest(m.Provider, providers), orNone(providers))
			}
		}
	}
}
