package cli

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/cortexbuild/cortexbuild/config"
	"github.com/cortexbuild/cortexbuild/orchestrator"
)

// credentialSum identifies a provider's resolved credentials without
// keeping them: a digest of its fields and values (zero when it has none).
type credentialSum [sha256.Size]byte

func sumCredentials(creds map[string]string) credentialSum {
	if len(creds) == 0 {
		return credentialSum{}
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(creds)) {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(creds[k]), creds[k])
	}
	return credentialSum(h.Sum(nil))
}

// liveCredentials keeps a running orchestrator's endpoints in step with
// the secrets file: when the file changes (a key saved in the console,
// or by another process or an editor), every provider is built again
// through the same path as at start ([env.buildEndpoint]: the file and
// the environment first, so a credential from either is unaffected), and
// the ones whose credentials or availability changed are handed to the
// orchestrator ([orchestrator.EndpointUpdater]). A change is said once on
// standard error, never with a value.
type liveCredentials struct {
	secrets *config.SecretsFile
	build   func(name string) (orchestrator.Endpoint, credentialSum, error)
	names   []string
	log     io.Writer

	// The state last handed out, by provider: the orchestrator calls
	// Updates one call at a time.
	sums map[string]credentialSum
	why  map[string]string
}

// liveCredentials returns the watcher of f's secrets file (nil when f
// has none), its state recorded: call seen with each endpoint built.
func (e *env) liveCredentials(f *config.File, build func(string) (orchestrator.Endpoint, credentialSum, error)) *liveCredentials {
	sf, ok := f.Secrets.(*config.SecretsFile)
	if !ok || sf == nil {
		return nil
	}
	// serve looks at the file at most every sharedFileRecheck; saves made
	// through sf (the console's) are seen by the next request.
	sf.SetRecheck(e.recheck)
	sf.Changed()
	return &liveCredentials{secrets: sf, build: build, names: f.ProviderNames(), log: e.stderr,
		sums: map[string]credentialSum{}, why: map[string]string{}}
}

// seen records an endpoint as it was built at start.
func (l *liveCredentials) seen(ep orchestrator.Endpoint, sum credentialSum) {
	l.sums[ep.Name], l.why[ep.Name] = sum, ep.Unavailable
}

// Updates implements [orchestrator.EndpointUpdater].
func (l *liveCredentials) Updates(context.Context) []orchestrator.Endpoint {
	if !l.secrets.Changed() {
		return nil
	}
	var out []orchestrator.Endpoint
	for _, name := range l.names {
		ep, sum, err := l.build(name)
		if err != nil {
			ep = orchestrator.Endpoint{Name: name, Unavailable: err.Error()}
		}
		if sum == l.sums[name] && ep.Unavailable == l.why[name] {
			continue
		}
		switch {
		case ep.Unavailable != "":
			fmt.Fprintf(l.log, "provider %s is unavailable: %s\n", name, ep.Unavailable)
		case l.why[name] != "":
			fmt.Fprintf(l.log, "provider %s is available: its credentials were saved in %s\n", name, l.secrets.Path())
		default:
			fmt.Fprintf(l.log, "provider %s: its credentials changed in %s; calls from now on use them\n", name, l.secrets.Path())
		}
		l.sums[name], l.why[name] = sum, ep.Unavailable
		out = append(out, ep)
	}
	return out
}
