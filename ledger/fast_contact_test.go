package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortexbuild/cortexbuild/ledger"
)

// A process whose lease has room, with nothing in flight, admits a call
// against it only if PostgreSQL answered it within the contact window:
// once the network between them stalls (nothing fails, nothing is
// answered) or is cut, a call past the window is refused, naming the
// server and not the password, before any renewal is due; calls are
// admitted again once PostgreSQL answers.
func TestFastPostgresContactWindow(t *testing.T) {
	const window = 250 * time.Millisecond
	b := newBehindProxy(t, t.TempDir(), ledger.FastContactWindow(window), ledger.FastOnError(func(err error) { t.Log(err) }))
	raw, schema, proxy, clk, f, c := b.raw, b.schema, b.proxy, b.clk, b.f, b.c
	for _, outage := range []struct {
		name      string
		cut, heal func()
	}{
		{"stalled", proxy.Stall, proxy.Heal},
		{"cut", proxy.Cut, proxy.Restore},
	} {
		// Within the window (the settlements were answered), a call is
		// admitted; past it, with the store out of reach, none is.
		if err := c.call(); err != nil {
			t.Fatalf("%s: a call before the outage = %v", outage.name, err)
		}
		outage.cut()
		clk.Advance(window + time.Millisecond) // no renewal is due: it comes every 2 s
		sent := c.sent
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs { // together: they wait for one round trip
			wg.Go(func() { _, errs[i] = c.reserve() })
		}
		wg.Wait()
		took := time.Since(start)
		if c.sent != sent {
			t.Errorf("%s: %d calls admitted with PostgreSQL out of reach past the contact window", outage.name, c.sent-sent)
		}
		for _, err := range errs {
			var we *ledger.WriteError
			if !errors.As(err, &we) || !errors.Is(err, ledger.ErrUnavailable) {
				t.Fatalf("%s: a call past the contact window = %v; want a refusal", outage.name, err)
			}
			if want := "the ledger's PostgreSQL at " + proxy.Addr + " is unreachable"; !strings.Contains(err.Error(), want) {
				t.Errorf("%s: refusal %q does not say %q", outage.name, err, want)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Errorf("%s: the password is in %q", outage.name, err)
			}
		}
		t.Logf("%s: 3 calls past the contact window refused in %s: %v", outage.name, took.Round(time.Millisecond), errs[0])
		outage.heal()
		until(t, "calls are admitted again", func() bool { return c.call() == nil })
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkAnswered(t, raw, schema, c)
}

// While the connection that hears of budget changes is down, no call is
// admitted, even against a lease with room and the store answering
// otherwise (here: the clock does not move, so the contact is fresh); once
// it listens again, every lease is closed first, so a pause made while it
// was down, which it never heard of, refuses the next call.
func TestFastPostgresListensAgainAndClosesLeases(t *testing.T) {
	b := newBehindProxy(t, t.TempDir(), ledger.FastOnError(func(err error) { t.Log(err) }))
	defer b.f.Close()
	ctx := context.Background()
	raw, schema, proxy, f, c := b.raw, b.schema, b.proxy, b.f, b.c
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	var refusal error
	until(t, "a call is refused with the listening connection down", func() bool {
		id, err := c.reserve()
		if err == nil {
			f.Release(ctx, id) // admitted before the connection's loss was seen
		}
		refusal = err
		return err != nil
	})
	if want := "listen for budget changes: the ledger's PostgreSQL at " + proxy.Addr + " is unreachable"; !errors.Is(refusal, ledger.ErrUnavailable) || !strings.Contains(refusal.Error(), want) {
		t.Fatalf("refusal %v; want one saying %q", refusal, want)
	}
	// Another process pauses the task meanwhile; nothing tells this one.
	other, err := ledger.OpenPostgres(ctx, raw, ledger.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Pause(ctx, fastTask, "paused while the network was cut"); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	var err2 error
	until(t, "a call is decided once the process listens again", func() bool {
		var id string
		id, err2 = c.reserve()
		if err2 == nil {
			f.Release(ctx, id)
		}
		return !errors.Is(err2, ledger.ErrUnavailable)
	})
	if !errors.Is(err2, ledger.ErrPaused) {
		t.Fatalf("the first call once the process listens again = %v; want it refused as paused (its lease closed)", err2)
	}
}
