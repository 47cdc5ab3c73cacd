// Command loadbench is the gateway's load benchmark (scripts/gateway-bench.sh
// runs it; docs/benchmarks.md has the figures).
//
//	loadbench fake -listen 127.0.0.1:18801
//	    serves the loopback provider fakes as the upstream: the Anthropic
//	    fake (anthropicfake) on /v1/messages, the OpenAI fake (openaifake)
//	    on every other path; a directive in the prompt shapes the answer
//	    (see fake.go).
//	loadbench run -target name=URL[,pid=PID][,header=K:V]... [flags]
//	    runs, for each target in turn, open-loop phases at fixed rates,
//	    a streamed phase and a closed-loop phase, and prints a table.
//	loadbench coding -target name=…,url=…,route=LABEL:PROTO:MODEL... [flags]
//	    runs the workloads coding agents produce (big prompts, long
//	    streams, many slow streams, small calls) on each route of each
//	    target, and prints each figure beside the floor's (see coding.go).
//	loadbench proxy -listen 127.0.0.1:18804 -upstream http://127.0.0.1:18801
//	    serves a pass-through reverse proxy (net/http server and client,
//	    nothing else): the floor any net/http gateway pays on the machine.
//	loadbench profile -out cpu.pprof -- serve ARGS...
//	    runs 'cortexbuild serve' in this process with a CPU profile
//	    written when it stops (SIGTERM).
//
// Open-loop phases send on a constant schedule (request i at start + i/rate)
// whatever the answers do, and time each request from its intended send
// time, so that a slow answer does not hide the queueing it causes
// (coordinated omission). The closed-loop phase runs a fixed number of
// workers, each sending its next request when the previous one is
// answered. CPU time comes from /proc/PID/stat (utime+stime) around each
// phase, peak RSS from VmHWM and the resident set from VmRSS in
// /proc/PID/status.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/cli"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadbench fake|run|coding|proxy|profile …")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fake":
		err = fake(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	case "proxy":
		err = proxy(os.Args[2:])
	case "coding":
		err = coding(os.Args[2:])
	case "profile":
		err = profile(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

// serveUntilSignal serves h on addr until SIGINT or SIGTERM.
func serveUntilSignal(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = hs.Close() }()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// proxy forwards every request to the upstream with the standard
// library's server and client and copies the answer back, flushing
// streamed chunks: no decoding, no auth, no ledger. It is the baseline
// for what the gateway adds above the cost of two HTTP hops.
func proxy(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18804", "address")
	upstream := fs.String("upstream", "http://127.0.0.1:18801", "upstream base URL")
	_ = fs.Parse(args)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 256, 256
	client := &http.Client{Transport: tr}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request body is still being sent upstream when the answer
		// starts: without full duplex the server may discard and close it
		// at the first flush, under the transport's feet.
		_ = http.NewResponseController(w).EnableFullDuplex()
		req, err := http.NewRequestWithContext(r.Context(), r.Method, *upstream+r.URL.Path, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.ContentLength = r.ContentLength
		req.Header = r.Header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				_ = rc.Flush()
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					fmt.Fprintf(os.Stderr, "proxy: %s %s: reading the upstream's answer: %v\n", r.Method, r.URL.Path, err)
				}
				return
			}
		}
	})
	return serveUntilSignal(*listen, h)
}

// profile runs the CLI in this process under the CPU profiler.
func profile(args []string) error {
	fs := flag.NewFlagSet("profile", flag.ExitOnError)
	out := fs.String("out", "cpu.pprof", "profile file")
	allocs := fs.String("allocs", "", "also write the allocation profile (pprof \"allocs\") to this file at exit")
	_ = fs.Parse(args)
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, fs.Args(), os.Stdin, os.Stdout, os.Stderr)
	stop()
	pprof.StopCPUProfile()
	if *allocs != "" {
		af, err := os.Create(*allocs)
		if err != nil {
			return err
		}
		defer af.Close()
		if err := pprof.Lookup("allocs").WriteTo(af, 0); err != nil {
			return err
		}
	}
	if code != 0 {
		return fmt.Errorf("cortexbuild exited with %d", code)
	}
	return nil
}

// target is one server under load.
type target struct {
	name    string
	url     string // base URL; requests go to url + "/v1/chat/completions"
	model   string
	pid     int
	headers http.Header
}

func parseTarget(s string) (target, error) {
	t := target{headers: http.Header{}}
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
		case "model":
			t.model = v
		case "pid":
			t.pid, _ = strconv.Atoi(v)
		case "header":
			hk, hv, _ := strings.Cut(v, ":")
			t.headers.Add(hk, hv)
		default:
			return t, fmt.Errorf("target %q: unknown key %s", s, k)
		}
	}
	if t.name == "" || t.url == "" || t.model == "" {
		return t, fmt.Errorf("target %q: name, url and model are required", s)
	}
	return t, nil
}

