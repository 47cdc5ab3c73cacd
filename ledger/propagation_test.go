package ledger_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/internal/testenv"
	"github.com/cortexbuild/cortexbuild/ledger"
	"github.com/cortexbuild/cortexbuild/provider"
)

// probePairs is the body of a pairs process in mode probe: for each line
// "call <id>" of its stdin, it reserves a pair's estimate on the pairs'
// scopes and releases it at once (the lease keeps its room), and says "ok",
// or "refused paused", "refused over" or "refused other <why>". It closes
// its store when its stdin ends.
func probePairs(t *testing.T, f *ledger.Fast, in *bufio.Scanner) {
	ctx := context.Background()
	for in.Scan() {
		id, ok := strings.CutPrefix(in.Text(), "call ")
		if !ok {
			t.Fatalf("stdin said %q; want call <id>", in.Text())
		}
		err := f.Reserve(ctx, ledger.Reservation{InvocationID: id, Amount: pairsEstimate, Scopes: pairsScopes, ExpiresAt: time.Now().Add(time.Hour)})
		switch {
		case err == nil:
			if err := f.Release(ctx, id); err != nil {
				t.Fatal(err)
			}
			fmt.Println(pairsLine + "ok")
		case errors.Is(err, ledger.ErrPaused):
			fmt.Println(pairsLine + "refused paused")
		case errors.Is(err, ledger.ErrOverBudget):
			fmt.Println(pairsLine + "refused over")
		default:
			fmt.Println(pairsLine + "refused other " + strings.ReplaceAll(err.Error(), "\n", " "))
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// propagationBound is how soon a pause or a budget change made by one
// process must stop the calls of every other (the fleet's bound).
const propagationBound = time.Second

// Two processes on one PostgreSQL schema hold a budget lease each on a
// task scope; one pauses the task, or lowers its limit below its spend.
// The other, whose lease still has room for a minute (its window), refuses
// its next call once it has heard of the change: within the bound, measured
// from the return of the change to its first refusal, asking it for calls
// meanwhile.
func TestBudgetChangeReachesOtherProcesses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(context.Context, *ledger.Fast) error
		want   string // the other process's refusal
	}{
		{"pause", func(ctx context.Context, f *ledger.Fast) error {
			return f.Pause(ctx, pairsTask, "stopped by the operator")
		}, "refused paused"},
		{"pause for budget", func(ctx context.Context, f *ledger.Fast) error {
			return f.PauseForBudget(ctx, pairsTask, "over its budget")
		}, "refused paused"},
		{"limit below spend", func(ctx context.Context, f *ledger.Fast) error {
			return f.SetBudget(ctx, pairsTask, pairsCost-provider.MustMoney("0.001"))
		}, "refused over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testenv.Postgres(t)
			schema := newSchema(t, url)
			ctx := context.Background()
			st, err := ledger.OpenPostgres(ctx, url, ledger.WithSchema(schema))
			if err != nil {
				t.Fatal(err)
			}
			for _, sc := range pairsScopes {
				if err := st.SetBudget(ctx, sc, provider.MustMoney("100")); err != nil {
					t.Fatal(err)
				}
			}
			a, err := ledger.NewFast(ctx, st, t.TempDir(), ledger.FastOnError(func(err error) { t.Log(err) }))
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b := startPairsProcess(t, pairsRun{procs: 1}.spec(url, schema, t.TempDir(), 0, "probe"), envPairsWindow+"=1m")
			if line := b.next(t); line != "ready" {
				t.Fatalf("pairs process said %q; want ready", line)
			}
			if _, err := io.WriteString(b.stdin, "go\n"); err != nil {
				t.Fatal(err)
			}
			n := 0
			call := func() string {
				n++
				if _, err := fmt.Fprintf(b.stdin, "call b-%d\n", n); err != nil {
					t.Fatal(err)
				}
				return b.next(t)
			}
			// Each takes a lease: a call of a settled (spend to go below),
			// two of b (the second admitted in memory).
			if err := a.Reserve(ctx, ledger.Reservation{InvocationID: "a-1", Amount: pairsEstimate, Scopes: pairsScopes, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := a.Settle(ctx, ledger.Settlement{InvocationID: "a-1", Cost: pairsCost, Scopes: pairsScopes,
				Entry: ledger.AttemptRow{Task: "pairs", Agent: "a", Provider: "sim", Model: "m", Outcome: "ok", InputTokens: 10, Cost: pairsCost}}); err != nil {
				t.Fatal(err)
			}
			if err := a.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.Reserve(ctx, ledger.Reservation{InvocationID: "a-2", Amount: pairsEstimate, Scopes: pairsScopes, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := a.Release(ctx, "a-2"); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if got := call(); got != "ok" {
					t.Fatalf("a call of the other process before the change: %s", got)
				}
			}
			called := time.Now()
			if err := tc.change(ctx, a); err != nil {
				t.Fatal(err)
			}
			changed := time.Now()
			// The other process refuses once it has heard of it.
			admitted, got := 0, ""
			deadline := changed.Add(5 * propagationBound)
			for time.Now().Before(deadline) {
				if got = call(); got != "ok" {
					break
				}
				admitted++
			}
			took := time.Since(changed)
			if got != tc.want {
				t.Fatalf("the other process's calls after the change: %d admitted in %s, then %q; want %q", admitted, took, got, tc.want)
			}
			if took > propagationBound {
				t.Errorf("the other process refused its first call %s after the change returned; the bound is %s", took, propagationBound)
			}
			t.Logf("the other process refused its first call %s after the change returned (%s after it was made), %d calls admitted meanwhile",
				took.Round(10*time.Microsecond), time.Since(called).Round(10*time.Microsecond), admitted)
			// The process that made the change refuses at once.
			if err := a.Reserve(ctx, ledger.Reservation{InvocationID: "a-3", Amount: pairsEstimate, Scopes: pairsScopes, ExpiresAt: time.Now().Add(time.Hour)}); !errors.Is(err, ledger.ErrPaused) && !errors.Is(err, ledger.ErrOverBudget) {
				t.Errorf("a call of the process that made the change = %v; want a refusal", err)
			}
			b.stdin.Close()
			if err := b.cmd.Wait(); err != nil {
				t.Fatalf("pairs process: %v\n%s", err, b.errs.String())
			}
		})
	}
}
