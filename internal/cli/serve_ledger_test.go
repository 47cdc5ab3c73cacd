package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/builtin"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/ledger/ledgertest"
	"github.com/cortexbuild/cortexbuild/provider/anthropic/anthropicfake"
)

// startServeWith is startServe with a hook that adjusts the environment
// first.
func startServeWith(t *testing.T, hook func(*env), dir string, vars map[string]string, args ...string) (string, func() (int, string)) {
	t.Helper()
	u, _, stop := serveIn(t, hook, dir, vars, args...)
	return u, stop
}

// serveIn runs 'cortexbuild serve' in-process in wd, after hook adjusts
// its environment, and returns its base URL, its standard output so far
// (the banner) and a stop function that gives its exit code and standard
// error.
func serveIn(t *testing.T, hook func(*env), wd string, vars map[string]string, args ...string) (string, string, func() (int, string)) {
	t.Helper()
	out := &lineWaiter{re: regexp.MustCompile(`listening on (http://\S+)`), found: make(chan string, 1)}
	errs := &lineWaiter{}
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: errs, wd: wd, registry: builtin.Registry(),
		getenv:    func(k string) string { return vars[k] },
		lookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
	if hook != nil {
		hook(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- e.run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)) }()
	select {
	case u := <-out.found:
		return u, out.String(), func() (int, string) {
			cancel()
			return <-done, errs.String()
		}
	case code := <-done:
		cancel()
		t.Fatalf("serve exited with %d before listening:\n%s\n%s", code, out.String(), errs.String())
	}
	return "", "", nil
}

// postJSON posts body to base+path and returns the status and the body.
func postJSON(t *testing.T, base, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// chat makes one Chat Completions call through the gateway.
func chat(t *testing.T, base string, n int) (int, string) {
	t.Helper()
	return postJSON(t, base, "/v1/chat/completions", fmt.Sprintf(`{"model":"builder","messages":[{"role":"user","content":"call %d"}]}`, n))
}

// ledgerProject is a project with a monthly budget whose provider is the
// Anthropic fake; store is its store: section (empty: the default).
func ledgerProject(t *testing.T, store string) (string, *anthropicfake.Server) {
	t.Helper()
	srv := anthropicfake.New(anthropicfake.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	dir := writeConfig(t, fmt.Sprintf(`orchestration: true
providers:
  claude:
    type: anthropic
    base_url: %s
    credentials:
      api_key: ${MY_KEY}
budgets:
  project_monthly: "50"
%s`, srv.URL(), store))
	return dir, srv
}

// monthHeld is the month's held amount as 'cortexbuild budget show'
// prints it.
func monthHeld(t *testing.T, dir string) string {
	t.Helper()
	code, out, errs := run(t, dir, keyEnv, "budget", "show", "--json")
	var bs []ledger.Budget
	if code != 0 || json.Unmarshal([]byte(out), &bs) != nil {
		t.Fatalf("budget show = %d %s %s", code, out, errs)
	}
	for _, b := range bs {
		if strings.HasPrefix(string(b.Scope), "month:") {
			return b.Held.String()
		}
	}
	t.Fatalf("no month budget in %s", out)
	return ""
}

// After a burst through the gateway, the budget lease it took is given back
// once its window ends, with no other call coming: 'budget show' then
// shows nothing held.
func TestServeGivesBackLeasesWhenIdle(t *testing.T) {
	dir, srv := ledgerProject(t, "")
	clk := ledgertest.NewClock(time.Now())
	base, stop := startServeWith(t, func(e *env) {
		e.fastOpts = []ledger.FastOption{ledger.FastClock(clk.Now), ledger.FastAfterFunc(clk.AfterFunc)}
	}, dir, keyEnv, "--no-auth")
	for i := range 10 {
		if code, body := chat(t, base, i); code != 200 {
			t.Fatalf("call %d = %d %s", i, code, body)
		}
	}
	if got := len(srv.Requests()); got != 10 {
		t.Fatalf("%d provider requests; want 10", got)
	}
	if h := monthHeld(t, dir); h == "0.00" || h == "0" {
		t.Fatalf("held during the lease window = %s; want the lease", h)
	}
	clk.Advance(2 * time.Second) // the window ends; no call comes
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for h := monthHeld(t, dir); h != "0.00"; h = monthHeld(t, dir) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("held after the window, the gateway idle = %s; want 0", h)
		}
	}
	if code, errs := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errs)
	}
}

// settleRefusing is a store that refuses every settlement, as a store on a
// full disk does.
type settleRefusing struct{ ledger.Store }

func (s settleRefusing) Settle(context.Context, ledger.Settlement) error {
	return fmt.Errorf("%w: database or disk is full", ledger.ErrUnavailable)
}

// A call whose settlement the store never took fails the command once the
// answer is out, though the settlement waits in the journal: the exit code
// says that not everything paid for is in the store, and the next command
// applies it.
func TestInvokeFailsWhenItsSettlementIsNotInTheStore(t *testing.T) {
	dir, srv := ledgerProject(t, "")
	code, out, errs := runWith(t, func(e *env) {
		e.wrapStore = func(st ledger.Store) ledger.Store { return settleRefusing{st} }
	}, dir, keyEnv, "invoke", "--agent", "builder", "hi")
	if code != ExitFailure || !strings.Contains(errs, "closing the store:") || !strings.Contains(errs, "not closed cleanly") {
		t.Fatalf("invoke with a store refusing settlements = %d\n%s\n%s", code, out, errs)
	}
	if len(srv.Requests()) != 1 || out == "" {
		t.Fatalf("the call was not answered (%d requests): %q", len(srv.Requests()), out)
	}
	code, out, errs = run(t, dir, keyEnv, "spend", "--json")
	var rep struct {
		Total struct {
			Attempts int `json:"attempts"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Total.Attempts != 1 {
		t.Fatalf("spend after the journal's replay = %d %s %s; want the one attempt", code, out, errs)
	}
}