type targets []target

func (ts *targets) String() string { return fmt.Sprint(len(*ts)) }
func (ts *targets) Set(s string) error {
	t, err := parseTarget(s)
	if err == nil {
		*ts = append(*ts, t)
	}
	return err
}

// errShed is a request the target refused as overloaded, with the
// protocol's overloaded status and a retry-after: load shedding, counted
// apart from failures.
var errShed = errors.New("shed: overloaded, retry-after")

// result is one phase against one target.
type result struct {
	lat      []time.Duration // per successful request
	errs     int64           // failed requests other than shed ones
	shed     int64           // refused with the overloaded answer (503 or 529 with retry-after)
	sent     int64
	wall     time.Duration
	cpu      time.Duration // of the target process, when known
	firstErr string
}

func (r *result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	i := int(p * float64(len(r.lat)-1))
	return r.lat[i]
}

func (r *result) rps() float64 { return float64(len(r.lat)) / r.wall.Seconds() }

// cpuPerReq is the target's CPU time per request, in µs.
func (r *result) cpuPerReq() float64 {
	if r.cpu == 0 || r.sent == 0 {
		return 0
	}
	return float64(r.cpu.Microseconds()) / float64(r.sent)
}

var seq atomic.Int64

// body is a small chat request; the counter makes every prompt unique so
// that the response cache misses and every call reaches the upstream.
func body(model string, stream bool) []byte {
	n := seq.Add(1)
	return fmt.Appendf(nil, `{"model":%q,"stream":%v,"max_completion_tokens":64,"messages":[{"role":"user","content":"hello there, request %d"}]}`, model, stream, n)
}

type runner struct {
	client *http.Client
}

// once sends one request and returns when the answer is read; for a
// stream it also returns the time from "from" to the first content chunk.
func (rn *runner) once(ctx context.Context, t target, stream bool, from time.Time) (ttfb time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/v1/chat/completions", bytes.NewReader(body(t.model, stream)))
	if err != nil {
		return 0, err
	}
	req.Header = t.headers.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := rn.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		if (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == 529) && resp.Header.Get("Retry-After") != "" {
			return 0, errShed
		}
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !stream {
		b, err := io.ReadAll(resp.Body)
		if err == nil && !bytes.Contains(b, []byte(`"choices"`)) {
			err = fmt.Errorf("unexpected body %.200s", b)
		}
		return 0, err
	}
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		if ttfb == 0 && bytes.Contains(line, []byte(`"content":"`)) && !bytes.Contains(line, []byte(`"content":""`)) {
			ttfb = time.Since(from)
		}
		if bytes.Equal(line, []byte("data: [DONE]")) {
			done = true
		}
	}
	if err := sc.Err(); err != nil {
		return ttfb, err
	}
	if !done || ttfb == 0 {
		return ttfb, errors.New("the stream ended without content or [DONE]")
	}
	return ttfb, nil
}

