package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The workloads coding agents produce (loadbench coding), each measured
// against every target in turn, the floor first:
//
//   - big prompts: closed loop, unary, bodies of -big-kb KB (a whole
//     conversation with tools and file contents): CPU per MB of request
//     body;
//   - long streams: closed loop, answers of -chunks content chunks: CPU
//     per streamed event;
//   - slow streams: -slow-streams streams held open at once, the fake
//     trickling an event every -slow-every: how many were refused, and the
//     resident memory each open stream holds;
//   - small calls: closed loop, one-line prompts: CPU per request.
//
// A target has routes: a protocol's endpoint and the model name to call
// it with. The floor's route of the same protocol is what each figure is
// divided by; a target named NAME-before is what NAME's is divided by.

// route is one way of calling a target.
type route struct {
	label string // as printed: "messages", "chat", "messages→openai"
	proto string // "messages" or "chat": the client's protocol
	model string
}

// path is the route's endpoint.
func (r route) path() string {
	if r.proto == "messages" {
		return "/v1/messages"
	}
	return "/v1/chat/completions"
}

// ctarget is a server under load with its routes.
type ctarget struct {
	name    string
	url     string
	pid     int
	headers http.Header
	routes  []route
}

// parseCTarget reads name=…,url=…[,pid=…][,header=K:V]…,route=LABEL:PROTO:MODEL….
func parseCTarget(s string) (ctarget, error) {
	t := ctarget{headers: http.Header{}}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return t, fmt.Errorf("target %q: want key=value pairs", s)
		}
		switch k {
		case "name":
			t.name = v
		case "url":
			t.url = v
		case "pid":
			t.pid, _ = strconv.Atoi(v)
		case "header":
			hk, hv, _ := strings.Cut(v, ":")
			t.headers.Add(hk, hv)
		case "route":
			f := strings.SplitN(v, ":", 3)
			if len(f) != 3 || (f[1] != "messages" && f[1] != "chat") || f[2] == "" {
				return t, fmt.Errorf("target %q: route %q: want LABEL:messages|chat:MODEL", s, v)
			}
			t.routes = append(t.routes, route{label: f[0], proto: f[1], model: f[2]})
		default:
			return t, fmt.Errorf("target %q: unknown key %s", s, k)
		}
	}
	if t.name == "" || t.url == "" || len(t.routes) == 0 {
		return t, fmt.Errorf("target %q: name, url and a route are required", s)
	}
	return t, nil
}

type ctargets []ctarget

func (ts *ctargets) String() string { return fmt.Sprint(len(*ts)) }
func (ts *ctargets) Set(s string) error {
	t, err := parseCTarget(s)
	if err == nil {
		*ts = append(*ts, t)
	}
	return err
}

// phase is one closed-loop workload on one route of one target.
type phase struct {
	reqs     int64 // answered in full
	units    int64 // streamed events, or request-body bytes
	errs     int64
	shed     int64
	firstErr string
	wall     time.Duration
	cpu      time.Duration
}

func (p *phase) fail(err error) {
	if errors.Is(err, errShed) {
		p.shed++
		return
	}
	p.errs++
	if p.firstErr == "" {
		p.firstErr = err.Error()
	}
}

// per is CPU µs per unit (0 when unknown).
func (p *phase) per(unit float64) float64 {
	if p == nil || p.cpu == 0 || p.units == 0 {
		return 0
	}
	return float64(p.cpu.Microseconds()) / (float64(p.units) / unit)
}

// slowPhase is the slow streams on one route of one target.
type slowPhase struct {
	n         int
	opened    int64 // got their first event
	completed int64
	refused   int64 // answered with an error status (shed included)
	errs      int64
	firstErr  string
	maxOpen   int64         // open at once, at the RSS sample below
	rss0      float64       // VmRSS before, MiB
	rssOpen   float64       // VmRSS with maxOpen streams open, MiB
	cpu       time.Duration // over the phase
	wall      time.Duration
}

// kibPerStream is the resident memory each open stream held.
func (s *slowPhase) kibPerStream() float64 {
	if s == nil || s.maxOpen == 0 || s.rssOpen == 0 {
		return 0
	}
	return (s.rssOpen - s.rss0) * 1024 / float64(s.maxOpen)
}

