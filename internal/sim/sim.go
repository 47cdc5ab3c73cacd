package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cortexbuild/cortexbuild/critic"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
	"github.com/cortexbuild/cortexbuild/provider/gemini/geminifake"
	"github.com/cortexbuild/cortexbuild/provider/openaicompat/openaifake"
)

// Key is the API key the anthropic, openai and gemini endpoints require;
// ollama and vllm accept any key or none.
const Key = "sim-key"

// KeyEnv is the environment variable the generated configuration reads the
// key from.
const KeyEnv = "CORTEXBUILD_SIM_KEY"

// DefaultHost is where the sim listens unless Options.Host says otherwise.
const DefaultHost = "127.0.0.1"

// ErrNotLoopback is returned (wrapped) by [Start] and [Options.Endpoints]
// for a host that is not a loopback address.
var ErrNotLoopback = errors.New("the simulator listens on loopback only")

// Options configure [Start].
type Options struct {
	// Host is the loopback address to listen on: 127.0.0.1 (the default),
	// another 127.x.y.z, ::1 or localhost (taken as 127.0.0.1). Anything
	// else, 0.0.0.0 included, is refused.
	Host string
	// Faults are scripted before the first request, in order.
	Faults []Fault
	// Seed, when non-zero, makes the fakes' generated ids deterministic.
	Seed uint64
	// Ports maps a provider name (anthropic, openai, ollama, vllm, gemini)
	// to its port; a missing or 0 port means any free port.
	Ports map[string]int
	// Logf, when set, is told about every fault served. It is called from
	// request goroutines.
	Logf func(format string, args ...any)
}

// Endpoint is one served provider.
type Endpoint struct {
	// Provider is the endpoint's name: anthropic, openai, ollama, vllm or
	// gemini (also its provider instance name in [Sim.Config]).
	Provider string `json:"provider"`
	// Type and Profile are the adapter type and profile that speak its
	// protocol.
	Type    string `json:"type"`
	Profile string `json:"profile,omitempty"`
	// BaseURL is the value for the provider's base_url: the server root
	// for anthropic and gemini ("http://127.0.0.1:PORT"), the /v1 prefix
	// for the OpenAI-compatible ones ("http://127.0.0.1:PORT/v1"), as each
	// adapter expects.
	BaseURL string `json:"base_url"`
	// Key is the API key the endpoint requires ([Key]); empty when it
	// accepts any key or none.
	Key string `json:"key,omitempty"`
}

// kinds describes each provider's endpoint, in endpoint order.
var kinds = []struct {
	provider, typ, profile, path string
	keyed                        bool
}{
	{Anthropic, "anthropic", "", "", true},
	{OpenAI, "openai_compatible", "openai", "/v1", true},
	{Ollama, "openai_compatible", "ollama", "/v1", false},
	{VLLM, "openai_compatible", "vllm", "/v1", false},
	{Gemini, "gemini", "", "", true},
}

// PortsFrom numbers the endpoints' ports from base in endpoint order
// (anthropic base, openai base+1, ollama base+2, vllm base+3, gemini
// base+4). A base of 0 gives an empty map: any free ports.
func PortsFrom(base int) map[string]int {
	ports := map[string]int{}
	if base == 0 {
		return ports
	}
	for i, p := range Providers() {
		ports[p] = base + i
	}
	return ports
}

