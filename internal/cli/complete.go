package cli

import (
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// completions teaches shell completion the project's own names, read from
// its configuration when the shell asks: agents for --agent, models for
// --model (the catalog's and the configured ones), provider instances for
// the consent commands' PROVIDER, and the catalog's namespaces for
// pricing's --provider.
func (e *env) completions(root *cobra.Command) {
	byFlag := map[string]cobra.CompletionFunc{"agent": e.completeAgents, "model": e.completeModels}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for name, fn := range byFlag {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, fn)
			}
		}
		if c.Parent() != nil && c.Parent().Name() == "pricing" && c.Flags().Lookup("provider") != nil {
			_ = c.RegisterFlagCompletionFunc("provider", e.completeNamespaces)
		}
		if c.Parent() != nil && c.Parent().Name() == "consent" && strings.HasSuffix(c.Use, " PROVIDER") {
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return e.completeProviders(cmd, args, prefix)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// candidates keeps the names that start with prefix, sorted, and asks the
// shell not to offer file names.
func candidates(names []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
}

func (e *env) completeAgents(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	names := orchestrator.AgentNames()
	if f, err := e.loadConfig(false); err == nil {
		names = append(names, slices.Collect(maps.Keys(f.Agents))...)
	}
	return candidates(names, prefix)
}

func (e *env) completeProviders(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	f, err := e.loadConfig(false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return candidates(slices.Collect(maps.Keys(f.Providers)), prefix)
}

func (e *env) completeNamespaces(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	f, err := e.loadConfig(false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cat, err := e.catalog(f)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return candidates(cat.NamespaceNames(), prefix)
}

func (e *env) completeModels(_ *cobra.Command, _ []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	f, err := e.loadConfig(false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	if cat, err := e.catalog(f); err == nil {
		for _, ns := range cat.NamespaceNames() {
			for _, m := range cat.Models(ns) {
				names = append(names, m.ID)
			}
		}
	}
	for _, p := range f.Providers {
		for _, m := range p.Models {
			names = append(names, m)
		}
	}
	for _, a := range f.Agents {
		if a.Model != "" {
			names = append(names, a.Model)
		}
	}
	return candidates(names, prefix)
}
