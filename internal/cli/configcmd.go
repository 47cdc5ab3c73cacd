package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/internal/yamlx"
	"github.com/cortexbuild/cortexbuild/orchestrator/locality"
)

func (e *env) configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Check and describe llm-config.yaml"}
	cmd.AddCommand(e.configValidateCmd(), e.configSchemaCmd())
	return cmd
}

type validation struct {
	File     string   `json:"file"`
	Valid    bool     `json:"valid"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
}

func (e *env) configValidateCmd() *cobra.Command {
	var asJSON, skipEnv bool
	cmd := &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check the configuration: syntax, keys, types, values, references and credentials",
		Long: `validate reads the configuration strictly and reports every problem with
file:line:column and what to write instead. It also resolves each provider's
credentials from the environment (skip with --skip-env, for CI without keys).
It exits 3 when the file is invalid.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				e.configPath = args[0]
			}
			res := validation{Errors: []string{}, Warnings: []string{}}
			f, err := e.loadConfig(true)
			if err == nil {
				res.File = f.Path
				res.Warnings = append(res.Warnings, f.Warnings()...)
				if !skipEnv {
					var all, missing yamlx.Errors
					var warnings []string
					unavailable := 0
					for _, name := range f.ProviderNames() {
						if _, rerr := f.Resolve(name, e.registry, e.lookupEnv); rerr != nil {
							var mc *config.MissingCredentialError
							if errors.As(rerr, &mc) {
								unavailable++
								missing = append(missing, mc.Errs...)
								for _, x := range mc.Errs {
									warnings = append(warnings, x.Error()+"; until then provider "+name+" is unavailable and calls go to the other providers (the key can also be saved in the console of 'cortexbuild serve')")
								}
								continue
							}
							var es yamlx.Errors
							if errors.As(rerr, &es) {
								all = append(all, es...)
							} else {
								all = append(all, &yamlx.Error{Pos: yamlx.Pos{File: f.Path}, Msg: rerr.Error()})
							}
						}
					}
					// A missing credential fails only its provider: a
					// warning, unless no provider is left to serve.
					if unavailable > 0 && unavailable == len(f.ProviderNames()) {
						all = append(all, missing...)
					} else {
						res.Warnings = append(res.Warnings, warnings...)
					}
					if len(all) > 0 {
						err = withCode(ExitConfig, all.Err())
					}
				}
				if les := e.serviceLocality(cmd.Context(), f, skipEnv); len(les) > 0 {
					var es yamlx.Errors
					if errors.As(err, &es) {
						les = append(es, les...)
					}
					err = withCode(ExitConfig, les.Err())
				}
			}
			if err != nil {
				var es yamlx.Errors
				if errors.As(err, &es) {
					for _, x := range es {
						res.Errors = append(res.Errors, x.Error())
						if res.File == "" {
							res.File = x.Pos.File
						}
					}
				} else {
					res.Errors = append(res.Errors, err.Error())
				}
			}
			res.Valid = len(res.Errors) == 0
			w := cmd.OutOrStdout()
			if asJSON {
				var failed error
				if !res.Valid {
					failed = withCode(ExitConfig, fmt.Errorf("%s is invalid (%d problems)", res.File, len(res.Errors)))
				}
				return writeReport(w, res, failed)
			} else {
				for _, x := range res.Warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", x)
				}
				if res.Valid {
					fmt.Fprintf(w, "%s: valid\n", res.File)
				}
			}
			if !res.Valid {
				return withCode(ExitConfig, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	cmd.Flags().BoolVar(&skipEnv, "skip-env", false, "do not resolve credentials from the environment")
	return cmd
}

func (e *env) configSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of llm-config.yaml (for editors)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := config.Schema()
			if err != nil {
				return withCode(ExitFailure, err)
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

// serviceLocality decides, as serve does when it starts, whether each
// service the configuration connects to may be reached under
// locality.mode: the notification webhook, the Redis cache and the
// PostgreSQL store (the trace exporter is checked by the configuration's
// own validation). Each refusal is an error at the key's file:line:column.
// A value read from a variable that is not set is not known and not
// checked; skipEnv checks literal values only.
func (e *env) serviceLocality(ctx context.Context, f *config.File, skipEnv bool) yamlx.Errors {
	if f.Locality.Mode != config.LocalityLocalOnly {
		return nil
	}
	g := e.gate(f)
	var errs yamlx.Errors
	check := func(svc locality.Service, s config.Secret, hosts func(raw string) []string) {
		if s.IsZero() || (skipEnv && s.EnvVar() != "") {
			return
		}
		raw, err := s.Resolve(e.lookupEnv)
		if err != nil {
			return
		}
		for _, h := range hosts(raw) {
			if _, err := g.CheckService(ctx, svc, h); err != nil {
				errs = append(errs, s.Pos().Errorf("%v", err))
				return
			}
		}
	}
	urlHost := func(raw string) []string {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" || u.Scheme == "unix" {
			return nil // a malformed URL is reported where it is used; a socket is local
		}
		return []string{u.Hostname()}
	}
	check(svcWebhook, f.Notifications.WebhookURL, urlHost)
	if f.Cache.Backend == config.CacheRedis {
		check(svcCache, f.Cache.URL, urlHost)
	}
	if f.Store.Backend == config.StorePostgres {
		check(svcStore, f.Store.DSN, func(raw string) []string {
			c, err := pgconn.ParseConfig(raw)
			if err != nil {
				return nil
			}
			var hosts []string
			for _, h := range append([]*pgconn.FallbackConfig{{Host: c.Host}}, c.Fallbacks...) {
				if !strings.HasPrefix(h.Host, "/") { // a unix socket's directory is local
					hosts = append(hosts, h.Host)
				}
			}
			return hosts
		})
	}
	return errs
}
