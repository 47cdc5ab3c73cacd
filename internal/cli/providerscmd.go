package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/provider"
)

func (e *env) providersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "providers", Short: "Registered adapter types and configured provider endpoints"}
	cmd.AddCommand(e.providersListCmd())
	cmd.AddCommand(e.providersSmokeCmd())
	cmd.AddCommand(e.providersHealthCmd())
	return cmd
}

type credentialState struct {
	Field  string `json:"field"`
	Source string `json:"source"`
	Set    bool   `json:"set"`
}

type configuredProvider struct {
	Name        string                   `json:"name"`
	Type        string                   `json:"type"`
	Profile     string                   `json:"profile,omitempty"`
	BaseURL     string                   `json:"base_url"`
	Models      map[provider.Tier]string `json:"models"`
	Credentials []credentialState        `json:"credentials"`
}

func (e *env) providersListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List adapter types (capabilities, credentials, tier mapping) and the project's providers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			var configured []configuredProvider
			for _, name := range f.ProviderNames() {
				p := f.Providers[name]
				reg, err := e.registry.Lookup(p.Type)
				if err != nil {
					return withCode(ExitConfig, err)
				}
				s, _ := f.Resolve(name, e.registry, e.lookupEnv)
				c := configuredProvider{Name: name, Type: p.Type, Profile: p.Profile, BaseURL: s.BaseURL, Models: s.Models}
				if c.BaseURL == "" {
					c.BaseURL = reg.DefaultBaseURL
				}
				for _, field := range reg.Credentials {
					st := credentialState{Field: field.Name, Set: s.Credentials[field.Name] != ""}
					if sec, ok := p.Credentials[field.Name]; ok {
						st.Source = sec.String()
					} else if vars := reg.EnvVarsFor(field, p.Profile, p.BaseURL); len(vars) > 0 {
						st.Source = "$" + strings.Join(vars, " or $")
					}
					c.Credentials = append(c.Credentials, st)
				}
				configured = append(configured, c)
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return writeJSON(w, map[string]any{"adapter_types": e.registry.All(), "configured": configured})
			}
			fmt.Fprintln(w, "Adapter types:")
			if len(e.registry.Types()) == 0 {
				fmt.Fprintln(w, "  (none registered)")
			}
			for _, r := range e.registry.All() {
				fmt.Fprintf(w, "\n  %s — %s\n", r.Type, r.Description)
				if r.DefaultBaseURL != "" {
					fmt.Fprintf(w, "    %-17s%s\n", "endpoint:", r.DefaultBaseURL)
				}
				if len(r.Profiles) > 0 {
					fmt.Fprintf(w, "    %-17s%s\n", "profiles:", strings.Join(r.Profiles, ", "))
				}
				fmt.Fprintf(w, "    %-17s%s\n", "capabilities:", strings.ReplaceAll(r.Capabilities.String(), ",", ", "))
				for _, t := range provider.Tiers {
					if m := r.DefaultModels[t]; m != "" {
						fmt.Fprintf(w, "    %-17s%s\n", string(t)+":", m)
					}
				}
				for _, c := range r.Credentials {
					req := "optional"
					if c.Required {
						req = "required"
					}
					env := ""
					if len(c.EnvVars) > 0 {
						env = ", from $" + strings.Join(c.EnvVars, " or $")
					}
					fmt.Fprintf(w, "    %-17s%s (%s%s) %s\n", "credential:", c.Name, req, env, c.Description)
				}
			}
			fmt.Fprintln(w, "\nConfigured providers:")
			if len(configured) == 0 {
				fmt.Fprintln(w, "  (none: run 'cortexbuild init' to write a starter configuration)")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  NAME\tTYPE\tENDPOINT\tMODELS\tCREDENTIALS")
			for _, c := range configured {
				var models, creds []string
				for _, t := range provider.Tiers {
					if m := c.Models[t]; m != "" {
						models = append(models, string(t)+"="+m)
					}
				}
				for _, s := range c.Credentials {
					state := "missing"
					if s.Set {
						state = "set"
					}
					creds = append(creds, fmt.Sprintf("%s %s (%s)", s.Field, state, s.Source))
				}
				typ := c.Type
				if c.Profile != "" {
					typ += "/" + c.Profile
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Name, typ, c.BaseURL, strings.Join(models, " "), strings.Join(creds, "; "))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