// openLoop sends at rate for d on a constant schedule; latency runs from
// each request's intended send time.
func (rn *runner) openLoop(ctx context.Context, t target, rate int, d time.Duration, stream bool) *result {
	n := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	res := &result{lat: make([]time.Duration, 0, n)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0 := cpuTime(t.pid)
	start := time.Now()
	for i := range n {
		intended := start.Add(time.Duration(i) * interval)
		if w := time.Until(intended); w > 0 {
			time.Sleep(w)
		}
		wg.Add(1)
		res.sent++
		go func() {
			defer wg.Done()
			ttfb, err := rn.once(ctx, t, stream, intended)
			lat := time.Since(intended)
			if stream {
				// For streams the figure is the time to the first content
				// chunk, from the intended send time.
				lat = ttfb
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, errShed):
				res.shed++
				return
			case err != nil:
				res.errs++
				if res.firstErr == "" {
					res.firstErr = err.Error()
				}
				return
			}
			res.lat = append(res.lat, lat)
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.cpu = cpuTime(t.pid) - cpu0
	return res
}

// closedLoop runs workers that each send the next request when the
// previous one is answered, for d.
func (rn *runner) closedLoop(ctx context.Context, t target, workers int, d time.Duration) *result {
	res := &result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0 := cpuTime(t.pid)
	start := time.Now()
	stop := start.Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var sent, errs, shed int64
			var first string
			for time.Now().Before(stop) {
				t0 := time.Now()
				_, err := rn.once(ctx, t, false, t0)
				sent++
				if errors.Is(err, errShed) {
					shed++
					continue
				}
				if err != nil {
					errs++
					if first == "" {
						first = err.Error()
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			res.lat = append(res.lat, lat...)
			res.sent += sent
			res.errs += errs
			res.shed += shed
			if res.firstErr == "" {
				res.firstErr = first
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.cpu = cpuTime(t.pid) - cpu0
	return res
}

// cpuTime is utime+stime of pid (0 when unknown).
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}

// peakRSS is VmHWM of pid in MiB.
func peakRSS(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var ts targets
	fs.Var(&ts, "target", "name=…,url=…,model=…[,pid=…][,header=K:V]; the first is the direct baseline (repeatable)")
	rates := fs.String("rates", "500,1000,2000", "open-loop rates, requests/s")
	dur := fs.Duration("duration", 8*time.Second, "length of each open-loop phase")
	warm := fs.Duration("warmup", 2*time.Second, "warm-up at the lowest rate before measuring each target")
	streamRate := fs.Int("stream-rate", 500, "rate of the streamed phase (0: none)")
	workers := fs.Int("workers", 32, "closed-loop workers")
	closed := fs.Duration("closed", 8*time.Second, "length of the closed-loop phase (0: none)")
	_ = fs.Parse(args)
	if len(ts) == 0 {
		return errors.New("no -target")
	}
	var rs []int
	for _, s := range strings.Split(*rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || r <= 0 {
			return fmt.Errorf("bad rate %q", s)
		}
		rs = append(rs, r)
	}
	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: time.Minute, DisableCompression: true}
	rn := &runner{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
	ctx := context.Background()
	type row struct {
		t      target
		open   []*result
		stream *result
		closed *result
		rss    float64
	}
	var rows []row
	for _, t := range ts {
		fmt.Fprintf(os.Stderr, "%s: warm-up\n", t.name)
		rn.openLoop(ctx, t, rs[0], *warm, false)
		r := row{t: t}
		for _, rate := range rs {
			res := rn.openLoop(ctx, t, rate, *dur, false)
			fmt.Fprintf(os.Stderr, "%s: %d rps: p50 %s p99 %s, %.0f rps, %d shed, %d errors %s\n", t.name, rate, res.pct(.5), res.pct(.99), res.rps(), res.shed, res.errs, res.firstErr)
			r.open = append(r.open, res)
		}
		if *streamRate > 0 {
			r.stream = rn.openLoop(ctx, t, *streamRate, *dur/2, true)
			fmt.Fprintf(os.Stderr, "%s: stream ttfb p50 %s p99 %s, %d errors %s\n", t.name, r.stream.pct(.5), r.stream.pct(.99), r.stream.errs, r.stream.firstErr)
		}
		if *closed > 0 {
			r.closed = rn.closedLoop(ctx, t, *workers, *closed)
			fmt.Fprintf(os.Stderr, "%s: closed loop %.0f rps, p50 %s, %d errors %s\n", t.name, r.closed.rps(), r.closed.pct(.5), r.closed.errs, r.closed.firstErr)
		}
		r.rss = peakRSS(t.pid)
		rows = append(rows, r)
		tr.CloseIdleConnections()
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d.Microseconds())/1000) }
	base := rows[0]
	fmt.Println("| target | rate (req/s) | p50 ms | p99 ms | added p50 ms | added p99 ms | achieved req/s | CPU µs/req | shed | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		for i, res := range r.open {
			b := base.open[i]
			cpu := "—"
			if c := res.cpuPerReq(); c > 0 {
				cpu = fmt.Sprintf("%.0f", c)
			}
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %.0f | %s | %d | %d |\n", r.t.name, rs[i], ms(res.pct(.5)), ms(res.pct(.99)),
				ms(res.pct(.5)-b.pct(.5)), ms(res.pct(.99)-b.pct(.99)), res.rps(), cpu, res.shed, res.errs)
		}
	}
	fmt.Println()
	fmt.Println("| target | stream TTFB p50 ms | p99 ms | added TTFB p50 ms | added p99 ms | closed-loop req/s | CPU busy in closed loop | CPU µs/req closed loop | one-core capacity req/s | peak RSS MiB | shed | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		st, cl := r.stream, r.closed
		if st == nil {
			st = &result{wall: 1}
		}
		if cl == nil {
			cl = &result{wall: 1}
		}
		bs := base.stream
		if bs == nil {
			bs = &result{}
		}
		busy, cpu, capacity := "—", "—", "—"
		if cl.cpu > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*cl.cpu.Seconds()/cl.wall.Seconds())
			cpu = fmt.Sprintf("%.0f", cl.cpuPerReq())
			capacity = fmt.Sprintf("%.0f", 1e6/cl.cpuPerReq())
		}
		rss := "—"
		if r.rss > 0 {
			rss = fmt.Sprintf("%.1f", r.rss)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %d | %d |\n", r.t.name, ms(st.pct(.5)), ms(st.pct(.99)),
			ms(st.pct(.5)-bs.pct(.5)), ms(st.pct(.99)-bs.pct(.99)), cl.rps(), busy, cpu, capacity, rss, st.shed+cl.shed, st.errs+cl.errs)
	}
	return nil
}
