package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/internal/testenv"
)

// A key file made readable by others while the gateway runs is refused on
// the next request: the client gets a generic 500 in its protocol's shape
// that names neither the file nor the fix, the gateway's log has both.
func TestKeyFileMadeReadableWhileServingIsRefused(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not describe access on Windows")
	}
	var log testenv.Buffer
	w := newWorld(t, withGateway(func(o *gateway.Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) }))
	auth := []string{"Authorization", "Bearer " + w.key, "Content-Type", "application/json"}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, auth...); st != 200 {
		t.Fatalf("first call = %d %v", st, m)
	}
	if err := os.Chmod(w.keys.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chatBody}, {"POST", "/v1/messages", messagesBody}, {"GET", "/v1/models", ""},
	} {
		st, m := w.call(t, c.method, c.path, "", c.body, auth...)
		raw := strings.ToLower(mustString(m))
		if st != 500 || strings.Contains(raw, "chmod") || strings.Contains(raw, strings.ToLower(w.keys.Path())) || !strings.Contains(raw, "key store") {
			t.Errorf("%s %s with a 0644 key file = %d %v, want a generic 500", c.method, c.path, st, m)
		}
	}
	if l := log.String(); !strings.Contains(l, "chmod 600 "+w.keys.Path()) || strings.Contains(l, w.key) {
		t.Errorf("the log does not say what to fix, or holds the key:\n%s", l)
	}
	if err := os.Chmod(w.keys.Path(), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, auth...); st != 200 {
		t.Errorf("after chmod 600 = %d %v", st, m)
	}
}

func mustString(m map[string]any) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k)
		b.WriteString("=")
		if sub, ok := v.(map[string]any); ok {
			b.WriteString(mustString(sub))
		} else if s, ok := v.(string); ok {
			b.WriteString(s)
		}
		b.WriteString(" ")
	}
	return b.String()
}

// bearer is the headers of a JSON call made with key.
func bearer(key string) []string {
	return []string{"Authorization", "Bearer " + key, "Content-Type", "application/json"}
}

func chatWith(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
}

// errMessage is error.message of a gateway error (both protocols).
func errMessage(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["message"].(string)
	return s
}

// Model calls and administration take separate keys: an admin key is
// refused on every /v1/ route (it is not handed to clients), a call key
// (the default role) makes calls.
func TestAdminKeyMakesNoModelCalls(t *testing.T) {
	w := newWorld(t)
	admin, k, err := w.keys.Create(gateway.KeySpec{Name: "ops", Project: "demo", Role: gateway.RoleAdmin})
	if err != nil || !k.Admin() {
		t.Fatalf("admin key = %+v, %v", k, err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chatBody}, {"POST", "/v1/responses", `{"model":"builder","input":"hi"}`},
		{"POST", "/v1/messages", messagesBody}, {"POST", "/v1/messages/count_tokens", messagesBody},
		{"GET", "/v1/models", ""}, {"GET", "/v1/models/builder", ""},
	} {
		st, m := w.call(t, c.method, c.path, "", c.body, bearer(admin)...)
		if msg := errMessage(m); st != 400 || !strings.Contains(msg, "admin key") || !strings.Contains(msg, "--role call") {
			t.Errorf("%s %s with an admin key = %d %q, want 400 naming the call role", c.method, c.path, st, msg)
		}
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, bearer(w.key)...); st != 200 {
		t.Errorf("call key = %d %v", st, m)
	}
	if _, _, err := w.keys.Create(gateway.KeySpec{Role: gateway.RoleAdmin, Agent: "builder"}); err == nil {
		t.Error("an admin key bound to an agent was created")
	}
	if _, _, err := w.keys.Create(gateway.KeySpec{Role: "root"}); err == nil {
		t.Error("a key with an unknown role was created")
	}
}

// A key file written before keys had roles holds keys without one: they
// are call keys, so they keep making model calls and do not become (or
// stay) console admins.
func TestKeyWithoutRoleIsACallKey(t *testing.T) {
	w := newWorld(t)
	const token = "cbk_00112233445566ff_legacy-secret-for-tests"
	sum := sha256.Sum256([]byte(token))
	data := `{"version":1,"keys":[{"id":"00112233445566ff","project":"demo","created_at":"2026-01-02T03:04:05Z","sha256":"` + hex.EncodeToString(sum[:]) + `"}]}`
	if err := os.WriteFile(w.keys.Path(), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := w.keys.Check(token)
	if err != nil || k.Admin() || k.Role != "" {
		t.Fatalf("legacy key = %+v, %v; want a key without a role, not admin", k, err)
	}
	if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatBody, bearer(token)...); st != 200 {
		t.Errorf("legacy key on a model call = %d %v", st, m)
	}
}

// A key's scope holds on every request: bound to an agent, it calls only
// as that agent on the agent's own tier and providers, whatever model name
// or X-CortexBuild-Agent header it sends; with allowed models, it sends
// only those.
func TestKeyScopeIsEnforcedOnEveryRequest(t *testing.T) {
	w := newWorld(t)
	bound, _, err := w.keys.Create(gateway.KeySpec{Name: "claude-code", Project: "demo", Agent: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"builder", "claude-sonnet-4-6"} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith(model), bearer(bound)...); st != 200 {
			t.Errorf("bound key, model %s (routes as builder) = %d %v", model, st, m)
		}
	}
	for _, c := range []struct{ model, agentHeader, want string }{
		{"planner", "", "routes as agent planner"},
		{"fast_cheap", "", "routes to tier fast_cheap"},
		{"cheap", "", "routes to tier fast_cheap"},
		{"pinned-gpt", "", "routes to model gpt-5-mini, on gpt"},
		{"gpt/gpt-5-mini", "", "routes to model gpt-5-mini, on gpt"},
		{"builder", "critic", "bound to agent builder; it cannot call as critic"},
	} {
		hdr := bearer(bound)
		if c.agentHeader != "" {
			hdr = append(hdr, gateway.HeaderAgent, c.agentHeader)
		}
		for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
			body := chatWith(c.model)
			if path == "/v1/messages" {
				body = `{"model":"` + c.model + `","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
			}
			st, m := w.call(t, "POST", path, "", body, hdr...)
			if msg := errMessage(m); st != 400 || !strings.Contains(msg, c.want) {
				t.Errorf("%s, bound key, model %s, agent header %q = %d %q, want 400 %q", path, c.model, c.agentHeader, st, msg, c.want)
			}
		}
	}

	limited, _, err := w.keys.Create(gateway.KeySpec{Name: "ci", Project: "demo", Models: []string{"cheap", "gpt/gpt-5-mini"}})
	if err != nil {
		t.Fatal(err)
	}
	// "pinned-gpt" resolves to gpt/gpt-5-mini, an allowed model.
	for _, model := range []string{"cheap", "gpt/gpt-5-mini", "pinned-gpt"} {
		if st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith(model), bearer(limited)...); st != 200 {
			t.Errorf("allowed model %s = %d %v", model, st, m)
		}
	}
	for _, model := range []string{"builder", "fast_cheap", "claude-sonnet-4-6", "claude/claude-opus-4-1"} {
		st, m := w.call(t, "POST", "/v1/chat/completions", "", chatWith(model), bearer(limited)...)
		if msg := errMessage(m); st != 400 || !strings.Contains(msg, "may send only the models cheap, gpt/gpt-5-mini") {
			t.Errorf("model %s outside the key's list = %d %q", model, st, msg)
		}
	}
}
