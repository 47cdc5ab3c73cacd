package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/orchestrator"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
	anthropicadapter "github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// metadataURL is where a server that fetches image URLs itself would be
// sent by a client: the cloud metadata service.
const metadataURL = "http://169.254.169.254/latest/meta-data/iam/security-credentials/"

// localGate is the CLI's adapter of the locality gate to the
// orchestrator's Gate, image URLs included.
type localGate struct{ g *locality.Gate }

func (l localGate) Check(ctx context.Context, prov, baseURL string) error {
	_, err := l.g.Check(ctx, prov, baseURL)
	return err
}

func (l localGate) CheckImageURLs() error { return l.g.CheckImageURLs() }

// withLocalVision adds "local", a vLLM server (its own fake) whose model
// has vision, with or without providers.local.allow_image_urls; the gateway
// model "local-vision" is pinned to it.
func withLocalVision(srv **openaifake.Server, allow bool, gate orchestrator.Gate) func(*setup) {
	return func(s *setup) {
		f := openaifake.New(openaifake.WithFlavor(openaifake.FlavorVLLM))
		*srv = f
		s.orch = func(os *orchestrator.Settings) {
			a, err := openaicompat.New(provider.Settings{Name: "local", Profile: "vllm", BaseURL: f.URL() + "/v1",
				Models: map[provider.Tier]string{provider.TierBalanced: "Qwen/Qwen2.5-VL-7B"}, Capabilities: provider.NewCapabilitySet(provider.CapVision)})
			if err != nil {
				panic(err)
			}
			os.Endpoints = append(os.Endpoints, orchestrator.Endpoint{Name: "local", Adapter: a, AllowImageURLs: allow})
			os.Gate = gate
		}
		s.gw = func(o *gateway.Options) {
			o.Providers = append(o.Providers, "local")
			o.Models["local-vision"] = gateway.Target{Model: "Qwen/Qwen2.5-VL-7B", Provider: "local"}
		}
	}
}

func imageURLChat(model, u string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{openai.TextContentPart("What is this?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: u})})}}
}

// Under locality.mode local-only an image URL is refused before routing,
// in each protocol's error shape, whichever provider would serve it and
// whatever allow_image_urls says: no server is sent it. An inline image is
// still served.
func TestImageURLRefusedUnderLocalOnly(t *testing.T) {
	var local *openaifake.Server
	gate := localGate{&locality.Gate{Mode: locality.ModeLocalOnly}}
	w := newWorld(t, withLocalVision(&local, true, gate))
	t.Cleanup(func() { local.Close() })
	ctx := ctxT(t)

	_, err := w.openai(w.key).Chat.Completions.New(ctx, imageURLChat("local-vision", metadataURL))
	e := openAIErr(t, err)
	if e.StatusCode != 400 || e.Code != "locality_refused" || !strings.Contains(e.Message, "local-only") || !strings.Contains(e.Message, "image") {
		t.Errorf("chat image URL under local-only = %d %q %q", e.StatusCode, e.Code, e.Message)
	}
	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "local-vision", MaxTokens: 50, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: metadataURL}))}})
	if ae := anthropicErr(t, err); ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), "permission_error") || !strings.Contains(ae.RawJSON(), "local-only") {
		t.Errorf("messages image URL under local-only = %d %s", ae.StatusCode, ae.RawJSON())
	}
	if n := len(local.Requests()) + len(w.anth.Requests()) + len(w.oai.Requests()); n != 0 {
		t.Fatalf("%d requests reached a provider", n)
	}

	dataURL := "data:image/png;base64," + b64(pngBytes)
	if _, err := w.openai(w.key).Chat.Completions.New(ctx, imageURLChat("local-vision", dataURL)); err != nil {
		t.Fatalf("inline image under local-only: %v", err)
	}
	if len(local.Requests()) != 1 {
		t.Errorf("local server requests = %d, want 1", len(local.Requests()))
	}
}

// In the default mode an image URL never reaches a server that would fetch
// it itself (here vLLM on loopback) unless its configuration opts in: a
// call pinned to it is refused with a 400 that says how to opt in, and a
// call routed by agent goes to the next provider instead.
func TestImageURLNotSentToLocalServerWithoutOptIn(t *testing.T) {
	var local *openaifake.Server
	w := newWorld(t, serveOn("local", "claude", "gpt"), withLocalVision(&local, false, nil))
	t.Cleanup(func() { local.Close() })
	ctx := ctxT(t)

	_, err := w.openai(w.key).Chat.Completions.New(ctx, imageURLChat("local-vision", metadataURL))
	e := openAIErr(t, err)
	if e.StatusCode != 400 || e.Code != "image_url_refused" || !strings.Contains(e.Message, "providers.local.allow_image_urls") {
		t.Errorf("pinned image URL = %d %q %q", e.StatusCode, e.Code, e.Message)
	}
	if n := len(local.Requests()); n != 0 {
		t.Fatalf("the local server received %d requests", n)
	}

	// Routed by agent: the local server is skipped, claude serves.
	_, err = w.anthropic(w.key).Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 50, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/cat.png"}), anthropic.NewTextBlock("What is this?"))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(local.Requests()) != 0 || len(w.anth.Requests()) != 1 {
		t.Errorf("requests: local %d, claude %d; want 0 and 1", len(local.Requests()), len(w.anth.Requests()))
	}
}

// With providers.<name>.allow_image_urls the local server is sent the URL
// as the client gave it.
func TestImageURLSentToLocalServerWithOptIn(t *testing.T) {
	var local *openaifake.Server
	w := newWorld(t, withLocalVision(&local, true, nil))
	t.Cleanup(func() { local.Close() })
	if _, err := w.openai(w.key).Chat.Completions.New(ctxT(t), imageURLChat("local-vision", "https://example.com/cat.png")); err != nil {
		t.Fatal(err)
	}
	reqs := local.Requests()
	if len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte(`"url":"https://example.com/cat.png"`)) {
		t.Fatalf("local server requests = %d, want 1 with the URL", len(reqs))
	}
}

// Anthropic's own API fetches image URLs on its side: an adapter at its
// default base URL is sent the URL without any opt-in. (Its connections
// are redirected to the fake by the test's transport; the adapter only
// knows its base URL.)
func TestImageURLSentToHostedProvider(t *testing.T) {
	fake := anthropicfake.New(anthropicfake.WithAPIKey("ak-upstream"))
	t.Cleanup(fake.Close)
	cat, err := pricing.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, err := anthropicadapter.New(provider.Settings{Name: "claude", Credentials: map[string]string{"api_key": "ak-upstream"}, Pricer: cat,
		HTTPClient: &http.Client{Transport: redirectTo(t, fake.URL())}})
	if err != nil {
		t.Fatal(err)
	}
	if !a.FetchesImageURLs() {
		t.Fatal("the Anthropic adapter at its default base URL does not say Anthropic fetches image URLs")
	}
	w := newWorld(t, withOrch(func(s *orchestrator.Settings) {
		s.Endpoints = []orchestrator.Endpoint{{Name: "claude", Adapter: a}, s.Endpoints[1]}
	}))
	_, err = w.anthropic(w.key).Messages.New(ctxT(t), anthropic.MessageNewParams{Model: "claude-sonnet-4-6", MaxTokens: 50, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: "https://example.com/cat.png"}))}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte(`"url":"https://example.com/cat.png"`)) {
		t.Fatalf("hosted provider requests = %d, want 1 with the URL", len(reqs))
	}
}

// redirectTo sends every request to base's host instead of its own.
func redirectTo(t *testing.T, base string) http.RoundTripper {
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
