// Package builtin holds the one explicit list of adapter types compiled into
// CortexBuild: the spec's REGISTERED_ADAPTERS. Adding a provider means adding
// its registration here (see docs/providers/adding-a-provider.md).
package builtin

import (
	"github.com/cortexbuild/cortexbuild/provider"
	"github.com/cortexbuild/cortexbuild/provider/anthropic"
	"github.com/cortexbuild/cortexbuild/provider/gemini"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat"
)

// Registrations returns the built-in adapter types in display order.
func Registrations() []provider.Registration {
	return []provider.Registration{
		anthropic.Registration(),
		openaicompat.Registration(),
		gemini.Registration(),
	}
}

// Registry returns a registry of the built-in adapter types.
func Registry() *provider.Registry {
	r, err := provider.NewRegistry(Registrations()...)
	if err != nil {
		panic("builtin: " + err.Error()) // the list is fixed at compile time; a test covers it
	}
	return r
}
