package provider

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestParseMoney(t *testing.T) {
	tests := []struct {
		in   string
		want Money
	}{
		{"12.34", 12*Dollar + 34*Cent},
		{"12", 12 * Dollar},
		{"0.000000001", Nano},
		{"$5", 5 * Dollar},
		{"-3.5", -3*Dollar - 50*Cent},
		{".5", 50 * Cent},
		{" 7.25 ", 7*Dollar + 25*Cent},
		{"0.125", 125_000_000},
	}
	for _, tt := range tests {
		got, err := ParseMoney(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseMoneyRejects(t *testing.T) {
	for _, in := range []string{"", "abc", "1e3", "1.0000000001", "1,5", "--1", "1.2.3", "99999999999", "NaN", "."} {
		if got, err := ParseMoney(in); err == nil || !errors.Is(err, ErrMoneySyntax) {
			t.Errorf("ParseMoney(%q) = %v, %v; want ErrMoneySyntax", in, got, err)
		}
	}
}

func TestMoneyString(t *testing.T) {
	tests := []struct {
		m    Money
		want string
	}{
		{12 * Dollar, "12.00"},
		{12*Dollar + 34*Cent, "12.34"},
		{125_000, "0.000125"},
		{Nano, "0.000000001"},
		{-50 * Cent, "-0.50"},
		{0, "0.00"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Money(%d).String() = %q, want %q", int64(tt.m), got, tt.want)
		}
		back, err := ParseMoney(tt.want)
		if err != nil || back != tt.m {
			t.Errorf("round trip of %q = %d, %v", tt.want, back, err)
		}
	}
}

func TestMoneyJSON(t *testing.T) {
	b, err := json.Marshal(struct{ C Money }{12*Dollar + 34*Cent})
	if err != nil || string(b) != `{"C":"12.34"}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var v struct{ A, B Money }
	if err := json.Unmarshal([]byte(`{"A":"0.1","B":0.2}`), &v); err != nil {
		t.Fatal(err)
	}
	// 0.1 + 0.2 is exactly 0.3: no float64 anywhere.
	if v.A+v.B != MustMoney("0.3") {
		t.Errorf("0.1+0.2 = %s, want 0.30", v.A+v.B)
	}
}

func TestPerMillionRoundsOnceAndUp(t *testing.T) {
	// 1 token at $0.01/M is exactly 10 nano-dollars; at $0.0001/M it is a
	// tenth of a nano-dollar, which rounds up to one.
	if got := PerMillion(MustMoney("0.01"), 1); got != 10*Nano {
		t.Errorf("PerMillion exact = %d, want 10", got)
	}
	if got := PerMillion(MustMoney("0.0001"), 1); got != Nano {
		t.Errorf("PerMillion tiny = %d, want 1", got)
	}
	// 3 tokens at $3/M = $0.000009 exactly.
	if got := PerMillion(MustMoney("3"), 3); got != MustMoney("0.000009") {
		t.Errorf("PerMillion = %s", got)
	}
	// Summing then rounding once: 3 × (1 token at $0.0001/M) is 0.0003 nano → 1 nano, not 3.
	var a MoneyAccumulator
	for range 3 {
		a.Add(MustMoney("0.0001"), 1)
	}
	if got := a.Total(); got != Nano {
		t.Errorf("accumulated = %d, want 1", got)
	}
	// Huge products saturate instead of overflowing.
	a = MoneyAccumulator{}
	a.Add(Money(math.MaxInt64), math.MaxInt64)
	if got := a.Total(); got != Money(math.MaxInt64) {
		t.Errorf("saturation = %d", got)
	}
	// Negative inputs add nothing.
	a = MoneyAccumulator{}
	a.Add(-Dollar, 10)
	a.Add(Dollar, -10)
	if a.Total() != 0 {
		t.Errorf("negative inputs counted")
	}
}
