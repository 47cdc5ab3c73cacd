package cli

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
	"github.com/cortexbuild/cortexbuild/provider"
)

// whoami names the person granting consent.
func whoami() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if n := os.Getenv("USER"); n != "" {
		return n
	}
	return "unknown"
}

// endpointOf returns the base URL a configured provider talks to.
func (e *env) endpointOf(f *config.File, name string) (string, error) {
	p, ok := f.Providers[name]
	if !ok {
		return "", withCode(ExitUsage, fmt.Errorf("provider %q is not configured; configured: %v", name, f.ProviderNames()))
	}
	if p.BaseURL != "" {
		return p.BaseURL, nil
	}
	reg, err := e.registry.Lookup(p.Type)
	if err != nil {
		return "", withCode(ExitConfig, err)
	}
	if p.Profile != "" && len(reg.Profiles) > 0 && p.Profile != reg.Profiles[0] {
		return "", nil // the profile's own default; the adapter knows it
	}
	return reg.DefaultBaseURL, nil
}

func (e *env) consentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consent",
		Short: "Record which non-loopback providers this project may send data to",
		Long: `An endpoint whose every address is on this machine (127.0.0.0/8, ::1) needs no consent:
nothing leaves the machine. Any other endpoint is refused, before a connection is made,
until consent for that provider is recorded here (who and when, in .cortexbuild/consent.json, or
with store.backend: postgres in that database, shared by every replica).
With locality.mode: local-only, non-loopback endpoints are refused even with consent.`,
	}
	var by string
	grant := &cobra.Command{
		Use: "grant PROVIDER", Short: "Allow a configured provider to be reached off this machine", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			endpoint, err := e.endpointOf(f, args[0])
			if err != nil {
				return err
			}
			if endpoint == "" {
				return withCode(ExitUsage, fmt.Errorf("provider %q uses its profile's default endpoint on this machine, which needs no consent; to reach another, set providers.%s.base_url and grant again", args[0], args[0]))
			}
			c, err := e.gate(f).Grant(cmd.Context(), args[0], by, endpoint)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "consent granted for %s by %s at %s, covering %s\n", c.Provider, c.GrantedBy, c.GrantedAt.Format(time.RFC3339), c.Endpoint)
			if f.Locality.Mode == config.LocalityLocalOnly {
				fmt.Fprintln(e.stderr, "note: locality.mode is local-only, so non-loopback endpoints stay refused")
			}
			return nil
		},
	}
	grant.Flags().StringVar(&by, "by", whoami(), "who grants it")
	revoke := &cobra.Command{
		Use: "revoke PROVIDER", Short: "Withdraw consent; the next connection is refused", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			ok, err := e.gate(f).Consents.Revoke(cmd.Context(), args[0])
			if err != nil {
				return withCode(ExitFailure, err)
			}
			if !ok {
				return withCode(ExitFailure, fmt.Errorf("no consent was recorded for %q", args[0]))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "consent revoked for %s\n", args[0])
			return nil
		},
	}
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "List recorded consents", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			cs, err := e.gate(f).Consents.List(cmd.Context())
			if err != nil {
				return withCode(ExitFailure, err)
			}
			if asJSON {
				if cs == nil {
					cs = []locality.Consent{}
				}
				return writeJSON(cmd.OutOrStdout(), cs)
			}
			if len(cs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no consents: only loopback endpoints can be reached")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tENDPOINT\tGRANTED BY\tGRANTED AT\tNOTE")
			for _, c := range cs {
				ep, note := c.Endpoint, consentNote(e, f, c)
				if ep == "" {
					ep = "(none)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Provider, ep, c.GrantedBy, c.GrantedAt.Format(time.RFC3339), note)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(grant, revoke, list)
	return cmd
}

// consentNote says when c does not cover the endpoint its provider is
// configured with now, and the command that grants consent for it.
func consentNote(e *env, f *config.File, c locality.Consent) string {
	fix := "run 'cortexbuild consent grant " + c.Provider + "'"
	if c.Endpoint == "" {
		return "covers nothing (recorded before consents named an endpoint): " + fix
	}
	cur, err := e.endpointOf(f, c.Provider)
	if err != nil {
		return "provider not configured"
	}
	if ep, ok := provider.Endpoint(cur); ok && !c.Covers(ep) {
		return "provider now at " + ep + ", not covered: " + fix
	}
	return ""
}

// askConsent offers, on a terminal, to record consent for the provider the
// router would call first when the gate refuses it for lack of consent.
func (e *env) askConsent(cmd *cobra.Command, f *config.File, providerName string) {
	if !isTerminal(e.stdin) {
		return
	}
	endpoint, err := e.endpointOf(f, providerName)
	if err != nil || endpoint == "" {
		return
	}
	g := e.gate(f)
	_, err = g.Check(cmd.Context(), providerName, endpoint)
	var le *locality.Error
	if !errors.As(err, &le) || le.Reason != locality.ReasonNoConsent {
		return
	}
	if e.confirm(fmt.Sprintf("%v\nsend this project's prompts to %s?", err, providerName)) {
		if c, err := g.Grant(cmd.Context(), providerName, whoami(), endpoint); err == nil {
			fmt.Fprintf(e.stderr, "consent granted for %s by %s\n", c.Provider, c.GrantedBy)
		}
	}
}
