package cli

import (
	"strings"
	"testing"
)

// config validate refuses, as serve does when it starts, a local-only
// project whose webhook, Redis cache or PostgreSQL store is off this
// machine: exit 3, the same refusal at the key's file:line:column, names
// resolved by the gate's resolver and nothing dialed. A name that resolves
// to loopback, a value from an unset variable and --skip-env with a
// variable are not refused.
func TestConfigValidateRefusesRemoteServicesUnderLocalOnly(t *testing.T) {
	for _, c := range []struct {
		name, config string
		vars         map[string]string
		want         string // "" for valid
		secret       string
	}{
		{"webhook", "notifications:\n  webhook_url: https://hooks.remote.test/T0/B0/hook-secret-path\n", nil,
			"webhook (hooks.remote.test → 203.0.113.7) is not on this machine and locality mode is local-only: point notifications.webhook_url at this machine or set locality.mode: consent", "hook-secret-path"},
		{"webhook from a variable", "notifications:\n  webhook_url: ${HOOK}\n", map[string]string{"HOOK": "https://hooks.remote.test/hook-secret-path"},
			"webhook (hooks.remote.test → 203.0.113.7) is not on this machine", "hook-secret-path"},
		{"webhook split", "notifications:\n  webhook_url: http://split.test:8080/hook\n", nil,
			"webhook (split.test → 127.0.0.1, 203.0.113.10) is not on this machine", ""},
		{"redis cache", "cache:\n  backend: redis\n  url: redis://:redis-pass-1@cache.remote.test:6379/0\n", nil,
			"cache redis (cache.remote.test → 203.0.113.6) is not on this machine and locality mode is local-only: point cache.url at this machine or set locality.mode: consent", "redis-pass-1"},
		{"postgres store", "store:\n  backend: postgres\n  dsn: postgres://cortex:pg-pass-1@db.remote.test:5432/ledger\n", nil,
			"store postgres (db.remote.test → 203.0.113.5) is not on this machine and locality mode is local-only: point store.dsn at this machine or set locality.mode: consent", "pg-pass-1"},
		{"postgres store key=value", "store:\n  backend: postgres\n  dsn: host=db.remote.test port=5433 user=cortex password=pg-pass-2 dbname=ledger\n", nil,
			"store postgres (db.remote.test → 203.0.113.5) is not on this machine", "pg-pass-2"},
		{"webhook on loopback", "notifications:\n  webhook_url: http://hooks.local.test:8080/hook\n", nil, "", ""},
		{"webhook from an unset variable", "notifications:\n  webhook_url: ${HOOK}\n", nil, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := servicesProject(t, "local-only", c.config)
			n := newSvcNet(t)
			vars := map[string]string{}
			for k, v := range keyEnv {
				vars[k] = v
			}
			for k, v := range c.vars {
				vars[k] = v
			}
			code, out, errs := runWith(t, n.hook, dir, vars, "config", "validate")
			if c.want == "" {
				if code != 0 || !strings.Contains(out, "valid") {
					t.Fatalf("config validate = %d, want valid\n%s\n%s", code, out, errs)
				}
			} else {
				if code != ExitConfig {
					t.Fatalf("config validate = %d, want %d\n%s\n%s", code, ExitConfig, out, errs)
				}
				line := 14 // the third line of the section
				if strings.HasPrefix(c.config, "notifications:") {
					line = 13
				}
				refusedAtLine(t, errs, c.want, line)
			}
			if d := n.allDials(); len(d) != 0 {
				t.Errorf("dials %q, want none", d)
			}
			if c.secret != "" && strings.Contains(out+errs, c.secret) {
				t.Errorf("the output carries %q:\n%s%s", c.secret, out, errs)
			}
		})
	}
}