// coder runs the workloads.
type coder struct {
	client *http.Client // closed loops
	slowC  *http.Client // slow streams: no overall timeout
	seq    atomic.Int64
	big    map[string]*bigBodies
}

// send makes one call and reads its answer; a stream's events are counted
// (one data line each) and first, when set, is called at the first.
func (c *coder) send(ctx context.Context, cl *http.Client, t ctarget, r route, body []byte, stream bool, first func()) (events int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+r.path(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = t.headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	if r.proto == "messages" && req.Header.Get("Anthropic-Version") == "" {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		if (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == 529) && resp.Header.Get("Retry-After") != "" {
			return 0, errShed
		}
		return 0, &statusError{resp.StatusCode, string(b)}
	}
	if !stream {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		want := `"choices"`
		if r.proto == "messages" {
			want = `"type":"message"`
		}
		if !bytes.Contains(b, []byte(want)) || !bytes.Contains(b, []byte(`"usage"`)) {
			return 0, fmt.Errorf("unexpected answer %.200s", b)
		}
		return 0, nil
	}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			line = nil
		}
		if bytes.HasPrefix(line, []byte("data:")) {
			if events == 0 && first != nil {
				first()
			}
			events++
			if bytes.HasPrefix(line, []byte("data: [DONE]")) {
				done = true
			}
		}
		switch {
		case bytes.HasPrefix(line, []byte("event: message_stop")):
			done = true
		case bytes.HasPrefix(line, []byte("event: error")):
			data, _ := br.ReadSlice('\n')
			return events, fmt.Errorf("the stream ended with an error event: %.300s", bytes.TrimSpace(data))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return events, err
		}
	}
	if !done {
		return events, fmt.Errorf("the stream ended without its last event, after %d events", events)
	}
	return events, nil
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("status %d: %s", e.status, e.body) }

