package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/pricing"
	"github.com/cortexbuild/cortexbuild/provider"
)

func (e *env) pricingCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "pricing", Short: "Show the price catalog built into this binary"}
	cmd.AddCommand(e.pricingShowCmd())
	return cmd
}

// catalog returns the built-in catalog with the project's catalog_files
// laid over it.
func (e *env) catalog(f *config.File) (*pricing.Catalog, error) {
	cat, err := pricing.Default()
	if err != nil {
		return nil, err
	}
	for _, p := range f.Pricing.CatalogFiles {
		if !filepath.IsAbs(p) && f.Path != "" {
			p = filepath.Join(projectRoot(f.Path), p)
		}
		extra, err := pricing.LoadFile(p)
		if err != nil {
			return nil, withCode(ExitConfig, fmt.Errorf("pricing.catalog_files: %w", err))
		}
		cat = cat.Overlay(extra)
	}
	return cat, nil
}

func money(m *provider.Money) string {
	if m == nil {
		return "-"
	}
	return m.String()
}

func (e *env) pricingShowCmd() *cobra.Command {
	var model, ns string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show",
		Short: "List model prices (USD per million tokens) in force today",
		Long: `show lists every priced model with the rates in force today, in USD per
million tokens. --model shows one model with every price period and long-context
tier. Models on local namespaces (ollama, vllm, lmstudio) are free.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			cat, err := e.catalog(f)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if model != "" {
				var m *pricing.Model
				if ns != "" {
					m, _, err = cat.Lookup(ns, model)
				} else {
					m, err = cat.Find(model)
				}
				if err != nil {
					return withCode(ExitFailure, err)
				}
				if asJSON {
					return writeJSON(w, m)
				}
				fmt.Fprintf(w, "%s/%s\n  context window %d tokens, max output %d tokens, vision %v\n", m.Namespace, m.ID, m.ContextWindow, m.MaxOutputTokens, m.Vision)
				if len(m.Aliases) > 0 {
					fmt.Fprintf(w, "  aliases: %s\n", strings.Join(m.Aliases, ", "))
				}
				if m.Deprecated != "" {
					fmt.Fprintf(w, "  deprecated: %s\n", m.Deprecated)
				}
				fmt.Fprintf(w, "  source: %s\n  prices (USD per million tokens):\n", m.Source)
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "    FROM\tPROMPT\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCACHE WRITE LONG")
				for _, p := range m.Prices {
					fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Effective, "any", p.Input, p.Output, money(p.CacheRead), money(p.CacheWrite), money(p.CacheWriteLong))
					for _, t := range p.Above {
						fmt.Fprintf(tw, "    \t>%d\t%s\t%s\t%s\t%s\t%s\n", t.InputTokens, t.Input, t.Output, money(t.CacheRead), money(t.CacheWrite), money(t.CacheWriteLong))
					}
				}
				return tw.Flush()
			}
			now := time.Now()
			type row struct {
				Namespace     string         `json:"namespace"`
				Model         string         `json:"model"`
				Local         bool           `json:"local,omitempty"`
				ContextWindow int64          `json:"context_window,omitempty"`
				MaxOutput     int64          `json:"max_output_tokens,omitempty"`
				Price         *pricing.Price `json:"price,omitempty"`
			}
			var rows []row
			for _, name := range cat.NamespaceNames() {
				if ns != "" && name != ns {
					continue
				}
				if cat.Namespaces[name].Local {
					rows = append(rows, row{Namespace: name, Model: "*", Local: true})
					continue
				}
				for _, m := range cat.Models(name) {
					rows = append(rows, row{Namespace: name, Model: m.ID, ContextWindow: m.ContextWindow, MaxOutput: m.MaxOutputTokens, Price: m.PriceAt(now)})
				}
			}
			if ns != "" && len(rows) == 0 {
				return withCode(ExitFailure, fmt.Errorf("unknown pricing namespace %q; known: %s", ns, strings.Join(cat.NamespaceNames(), ", ")))
			}
			if asJSON {
				return writeJSON(w, map[string]any{"version": cat.Version, "currency": cat.Currency, "unit": cat.Unit, "models": rows})
			}
			fmt.Fprintf(w, "price catalog %s, USD per million tokens, in force %s\n", cat.Version, now.Format(time.DateOnly))
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tMODEL\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCONTEXT\tMAX OUT\tLONG-CONTEXT TIERS")
			for _, r := range rows {
				if r.Local {
					fmt.Fprintf(tw, "%s\t%s\t0\t0\t0\t0\t-\t-\tlocal models are free\n", r.Namespace, r.Model)
					continue
				}
				p := r.Price
				tiers := "-"
				if len(p.Above) > 0 {
					var ts []string
					for _, t := range p.Above {
						ts = append(ts, fmt.Sprintf(">%dk: %s/%s", t.InputTokens/1000, t.Input, t.Output))
					}
					tiers = strings.Join(ts, "; ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", r.Namespace, r.Model, p.Input, p.Output, money(p.CacheRead), money(p.CacheWrite), r.ContextWindow, r.MaxOutput, tiers)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "show one model (id or alias) in detail")
	cmd.Flags().StringVar(&ns, "provider", "", "only this pricing namespace (anthropic, openai, gemini, ollama, vllm, lmstudio)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