// loopbackHost checks host and returns the address to listen on.
func loopbackHost(host string) (string, error) {
	h := strings.TrimSpace(host)
	if h == "" {
		return DefaultHost, nil
	}
	if strings.EqualFold(h, "localhost") {
		return DefaultHost, nil
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	ip := net.ParseIP(h)
	if ip == nil || !ip.IsLoopback() {
		what := "not a loopback address"
		switch {
		case ip == nil:
			what = "not an IP address"
		case ip.IsUnspecified():
			what = "every interface, reachable from other machines"
		}
		return "", fmt.Errorf("host %q is %s: %w (127.0.0.1, another 127.x.y.z, ::1 or localhost), so nothing outside this machine can reach it", host, what, ErrNotLoopback)
	}
	return ip.String(), nil
}

func checkPorts(ports map[string]int) error {
	for name, port := range ports {
		if _, ok := catalog[name]; !ok {
			return fmt.Errorf("ports: unknown provider %q%s; the providers are %s", name, didYouMean(name, Providers()), strings.Join(Providers(), ", "))
		}
		if port < 0 || port > 65535 {
			return fmt.Errorf("ports: %s port %d is not between 0 (any free port) and 65535", name, port)
		}
	}
	return nil
}

func endpoint(i int, host string, port int) Endpoint {
	k := kinds[i]
	e := Endpoint{Provider: k.provider, Type: k.typ, Profile: k.profile,
		BaseURL: "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + k.path}
	if k.keyed {
		e.Key = Key
	}
	return e
}

// Endpoints returns the endpoints a sim started with o would serve,
// without starting one; every port must be fixed (non-zero). It is what
// prints a configuration ahead of serving.
func (o Options) Endpoints() ([]Endpoint, error) {
	host, err := loopbackHost(o.Host)
	if err != nil {
		return nil, err
	}
	if err := checkPorts(o.Ports); err != nil {
		return nil, err
	}
	var eps []Endpoint
	for i, p := range Providers() {
		port := o.Ports[p]
		if port == 0 {
			return nil, fmt.Errorf("the %s port is not fixed: endpoints are known ahead only with fixed ports", p)
		}
		eps = append(eps, endpoint(i, host, port))
	}
	return eps, nil
}

// Sim is a running simulator. Its methods are safe for concurrent use.
type Sim struct {
	eps   []Endpoint
	lanes map[string]*lane

	// release is every slow fault's Hold; Close closes it.
	release   chan struct{}
	servers   []*http.Server
	closeFake []func()
	serving   sync.WaitGroup // Serve goroutines

	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup // handlers running

	stopCtx   func() bool
	closeOnce sync.Once
	closeErr  error
}

// Start starts the five endpoints on o.Host and returns once they accept
// connections. The sim serves until Close is called or ctx is done.
func Start(ctx context.Context, o Options) (*Sim, error) {
	host, err := loopbackHost(o.Host)
	if err != nil {
		return nil, err
	}
	if err := checkPorts(o.Ports); err != nil {
		return nil, err
	}
	s := &Sim{lanes: map[string]*lane{}, release: make(chan struct{})}
	for _, p := range Providers() {
		s.lanes[p] = &lane{provider: p, logf: o.Logf}
	}
	for _, f := range o.Faults {
		if err := s.Inject(f); err != nil {
			return nil, err
		}
	}

	anthropicOpts := []anthropicfake.Option{anthropicfake.WithAPIKey(Key), anthropicfake.WithDefaultReply(s.anthropicReply)}
	geminiOpts := []geminifake.Option{geminifake.WithAPIKey(Key), geminifake.WithDefaultReply(s.geminiReply)}
	openAIOpts := func(p string, fl openaifake.Flavor) []openaifake.Option {
		opts := []openaifake.Option{openaifake.WithFlavor(fl), openaifake.WithDefaultReply(s.openAIReply(p))}
		if fl == openaifake.FlavorOpenAI {
			opts = append(opts, openaifake.WithAPIKey(Key))
		}
		if o.Seed != 0 {
			opts = append(opts, openaifake.WithSeed(o.Seed))
		}
		return opts
	}
	if o.Seed != 0 {
		anthropicOpts = append(anthropicOpts, anthropicfake.WithSeed(o.Seed))
		geminiOpts = append(geminiOpts, geminifake.WithSeed(o.Seed))
	}
	a := anthropicfake.NewUnstarted(anthropicOpts...)
	oa := openaifake.NewUnstarted(openAIOpts(OpenAI, openaifake.FlavorOpenAI)...)
	ol := openaifake.NewUnstarted(openAIOpts(Ollama, openaifake.FlavorOllama)...)
	vl := openaifake.NewUnstarted(openAIOpts(VLLM, openaifake.FlavorVLLM)...)
	g := geminifake.NewUnstarted(geminiOpts...)
	type fake struct {
		h         http.Handler
		connState func(net.Conn, http.ConnState)
		close     func()
	}
	fakes := []fake{
		{a.Handler(), a.ConnState, a.Close},
		{oa.Handler(), oa.ConnState, oa.Close},
		{ol.Handler(), ol.ConnState, ol.Close},
		{vl.Handler(), vl.ConnState, vl.Close},
		{g.Handler(), g.ConnState, g.Close},
	}
	for _, f := range fakes {
		s.closeFake = append(s.closeFake, f.close)
	}

	var lc net.ListenConfig
	var listeners []net.Listener
	for i, p := range Providers() {
		l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(o.Ports[p])))
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			for _, f := range fakes {
				f.close()
			}
			return nil, fmt.Errorf("%s endpoint: %w", p, err)
		}
		listeners = append(listeners, l)
		s.eps = append(s.eps, endpoint(i, host, l.Addr().(*net.TCPAddr).Port))
	}
	for i, l := range listeners {
		srv := &http.Server{
			Handler:           s.track(fakes[i].h),
			ConnState:         fakes[i].connState,
			ReadHeaderTimeout: 30 * time.Second,
		}
		s.servers = append(s.servers, srv)
		s.serving.Add(1)
		go func() {
			defer s.serving.Done()
			_ = srv.Serve(l) // returns http.ErrServerClosed on Close
		}()
	}
	s.stopCtx = context.AfterFunc(ctx, func() { _ = s.Close() })
	return s, nil
}