// closed runs workers that each send their next request when the last is
// answered, for d; do returns the units of one answered request.
func (c *coder) closed(ctx context.Context, t ctarget, workers int, d time.Duration, do func() (int64, error)) *phase {
	res := &phase{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0 := cpuTime(t.pid)
	start := time.Now()
	stop := start.Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p phase
			for time.Now().Before(stop) {
				n, err := do()
				if err != nil {
					p.fail(err)
					continue
				}
				p.reqs++
				p.units += n
			}
			mu.Lock()
			defer mu.Unlock()
			res.reqs += p.reqs
			res.units += p.units
			res.errs += p.errs
			res.shed += p.shed
			if res.firstErr == "" {
				res.firstErr = p.firstErr
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.cpu = cpuTime(t.pid) - cpu0
	return res
}

// slow opens n trickled streams at rate per second and holds them until
// the fake ends them, sampling the target's resident memory meanwhile.
func (c *coder) slow(ctx context.Context, t ctarget, r route, cfg *codingConfig) *slowPhase {
	n := cfg.slowStreams
	res := &slowPhase{n: n, rss0: rssNow(t.pid)}
	var open, opened, completed, refused, errs atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0 := cpuTime(t.pid)
	start := time.Now()
	// A stream lasts about (chunks+6) events × every; allow three times
	// that and the ramp before giving up on one.
	limit := time.Duration(n)*time.Second/time.Duration(cfg.slowRate) + 3*time.Duration(cfg.slowChunks+6)*cfg.slowEvery + 10*time.Second
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	sampled := make(chan struct{})
	go func() { // samples VmRSS with the count of streams open
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			o := open.Load()
			rss := rssNow(t.pid)
			mu.Lock()
			if o > res.maxOpen || (o == res.maxOpen && rss > res.rssOpen) {
				res.maxOpen, res.rssOpen = o, rss
			}
			mu.Unlock()
			if completed.Load()+refused.Load()+errs.Load() == int64(n) {
				return
			}
		}
	}()
	interval := time.Second / time.Duration(cfg.slowRate)
	for i := range n {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := smallBody(r.proto, r.model, 1024, true, fmt.Sprintf("hello there, slow stream %d %s", c.seq.Add(1), directiveText(cfg.slowChunks, cfg.slowEvery)))
			isOpen := false
			_, err := c.send(ctx, c.slowC, t, r, body, true, func() {
				isOpen = true
				open.Add(1)
				opened.Add(1)
			})
			if isOpen {
				open.Add(-1)
			}
			var se *statusError
			switch {
			case err == nil:
				completed.Add(1)
				return
			case errors.Is(err, errShed) || errors.As(err, &se):
				refused.Add(1)
			default:
				errs.Add(1)
			}
			mu.Lock()
			if res.firstErr == "" {
				res.firstErr = err.Error()
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	cancel()
	<-sampled
	res.wall = time.Since(start)
	res.cpu = cpuTime(t.pid) - cpu0
	res.opened, res.completed, res.refused, res.errs = opened.Load(), completed.Load(), refused.Load(), errs.Load()
	return res
}

// rssNow is VmRSS of pid in MiB (0 when unknown).
func rssNow(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// codingConfig sizes the workloads.
type codingConfig struct {
	workloads   map[string]bool
	warm        time.Duration
	bigKB       int
	bigWorkers  int
	bigDur      time.Duration
	chunks      int
	longWorkers int
	longDur     time.Duration
	longEvery   time.Duration
	smallWork   int
	smallDur    time.Duration
	slowStreams int
	slowRate    int
	slowEvery   time.Duration
	slowChunks  int
	slowRoutes  map[string]bool // labels; nil: every route
}

// results of one target.
type cresult struct {
	t     ctarget
	big   map[string]*phase
	long  map[string]*phase
	small map[string]*phase
	slow  map[string]*slowPhase
	peak  float64
}

func coding(args []string) error {
	fs := flag.NewFlagSet("coding", flag.ExitOnError)
	var ts ctargets
	fs.Var(&ts, "target", "name=…,url=…[,pid=…][,header=K:V]…,route=LABEL:messages|chat:MODEL…; the first is the floor (repeatable)")
	var cfg codingConfig
	workloads := fs.String("workloads", "slow,small,long,big", "workloads to run, in this order per target")
	fs.DurationVar(&cfg.warm, "warmup", time.Second, "small calls on each route before measuring a target")
	fs.IntVar(&cfg.bigKB, "big-kb", 200, "size of a big prompt's body, KB")
	fs.IntVar(&cfg.bigWorkers, "big-workers", 4, "closed-loop workers sending big prompts")
	fs.DurationVar(&cfg.bigDur, "big", 3*time.Second, "length of a big-prompt phase")
	fs.IntVar(&cfg.chunks, "chunks", 1000, "content chunks of a long stream's answer")
	fs.IntVar(&cfg.longWorkers, "long-workers", 16, "closed-loop workers reading long streams")
	fs.DurationVar(&cfg.longDur, "long", 3*time.Second, "length of a long-stream phase")
	fs.DurationVar(&cfg.longEvery, "long-every", time.Millisecond, "the fake's pause between a long stream's events (0: none, they go back to back)")
	fs.IntVar(&cfg.smallWork, "small-workers", 32, "closed-loop workers sending small calls")
	fs.DurationVar(&cfg.smallDur, "small", 3*time.Second, "length of a small-call phase")
	fs.IntVar(&cfg.slowStreams, "slow-streams", 2000, "streams held open at once")
	fs.IntVar(&cfg.slowRate, "slow-rate", 1000, "streams opened per second")
	fs.DurationVar(&cfg.slowEvery, "slow-every", 500*time.Millisecond, "the fake's pause between a slow stream's events")
	fs.IntVar(&cfg.slowChunks, "slow-chunks", 12, "content chunks of a slow stream's answer")
	slowRoutes := fs.String("slow-routes", "messages", "labels of the routes that get the slow streams (all: every route)")
	only := fs.String("routes", "all", "labels of the routes to run (all: every route)")
	_ = fs.Parse(args)
	if len(ts) == 0 {
		return errors.New("no -target")
	}
	if *only != "all" {
		keep := strings.Split(*only, ",")
		for i := range ts {
			ts[i].routes = slices.DeleteFunc(ts[i].routes, func(r route) bool { return !slices.Contains(keep, r.label) })
		}
	}
	cfg.workloads = map[string]bool{}
	var order []string
	for _, w := range strings.Split(*workloads, ",") {
		w = strings.TrimSpace(w)
		switch w {
		case "slow", "small", "long", "big":
			cfg.workloads[w] = true
			order = append(order, w)
		case "":
		default:
			return fmt.Errorf("unknown workload %q (slow, small, long, big)", w)
		}
	}
	if *slowRoutes != "all" {
		cfg.slowRoutes = map[string]bool{}
		for _, l := range strings.Split(*slowRoutes, ",") {
			cfg.slowRoutes[strings.TrimSpace(l)] = true
		}
	}
	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: time.Minute, DisableCompression: true}
	c := &coder{
		client: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		slowC:  &http.Client{Transport: tr},
		big:    map[string]*bigBodies{},
	}
	for _, p := range []string{"messages", "chat"} {
		bb, err := newBigBodies(p, cfg.bigKB*1000)
		if err != nil {
			return err
		}
		c.big[p] = bb
	}
	ctx := context.Background()
	var results []*cresult
	for _, t := range ts {
		res := &cresult{t: t, big: map[string]*phase{}, long: map[string]*phase{}, small: map[string]*phase{}, slow: map[string]*slowPhase{}}
		for _, r := range t.routes {
			c.closed(ctx, t, 8, cfg.warm, func() (int64, error) { return c.smallCall(ctx, t, r) })
		}
		for _, w := range order {
			for _, r := range t.routes {
				switch w {
				case "slow":
					if cfg.slowRoutes != nil && !cfg.slowRoutes[r.label] {
						continue
					}
					s := c.slow(ctx, t, r, &cfg)
					res.slow[r.label] = s
					fmt.Fprintf(os.Stderr, "%s %s: slow streams: %d opened, %d at once, %d completed, %d refused, %d errors %s; RSS %.1f → %.1f MiB\n",
						t.name, r.label, s.opened, s.maxOpen, s.completed, s.refused, s.errs, s.firstErr, s.rss0, s.rssOpen)
					tr.CloseIdleConnections()
				case "small":
					p := c.closed(ctx, t, cfg.smallWork, cfg.smallDur, func() (int64, error) {
						_, err := c.smallCall(ctx, t, r)
						return 1, err
					})
					res.small[r.label] = p
					c.report(t, r, "small calls", p, "req", 1)
				case "long":
					p := c.closed(ctx, t, cfg.longWorkers, cfg.longDur, func() (int64, error) {
						body := smallBody(r.proto, r.model, 4*cfg.chunks+256, true, fmt.Sprintf("hello there, long stream %d %s", c.seq.Add(1), directiveText(cfg.chunks, cfg.longEvery)))
						return c.send(ctx, c.client, t, r, body, true, nil)
					})
					res.long[r.label] = p
					c.report(t, r, "long streams", p, "event", 1)
				case "big":
					p := c.closed(ctx, t, cfg.bigWorkers, cfg.bigDur, func() (int64, error) {
						body := c.big[r.proto].body(r.proto, r.model, 1024, false, fmt.Sprintf("Go on with the fix, request %d.", c.seq.Add(1)))
						_, err := c.send(ctx, c.client, t, r, body, false, nil)
						return int64(len(body)), err
					})
					res.big[r.label] = p
					c.report(t, r, "big prompts", p, "MB", 1e6)
				}
			}
		}
		res.peak = peakRSS(t.pid)
		results = append(results, res)
		tr.CloseIdleConnections()
	}
	printCoding(results, &cfg)
	return nil
}

// smallCall is one unary one-line call.
func (c *coder) smallCall(ctx context.Context, t ctarget, r route) (int64, error) {
	return c.send(ctx, c.client, t, r, smallBody(r.proto, r.model, 64, false, fmt.Sprintf("hello there, request %d", c.seq.Add(1))), false, nil)
}

func (c *coder) report(t ctarget, r route, what string, p *phase, unit string, per float64) {
	fmt.Fprintf(os.Stderr, "%s %s: %s: %d answered in %s, CPU %s, %.1f µs/%s, %d shed, %d errors %s\n",
		t.name, r.label, what, p.reqs, p.wall.Round(time.Millisecond), p.cpu, p.per(per), unit, p.shed, p.errs, p.firstErr)
}

// printCoding writes the tables: each figure with its ratio to the floor
// (the first target's route of the same protocol) and, for a target NAME
// with a NAME-before beside it, to that one's on the same route.
func printCoding(results []*cresult, cfg *codingConfig) {
	if len(results) == 0 {
		return
	}
	floor := results[0]
	floorOf := func(r route) string {
		for _, fr := range floor.t.routes {
			if fr.proto == r.proto {
				return fr.label
			}
		}
		return ""
	}
	before := func(res *cresult) *cresult {
		for _, o := range results {
			if o.t.name == res.t.name+"-before" {
				return o
			}
		}
		return nil
	}
	ratio := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	num := func(v float64, format string) string {
		if v == 0 {
			return "—"
		}
		return fmt.Sprintf(format, v)
	}
	type table struct {
		key, title, unitHead, rateHead string
		get                            func(*cresult) map[string]*phase
		per                            float64
		rate                           func(*phase) float64
	}
	tables := []table{
		{"big", fmt.Sprintf("Big prompts (%d KB bodies, %d workers, closed loop)", cfg.bigKB, cfg.bigWorkers), "CPU ms/MB of body", "MB/s",
			func(r *cresult) map[string]*phase { return r.big }, 1e6, func(p *phase) float64 { return float64(p.units) / 1e6 / p.wall.Seconds() }},
		{"long", fmt.Sprintf("Long streams (%d content chunks an answer, an event every %s, %d workers, closed loop)", cfg.chunks, cfg.longEvery, cfg.longWorkers), "CPU µs/event", "events/s",
			func(r *cresult) map[string]*phase { return r.long }, 1, func(p *phase) float64 { return float64(p.units) / p.wall.Seconds() }},
		{"small", fmt.Sprintf("Small calls (%d workers, closed loop)", cfg.smallWork), "CPU µs/req", "req/s",
			func(r *cresult) map[string]*phase { return r.small }, 1, func(p *phase) float64 { return float64(p.reqs) / p.wall.Seconds() }},
	}
	for _, tb := range tables {
		if !cfg.workloads[tb.key] {
			continue
		}
		fmt.Printf("%s\n\n", tb.title)
		fmt.Printf("| target | route | %s | %s | × floor | × before | shed | errors |\n", tb.rateHead, tb.unitHead)
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for _, res := range results {
			for _, r := range res.t.routes {
				p := tb.get(res)[r.label]
				if p == nil {
					continue
				}
				v := p.per(tb.per)
				if tb.per == 1e6 {
					v /= 1000 // ms per MB
				}
				fv := 0.0
				if fp := tb.get(floor)[floorOf(r)]; fp != nil {
					fv = fp.per(tb.per)
					if tb.per == 1e6 {
						fv /= 1000
					}
				}
				bv := 0.0
				if b := before(res); b != nil {
					if bp := tb.get(b)[r.label]; bp != nil {
						bv = bp.per(tb.per)
						if tb.per == 1e6 {
							bv /= 1000
						}
					}
				}
				fr := ratio(v, fv)
				if res == floor {
					fr = "1.00"
				}
				fmt.Printf("| %s | %s | %s | %s | %s | %s | %d | %d |\n", res.t.name, r.label, num(tb.rate(p), "%.0f"), num(v, "%.1f"), fr, ratio(v, bv), p.shed, p.errs)
			}
		}
		fmt.Println()
	}
	if cfg.workloads["slow"] {
		fmt.Printf("Slow streams (%d streams opened at %d/s, an event every %s, %d content chunks each)\n\n", cfg.slowStreams, cfg.slowRate, cfg.slowEvery, cfg.slowChunks)
		fmt.Println("| target | route | open at once | completed | refused | errors | RSS before MiB | RSS open MiB | KiB per open stream | × floor | CPU ms per stream | peak RSS MiB |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, res := range results {
			for _, r := range res.t.routes {
				s := res.slow[r.label]
				if s == nil {
					continue
				}
				fv := 0.0
				if fs := floor.slow[floorOf(r)]; fs != nil {
					fv = fs.kibPerStream()
				}
				cpu := 0.0
				if s.opened > 0 {
					cpu = float64(s.cpu.Microseconds()) / 1000 / float64(s.opened)
				}
				fmt.Printf("| %s | %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s |\n", res.t.name, r.label, s.maxOpen, s.completed, s.refused, s.errs,
					num(s.rss0, "%.1f"), num(s.rssOpen, "%.1f"), num(s.kibPerStream(), "%.0f"), ratio(s.kibPerStream(), fv), num(cpu, "%.2f"), num(res.peak, "%.1f"))
			}
		}
		fmt.Println()
	}
}
