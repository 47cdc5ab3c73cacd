//go:build linux

package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// load is a few clients calling through the balancer at a steady pace
// until stopped, keeping every answer.
type load struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startLoad runs clients, each making a call every every.
func startLoad(f *fleet, token string, clients int, every time.Duration) *load {
	l := &load{stop: make(chan struct{})}
	ctx := context.Background()
	for range clients {
		l.wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				a := askTask(ctx, f.lb, token, "")
				l.mu.Lock()
				l.answers = append(l.answers, a)
				l.mu.Unlock()
			}
		})
	}
	return l
}

// since returns the answers to the calls made after t.
func (l *load) since(t time.Time) []answer {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []answer
	for _, a := range l.answers {
		if a.start.After(t) {
			out = append(out, a)
		}
	}
	return out
}

// end stops the clients and returns every answer.
func (l *load) end() []answer {
	close(l.stop)
	l.wg.Wait()
	return l.answers
}

// readyz returns the status of base's readiness probe and its body.
func readyz(base string) (int, readyBody) {
	var b readyBody
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		b.Status = err.Error()
		return -1, b
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &b); err != nil {
		b.Status = string(data)
	}
	return resp.StatusCode, b
}

type readyBody struct {
	Status string   `json:"status"`
	Down   []string `json:"down"`
}

// replicaName is the name HAProxy gives replica i (headerServer).
func replicaName(i int) string { return fmt.Sprintf("r%d", i) }

// firstFrom returns, for each replica, the first answer among answers
// that ok accepts, and whether every replica has one.
func firstFrom(n int, answers []answer, ok func(answer) bool) (map[string]answer, bool) {
	first := map[string]answer{}
	for _, a := range answers {
		if _, seen := first[a.server]; !seen && ok(a) {
			first[a.server] = a
		}
	}
	for i := range n {
		if _, seen := first[replicaName(i)]; !seen {
			return first, false
		}
	}
	return first, true
}

