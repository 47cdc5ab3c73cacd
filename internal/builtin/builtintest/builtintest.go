// Package builtintest holds the smoke fixtures of the built-in adapter
// types: for each registered type (and the profiles worth smoking), how to
// start a wire-faithful fake of its provider on loopback so that
// 'cortexbuild providers smoke' can be tested offline.
//
// A smoke fixture is step 8 of the add-a-provider checklist
// (docs/providers/adding-a-provider.md): every registered adapter type must
// have one for the profile the smoke runs by default, and the checklist test
// in internal/builtin fails when one is missing.
package builtintest

import (
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
	"github.com/cortexbuild/cortexbuild/provider/providertest/fakekit"
)

// SmokeFixture starts a fake of one adapter type's provider.
type SmokeFixture struct {
	// Type is the adapter type ("anthropic"); Profile the profile the
	// fake imitates ("" for a type without profiles).
	Type    string
	Profile string
	// KeyChecked reports whether the fake refuses a wrong API key (local
	// servers accept any).
	KeyChecked bool
	// Start serves the fake on a loopback address. When KeyChecked, the
	// fake accepts key only and answers any other key as the provider
	// answers a bad one.
	Start func(key string) *FakeServer
}

// FakeServer is a running fake.
type FakeServer struct {
	// BaseURL is the value for the adapter's base URL: the server root, or
	// the /v1 prefix for OpenAI-compatible servers, as the adapter expects.
	BaseURL string
	// Requests returns every request received so far, in order.
	Requests func() []fakekit.RecordedBase
	// Close stops the server.
	Close func()
}

// SmokeFixtures returns the fixtures, one per adapter type and profile.
func SmokeFixtures() []SmokeFixture {
	return []SmokeFixture{
		{Type: anthropic.Type, KeyChecked: true, Start: func(key string) *FakeServer {
			s := anthropicfake.New(anthropicfake.WithAPIKey(key))
			return &FakeServer{BaseURL: s.URL(), Close: s.Close, Requests: func() []fakekit.RecordedBase {
				var out []fakekit.RecordedBase
				for _, r := range s.Requests() {
					out = append(out, r.RecordedBase)
				}
				return out
			}}
		}},
		{Type: openaicompat.Type, Profile: openaicompat.OpenAI.Name, KeyChecked: true, Start: func(key string) *FakeServer {
			return openaiServer(openaifake.New(openaifake.WithAPIKey(key)))
		}},
		{Type: openaicompat.Type, Profile: openaicompat.Ollama.Name, Start: func(string) *FakeServer {
			return openaiServer(openaifake.New(openaifake.WithFlavor(openaifake.FlavorOllama)))
		}},
		{Type: gemini.Type, KeyChecked: true, Start: func(key string) *FakeServer {
			s := geminifake.New(geminifake.WithAPIKey(key))
			return &FakeServer{BaseURL: s.URL(), Close: s.Close, Requests: func() []fakekit.RecordedBase {
				var out []fakekit.RecordedBase
				for _, r := range s.Requests() {
					out = append(out, r.RecordedBase)
				}
				return out
			}}
		}},
	}
}

func openaiServer(s *openaifake.Server) *FakeServer {
	return &FakeServer{BaseURL: s.URL() + "/v1", Close: s.Close, Requests: func() []fakekit.RecordedBase {
		var out []fakekit.RecordedBase
		for _, r := range s.Requests() {
			out = append(out, r.RecordedBase)
		}
		return out
	}}
}

// Lookup returns the fixture of typ and profile.
func Lookup(typ, profile string) (SmokeFixture, bool) {
	for _, f := range SmokeFixtures() {
		if f.Type == typ && f.Profile == profile {
			return f, true
		}
	}
	return SmokeFixture{}, false
}
