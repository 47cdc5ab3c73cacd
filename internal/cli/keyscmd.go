package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/gateway"
	"github.com/cortexbuild/cortexbuild/provider"
)

// keyLimitFlags are the flags that set a key's limits and allowed agents,
// for 'serve keys create' and 'serve keys update'.
type keyLimitFlags struct {
	budget, period, expires string
	rpm                     int
	tpm                     int64
	agents                  []string
}

func (l *keyLimitFlags) add(fs *pflag.FlagSet, update bool) {
	none := ""
	if update {
		none = "; none removes it"
	}
	fs.StringVar(&l.budget, "budget", "", "what the key's calls may cost per period, in USD (e.g. 5.00)"+none)
	fs.StringVar(&l.period, "period", "", "the budget's period: day, month (the default) or total")
	fs.IntVar(&l.rpm, "rpm", 0, "model calls per minute the key may make, in each gateway process (0: no limit)")
	fs.Int64Var(&l.tpm, "tpm", 0, "tokens (input and output) per minute the key may use, in each gateway process, a call in flight counting its estimate until its answer says (0: no limit)")
	fs.StringVar(&l.expires, "expires", "", "when the key stops working: a duration (720h), a date (2027-01-31, at 00:00 UTC) or an RFC 3339 time"+none)
	fs.StringSliceVar(&l.agents, "agents", nil, "allow the key to call only as these agents (comma-separated), each on its own tier and providers"+none)
}

// apply sets the limits the flags changed (all the given ones at
// creation) on k, checking the agents against the configuration.
func (l *keyLimitFlags) apply(f *config.File, fs *pflag.FlagSet, k *gateway.Key, now time.Time) error {
	changed := fs.Changed
	if changed("budget") {
		if l.budget == "none" {
			k.Budget, k.Period = nil, ""
		} else {
			m, err := provider.ParseMoney(strings.TrimPrefix(l.budget, "$"))
			if err != nil {
				return fmt.Errorf("--budget %q: not an amount in USD (e.g. 5.00): %v", l.budget, err)
			}
			k.Budget = &m
		}
	}
	if changed("period") {
		k.Period = l.period
	}
	if changed("rpm") {
		k.RPM = l.rpm
	}
	if changed("tpm") {
		k.TPM = l.tpm
	}
	if changed("expires") {
		if l.expires == "none" {
			k.ExpiresAt = nil
		} else {
			at, err := gateway.ParseExpiry(l.expires, now)
			if err != nil {
				return fmt.Errorf("--expires: %v", err)
			}
			k.ExpiresAt = &at
		}
	}
	if changed("agents") {
		k.Agents = nil
		if !(len(l.agents) == 1 && l.agents[0] == "none") {
			for _, a := range l.agents {
				if err := checkAgent(f, "--agents", a); err != nil {
					return err
				}
			}
			k.Agents = l.agents
		}
	}
	return nil
}

// keysUpdateCmd is 'serve keys update': a key's limits change for every
// gateway process sharing the key file (each sees the change on its next
// check of the file).
func (e *env) keysUpdateCmd() *cobra.Command {
	var l keyLimitFlags
	var name string
	cmd := &cobra.Command{
		Use:   "update KEY-ID [--budget USD|none] [--period day|month|total] [--rpm N] [--tpm N] [--expires WHEN|none] [--agents A,...|none] [--name N]",
		Short: "Change a key's budget, rate limits, expiry, allowed agents or name; running gateways apply it on the next request",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := e.loadConfig(false)
			if err != nil {
				return err
			}
			fs := cmd.Flags()
			if fs.NFlag() == 0 {
				return withCode(ExitUsage, fmt.Errorf("nothing to change: give --budget, --period, --rpm, --tpm, --expires, --agents or --name"))
			}
			ks, err := e.keyStore(cmd.Context(), f)
			if err != nil {
				return withCode(ExitFailure, err)
			}
			var usage error // a bad value, as opposed to a store that failed
			k, err := ks.Update(args[0], func(k *gateway.Key) error {
				if err := l.apply(f, fs, k, time.Now()); err != nil {
					usage = err
					return err
				}
				if fs.Changed("name") {
					k.Name = name
				}
				if err := k.Check(); err != nil {
					usage = err
					return err
				}
				return nil
			})
			switch {
			case usage != nil:
				return withCode(ExitUsage, usage)
			case errors.Is(err, gateway.ErrNoSuchKey):
				return withCode(ExitUsage, fmt.Errorf("%w: 'cortexbuild serve keys list' shows the keys", err))
			case err != nil:
				return withCode(ExitFailure, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "updated %s: %s\n", k.Hint(), k.LimitsText())
			return nil
		},
	}
	l.add(cmd.Flags(), true)
	cmd.Flags().StringVar(&name, "name", "", "a new label for the key")
	return cmd
}

// keysSpend is [gateway.KeySpend] from the project's ledger for a listing; a
// ledger that cannot be read is said on stderr, and the spend is left out.
func (e *env) keysSpend(ctx context.Context, f *config.File, keys []gateway.Key, now time.Time) map[string]provider.Money {
	if len(keys) == 0 {
		return nil
	}
	st, err := e.openLedger(ctx, f)
	if err == nil {
		defer st.Close()
		var out map[string]provider.Money
		if out, err = gateway.KeySpend(ctx, st, keys, now, budgetLocation(f)); err == nil {
			return out
		}
	}
	fmt.Fprintf(e.stderr, "cortexbuild: the keys' spend is not shown: %v\n", err)
	return nil
}