// TestFleetEnginesCutAndRecover: the fleet under light load (two clients,
// 40 calls a second through HAProxy with the official Anthropic SDK).
//
// PostgreSQL cut (its forwarder closed, every connection through it
// dropped): once a replica has refused a call, it sends none to the
// provider; the refusals are 503s naming the ledger's PostgreSQL; every
// replica's /readyz says not ready naming postgres while /healthz stays
// 200; restored, every replica serves again by itself, and every call a
// client saw answered has exactly one ledger row. The time from the cut to
// the last call reaching the provider (calls admitted under a budget
// lease taken before the cut) is measured and bounded by the lease window.
//
// Redis cut: every call is still answered, each with
// X-CortexBuild-Degraded: rate-limits (the key's rpm counted by each
// replica alone), /readyz says 200 degraded naming redis; restored (and
// /readyz polled, as a balancer does), answers stop saying degraded.
func TestFleetEnginesCutAndRecover(t *testing.T) {
	f := newFleet(t, 3)
	token, keyID := f.createKey(0, "engines", "--rpm", "100000")
	for i, base := range f.replicas {
		if st, b := readyz(base); st != 200 || b.Status != "ready" {
			t.Fatalf("replica %d with every engine up: /readyz %d %+v", i, st, b)
		}
	}
	l := startLoad(f, token, 2, 50*time.Millisecond)
	loadStart := time.Now()
	waitFor(t, 10*time.Second, "an answer from every replica", func() error {
		if _, all := firstFrom(3, l.since(loadStart), func(a answer) bool { return a.status == 200 }); !all {
			return fmt.Errorf("not yet")
		}
		return nil
	})

	// PostgreSQL cut.
	cut := time.Now()
	f.pg.Cut()
	refused := func(a answer) bool { return a.status == 503 }
	var noticed map[string]answer
	waitFor(t, 15*time.Second, "a refusal from every replica", func() error {
		var all bool
		if noticed, all = firstFrom(3, l.since(cut), refused); !all {
			return fmt.Errorf("refused so far: %v (%s)", codesOf(l.since(cut)), sample(l.since(cut)))
		}
		return nil
	})
	notReady := make([]time.Duration, 3)
	for i, base := range f.replicas {
		waitFor(t, 10*time.Second, fmt.Sprintf("replica %d's /readyz saying postgres is down", i), func() error {
			if st, b := readyz(base); st != 503 || b.Status != "not ready" || !slices.Contains(b.Down, "postgres") {
				return fmt.Errorf("%d %+v", st, b)
			}
			notReady[i] = time.Since(cut)
			return nil
		})
		if err := get(base + "/healthz"); err != nil {
			t.Errorf("replica %d's /healthz with PostgreSQL cut: %v", i, err)
		}
	}
	allNoticed := cut
	for _, a := range noticed {
		allNoticed = later(allNoticed, a.end)
	}
	// Go on refusing for a while: at least 30 more calls.
	waitFor(t, 10*time.Second, "30 calls after every replica refused", func() error {
		if n := len(l.since(allNoticed)); n < 30 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	duringCut := l.since(cut)
	reached, lastReached := f.upstream.since(cut)
	afterNotice, _ := f.upstream.since(allNoticed)

	restored := time.Now()
	f.pg.Restore()
	served := func(a answer) bool { return a.status == 200 }
	var back map[string]answer
	waitFor(t, 30*time.Second, "an answer from every replica after PostgreSQL came back", func() error {
		var all bool
		if back, all = firstFrom(3, l.since(restored), served); !all {
			return fmt.Errorf("answered so far: %v", codesOf(l.since(restored)))
		}
		return nil
	})
	readyAgain := make([]time.Duration, 3)
	for i, base := range f.replicas {
		waitFor(t, 10*time.Second, fmt.Sprintf("replica %d ready again", i), func() error {
			if st, b := readyz(base); st != 200 || b.Status != "ready" {
				return fmt.Errorf("%d %+v", st, b)
			}
			readyAgain[i] = time.Since(restored)
			return nil
		})
	}

	// What the clients saw of the cut.
	admitted := 0
	causes := map[string]int{} // refusals by what refused them
	for _, a := range duringCut {
		switch {
		case a.status == 200:
			admitted++
			if n, ok := noticed[a.server]; ok && a.start.After(n.end) {
				t.Errorf("replica %s answered a call made %v after it refused one", a.server, a.start.Sub(n.end))
			}
		case a.status == 503:
			// Refused by the key check (the keys are in PostgreSQL too),
			// by the project's pause (read from PostgreSQL before each
			// call), or by the ledger.
			switch {
			case strings.Contains(a.msg, "the virtual keys in PostgreSQL (the shared state) cannot be read"):
				causes["keys"]++
			case strings.Contains(a.msg, "cannot read the project state: project pause: shared state (project-pause): reading: the shared state's PostgreSQL at "+f.pg.Addr+" is unreachable"):
				causes["pause"]++
			case strings.Contains(a.msg, "the ledger's PostgreSQL at "+f.pg.Addr+" is unreachable"):
				causes["ledger"]++
			default:
				t.Errorf("a 503 with PostgreSQL cut that does not name it: %s", a.msg)
			}
		default:
			t.Errorf("with PostgreSQL cut: %d %s; want 200 (admitted before the replica noticed) or 503", a.status, a.msg)
		}
	}
	if afterNotice != 0 {
		t.Errorf("%d calls reached the provider after every replica had refused one", afterNotice)
	}
	var window time.Duration
	if reached > 0 {
		window = lastReached.Sub(cut)
	}
	noticeAfter := map[string]time.Duration{}
	for s, a := range noticed {
		noticeAfter[s] = a.end.Sub(cut).Round(time.Millisecond)
	}
	recovered := map[string]time.Duration{}
	for s, a := range back {
		recovered[s] = a.end.Sub(restored).Round(time.Millisecond)
	}
	t.Logf("PostgreSQL cut: refusals by what refused them: %v", causes)
	t.Logf("PostgreSQL cut: %d calls made, %v; %d reached the provider, the last %v after the cut; first refusal per replica after %v; /readyz not ready after %v",
		len(duringCut), codesOf(duringCut), reached, window.Round(time.Millisecond), noticeAfter, roundAll(notReady))
	t.Logf("PostgreSQL restored: first answer per replica after %v; /readyz ready after %v", recovered, roundAll(readyAgain))
	// A call under a lease taken before the cut may still go until the
	// replica's next write fails: its renewal, every fifth of the hold
	// TTL (2 s), or the end of the lease window (2 s).
	if window > 2500*time.Millisecond {
		t.Errorf("calls reached the provider until %v after the cut; the lease window is 2s", window)
	}

	// Redis cut.
	redisCut := time.Now()
	f.redis.Cut()
	waitFor(t, 10*time.Second, "20 calls with Redis cut", func() error {
		if n := len(l.since(redisCut)); n < 20 {
			return fmt.Errorf("%d", n)
		}
		return nil
	})
	for i, base := range f.replicas {
		if st, b := readyz(base); st != 200 || b.Status != "degraded" || !slices.Equal(b.Down, []string{"redis"}) {
			t.Errorf("replica %d with Redis cut: /readyz %d %+v; want 200 degraded, redis down", i, st, b)
		}
	}
	withoutRedis := l.since(redisCut)
	degraded := 0
	for _, a := range withoutRedis {
		if a.status != 200 {
			t.Errorf("with Redis cut: %d %s; want every call answered", a.status, a.msg)
		}
		if a.degraded == "rate-limits" {
			degraded++
		}
	}
	if degraded != len(withoutRedis) {
		t.Errorf("with Redis cut: %d of %d answers say %q; want all", degraded, len(withoutRedis), "X-CortexBuild-Degraded: rate-limits")
	}
	redisBack := time.Now()
	f.redis.Restore()
	whole := func(a answer) bool { return a.status == 200 && a.degraded == "" }
	var clear map[string]answer
	readyRedis := make([]time.Duration, 3)
	waitFor(t, 20*time.Second, "every replica ready and answering without degradation after Redis came back", func() error {
		for i, base := range f.replicas {
			if readyRedis[i] != 0 {
				continue
			}
			if st, b := readyz(base); st != 200 || b.Status != "ready" {
				return fmt.Errorf("replica %d: /readyz %d %+v", i, st, b)
			}
			readyRedis[i] = time.Since(redisBack)
		}
		var all bool
		if clear, all = firstFrom(3, l.since(redisBack), whole); !all {
			return fmt.Errorf("not every replica yet")
		}
		return nil
	})
	clearAfter := map[string]time.Duration{}
	for s, a := range clear {
		clearAfter[s] = a.end.Sub(redisBack).Round(time.Millisecond)
	}
	t.Logf("Redis cut: %d calls, %v, %d of them degraded (rate-limits); restored: /readyz ready after %v, first whole answer per replica after %v",
		len(withoutRedis), codesOf(withoutRedis), degraded, roundAll(readyRedis), clearAfter)

	// Nothing answered is lost: every 200 has exactly one row.
	all := l.end()
	answered := map[string]bool{}
	for _, a := range all {
		if a.status == 200 {
			answered[a.invocation] = true
		}
	}
	rows := eachAnsweredOnce(t, f.dsn, "key_id", keyID, answered, 15*time.Second)
	t.Logf("%d calls in all, %d answered, %d invocations in the ledger", len(all), len(answered), len(rows))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// sample gives the status and text of the first answer that is neither a
// 200 nor a 503, for a failure message.
func sample(answers []answer) string {
	for _, a := range answers {
		if a.status != 200 && a.status != 503 {
			return fmt.Sprintf("%s: %d %s", a.server, a.status, a.msg)
		}
	}
	return ""
}
