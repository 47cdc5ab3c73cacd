package filepoll

import (
	"testing"
	"time"
)

func TestZeroValueIsAlwaysDue(t *testing.T) {
	var th Throttle
	for i := range 3 {
		if !th.Due() {
			t.Fatalf("call %d: not due with no period", i)
		}
	}
}

func TestDueOncePerPeriodUntilReset(t *testing.T) {
	th := Throttle{Every: time.Hour}
	if !th.Due() {
		t.Fatal("first call not due")
	}
	if th.Due() {
		t.Fatal("second call within the period is due")
	}
	th.Reset()
	if !th.Due() {
		t.Fatal("call after Reset not due")
	}
	if th.Due() {
		t.Fatal("call after the reset look is due again")
	}
}

func TestDueAgainAfterThePeriod(t *testing.T) {
	th := Throttle{Every: time.Hour}
	th.Due()
	th.next = time.Now().Add(-time.Nanosecond) // the period has passed
	if !th.Due() {
		t.Fatal("not due after the period")
	}
}