// track counts running handlers so that Close can wait for them, and
// refuses requests once the sim is closing.
func (s *Sim) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.RLock()
		if s.closed {
			s.mu.RUnlock()
			panic(http.ErrAbortHandler)
		}
		s.inflight.Add(1)
		s.mu.RUnlock()
		defer s.inflight.Done()
		h.ServeHTTP(w, r)
	})
}

// Endpoints returns the served endpoints in a fixed order: anthropic,
// openai, ollama, vllm, gemini.
func (s *Sim) Endpoints() []Endpoint { return append([]Endpoint(nil), s.eps...) }

// Config returns a complete .cortexbuild/llm-config.yaml that points every
// provider at the sim (see [ConfigYAML]).
func (s *Sim) Config() []byte { return ConfigYAML(s.eps) }

// Inject adds a fault at run time, after those already pending for its
// provider.
func (s *Sim) Inject(f Fault) error {
	c, err := f.compile()
	if err != nil {
		return fmt.Errorf("fault %q: %w", f.String(), err)
	}
	s.lanes[f.Provider].push(f, c)
	return nil
}

// Pending returns the faults not yet (fully) served, per provider in
// order, with Count the calls still to fail (0: every call).
func (s *Sim) Pending() []Fault {
	var out []Fault
	for _, p := range Providers() {
		out = append(out, s.lanes[p].pending()...)
	}
	return out
}

// Close releases every held request, stops the endpoints and waits for
// their handlers to return. It is safe to call more than once.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() {
		if s.stopCtx != nil {
			s.stopCtx()
		}
		close(s.release)
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		for _, c := range s.closeFake {
			c()
		}
		var errs []error
		for _, srv := range s.servers {
			errs = append(errs, srv.Close())
		}
		s.serving.Wait()
		s.inflight.Wait()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (s *Sim) anthropicReply(rec anthropicfake.Recorded) anthropicfake.Reply {
	if r, ok := s.lanes[Anthropic].next(requestModel(rec.Body), rec.APIKey(), s.release); ok {
		return r.(anthropicfake.Reply)
	}
	r := anthropicfake.Echo(rec)
	r.Text += reviewerLine(rec.Body, requestModel(rec.Body))
	return r
}

func (s *Sim) openAIReply(p string) func(openaifake.Recorded) openaifake.Reply {
	return func(rec openaifake.Recorded) openaifake.Reply {
		if r, ok := s.lanes[p].next(rec.Model(), rec.APIKey(), s.release); ok {
			return r.(openaifake.Reply)
		}
		r := openaifake.Echo(rec)
		r.Text += reviewerLine(rec.Body, rec.Model())
		return r
	}
}

func (s *Sim) geminiReply(rec geminifake.Recorded) geminifake.Reply {
	if r, ok := s.lanes[Gemini].next(rec.Model, rec.APIKey(), s.release); ok {
		return r.(geminifake.Reply)
	}
	r := geminifake.Echo(rec)
	r.Text += reviewerLine(rec.Body, rec.Model)
	return r
}

// reviewerLine plays a critic that follows its persona: when a request asks
// for the independent_reviewer field, the echo ends with it, naming the
// model the request was sent to.
func reviewerLine(body []byte, model string) string {
	if model == "" || !bytes.Contains(body, []byte(critic.Field)) {
		return ""
	}
	return "\n\n" + critic.Field + ": " + model
}

// lane is one provider's queue of pending faults.
type lane struct {
	provider string
	logf     func(string, ...any)

	mu    sync.Mutex
	queue []*queued
}

type queued struct {
	fault  Fault
	c      *compiled
	served int
}

func (l *lane) push(f Fault, c *compiled) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.Params = maps.Clone(f.Params)
	l.queue = append(l.queue, &queued{fault: f, c: c})
}

// next takes one call from the first pending fault and builds its reply;
// ok is false when no fault is pending.
func (l *lane) next(model, key string, hold <-chan struct{}) (reply any, ok bool) {
	l.mu.Lock()
	if len(l.queue) == 0 {
		l.mu.Unlock()
		return nil, false
	}
	q := l.queue[0]
	q.served++
	n := q.served
	if q.fault.Count > 0 && q.served >= q.fault.Count {
		l.queue = l.queue[1:]
	}
	l.mu.Unlock()
	if l.logf != nil {
		of := "every call"
		if q.fault.Count > 0 {
			of = "call " + strconv.Itoa(n) + " of " + strconv.Itoa(q.fault.Count)
		}
		l.logf("%s: fault %s (%s)", l.provider, q.fault.Spec, of)
	}
	return q.c.build(model, key, hold), true
}

func (l *lane) pending() []Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Fault
	for _, q := range l.queue {
		f := q.fault
		if f.Count > 0 {
			f.Count -= q.served
		}
		out = append(out, f)
	}
	return out
}
