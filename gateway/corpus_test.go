package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cortexbuild/cortexbuild/gateway/internal/nativecorpus"
	"github.com/cortexbuild/cortexbuild/provider"
)

// loadCorpus returns the requests the pinned host CLIs and the official
// SDKs really send, each with the provider answer it was given
// (testdata/native, see its README): the passthrough conformance tests
// replay them.
func loadCorpus(t testing.TB) []nativecorpus.Exchange {
	t.Helper()
	exs, err := nativecorpus.Load("testdata/native")
	if err != nil {
		t.Fatal(err)
	}
	return exs
}

// Every exchange of the corpus goes to a route the gateway serves, in the
// protocol of that route, and every protocol the gateway relays has
// exchanges from at least two clients.
func TestNativeCorpus(t *testing.T) {
	routes := map[string]provider.Protocol{
		"/v1/messages":              provider.ProtoMessages,
		"/v1/messages/count_tokens": nativecorpus.ProtoCountTokens,
		"/v1/chat/completions":      provider.ProtoChat,
		"/v1/responses":             provider.ProtoResponses,
	}
	clients := map[provider.Protocol]map[string]bool{}
	for _, e := range loadCorpus(t) {
		path, _, _ := strings.Cut(e.Request.Path, "?")
		if p, ok := routes[path]; !ok || p != e.Protocol || e.Request.Method != http.MethodPost {
			t.Errorf("%s: %s %s is not the gateway's route for %s", e.File, e.Request.Method, e.Request.Path, e.Protocol)
		}
		if clients[e.Protocol] == nil {
			clients[e.Protocol] = map[string]bool{}
		}
		clients[e.Protocol][e.Host] = true
	}
	for _, p := range nativecorpus.Protocols() {
		if len(clients[p]) < 2 {
			t.Errorf("%s: exchanges from %d clients (%v), want at least 2", p, len(clients[p]), clients[p])
		}
	}
}
