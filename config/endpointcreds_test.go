package config_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/provider"
)

// captured is one request a capture server received: every header value and
// the raw query, where a credential could travel.
type captured struct {
	host   string
	header http.Header
	query  string
}

type captureServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []captured
}

func newCaptureServer(t *testing.T) *captureServer {
	c := &captureServer{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.reqs = append(c.reqs, captured{host: r.Host, header: r.Header.Clone(), query: r.URL.RawQuery})
		c.mu.Unlock()
		http.Error(w, `{"error":{"message":"capture server"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *captureServer) requests() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), c.reqs...)
}

// toCapture sends every request, whatever its URL, to the capture server:
// it stands in for the vendor's own endpoint without leaving loopback.
type toCapture struct{ target *url.URL }

func (tc toCapture) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = tc.target.Scheme, tc.target.Host
	return http.DefaultTransport.RoundTrip(r)
}

// A vendor's key in the environment reaches only the vendor's own
// endpoint, and a configured key only the provider it was configured for:
// for every profile of the OpenAI-compatible adapter and for Anthropic and
// Gemini, a capture server records which credential arrives.
func TestCredentialsReachOnlyTheirEndpoint(t *testing.T) {
	env := map[string]string{
		"OPENAI_API_KEY":    "sk-env-openai-7f3a",
		"ANTHROPIC_API_KEY": "sk-ant-env-anthropic-7f3a",
		"GEMINI_API_KEY":    "env-gemini-7f3a",
		"GOOGLE_API_KEY":    "env-google-7f3a",
		"MY_LOCAL_KEY":      "configured-local-7f3a",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, k := range []string{"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	reg := builtin.Registry()
	cases := []struct {
		name string
		// provider is the YAML under providers.p; BASE is replaced by the
		// capture server's URL.
		provider string
		// vendor routes the default endpoint to the capture server.
		vendor bool
		// want is the credential that must arrive ("" none); refused
		// means the configuration is refused before any request.
		want    string
		refused string
	}{
		{name: "openai at api.openai.com", provider: "type: openai_compatible\n    profile: openai", vendor: true, want: env["OPENAI_API_KEY"]},
		{name: "openai at another host", provider: "type: openai_compatible\n    profile: openai\n    base_url: BASE", refused: "api_key"},
		{name: "openai at another host with credentials", provider: "type: openai_compatible\n    profile: openai\n    base_url: BASE\n    credentials:\n      api_key: ${MY_LOCAL_KEY}", want: env["MY_LOCAL_KEY"]},
		{name: "ollama", provider: "type: openai_compatible\n    profile: ollama\n    base_url: BASE"},
		{name: "ollama default base url", provider: "type: openai_compatible\n    profile: ollama", vendor: true},
		{name: "vllm", provider: "type: openai_compatible\n    profile: vllm\n    base_url: BASE"},
		{name: "vllm with credentials", provider: "type: openai_compatible\n    profile: vllm\n    base_url: BASE\n    credentials:\n      api_key: ${MY_LOCAL_KEY}", want: env["MY_LOCAL_KEY"]},
		{name: "lmstudio", provider: "type: openai_compatible\n    profile: lmstudio\n    base_url: BASE"},
		{name: "gateway", provider: "type: openai_compatible\n    profile: gateway\n    base_url: BASE"},
		{name: "generic", provider: "type: openai_compatible\n    base_url: BASE"},
		{name: "generic at api.openai.com", provider: "type: openai_compatible\n    base_url: https://api.openai.com/v1", vendor: true},
		{name: "anthropic at api.anthropic.com", provider: "type: anthropic", vendor: true, want: env["ANTHROPIC_API_KEY"]},
		{name: "anthropic at another host", provider: "type: anthropic\n    base_url: BASE", refused: "ANTHROPIC_API_KEY"},
		{name: "anthropic at another host with credentials", provider: "type: anthropic\n    base_url: BASE\n    credentials:\n      api_key: ${MY_LOCAL_KEY}", want: env["MY_LOCAL_KEY"]},
		{name: "gemini at googleapis", provider: "type: gemini", vendor: true, want: env["GEMINI_API_KEY"]},
		{name: "gemini at another host", provider: "type: gemini\n    base_url: BASE", refused: "GEMINI_API_KEY"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newCaptureServer(t)
			y := "providers:\n  p:\n    " + strings.ReplaceAll(tc.provider, "BASE", srv.URL+"/v1") + "\n"
			f, err := config.Parse(filepath.Join(t.TempDir(), "llm-config.yaml"), []byte(y), reg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := f.Resolve("p", reg, os.LookupEnv)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("resolve = %v, want a refusal naming %s", err, tc.refused)
				}
				for _, v := range env {
					if strings.Contains(err.Error(), v) {
						t.Fatalf("the error shows a secret: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.vendor {
				u, _ := url.Parse(srv.URL)
				s.HTTPClient = &http.Client{Transport: toCapture{u}}
			}
			r, err := reg.Lookup(f.Providers["p"].Type)
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.New(s)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Invoke(context.Background(), &provider.Request{Prompt: "hi", MaxTokens: 16}); err == nil {
				t.Fatal("the capture server's 503 was not an error")
			}
			reqs := srv.requests()
			if len(reqs) == 0 {
				t.Fatal("no request reached the capture server")
			}
			for _, rq := range reqs {
				var got []string
				for name, v := range env {
					seen := strings.Contains(rq.query, v)
					for _, hv := range rq.header {
						seen = seen || strings.Contains(strings.Join(hv, "\n"), v)
					}
					if seen {
						got = append(got, name)
					}
				}
				switch {
				case tc.want == "" && len(got) > 0:
					t.Errorf("credentials %v reached an endpoint none was configured for", got)
				case tc.want != "" && (len(got) != 1 || env[got[0]] != tc.want):
					t.Errorf("credentials that arrived: %v, want exactly the one configured", got)
				}
			}
		})
	}
}
