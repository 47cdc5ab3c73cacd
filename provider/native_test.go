package provider_test

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/cortexbuild/cortexbuild/provider"
)

// TestEndToEndDropsHopByHopHeaders: a relayed answer keeps the provider's
// end-to-end headers, every value of each, and none of the headers that
// describe its connection to the gateway, nor those its Connection header
// names.
func TestEndToEndDropsHopByHopHeaders(t *testing.T) {
	h := http.Header{}
	for _, k := range provider.HopHeaders {
		h.Set(k, "x")
	}
	h.Set("Connection", "keep-alive, X-Hop-Named")
	h.Set("X-Hop-Named", "dropped")
	h.Add("Anthropic-Ratelimit-Requests-Remaining", "41")
	h.Add("Set-Cookie", "a=1")
	h.Add("Set-Cookie", "b=2")
	got := provider.EndToEnd(h)
	want := http.Header{"Anthropic-Ratelimit-Requests-Remaining": {"41"}, "Set-Cookie": {"a=1", "b=2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EndToEnd = %v; want %v", got, want)
	}
	if h.Get("Upgrade") != "x" {
		t.Error("EndToEnd changed the header it was given")
	}
}
