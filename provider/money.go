package provider

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Money is an exact amount of US dollars counted in nano-dollars (10⁻⁹ USD).
// It is an integer so that cost and budget arithmetic never rounds through
// float64. The range is about ±9.2 billion dollars.
//
// Its text form is a decimal string such as "12.34" (at least two decimal
// places, at most nine); JSON carries it as a string so no client parses it
// into a float.
type Money int64

// Nano is one nano-dollar; Dollar is one dollar.
const (
	Nano   Money = 1
	Cent   Money = 10_000_000
	Dollar Money = 1_000_000_000
)

// ErrMoneySyntax is wrapped by every [ParseMoney] failure.
var ErrMoneySyntax = errors.New("invalid amount")

// ParseMoney parses a decimal dollar amount: "12", "12.34", "0.000125",
// "-3.5", optionally with a leading "$". It accepts at most nine decimal
// places and rejects exponents, so the value is exact.
func ParseMoney(s string) (Money, error) {
	in := s
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	s = strings.TrimPrefix(s, "$")
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && (!hasDot || frac == "") {
		return 0, fmt.Errorf("%w %q: write a decimal number of US dollars such as 12.34", ErrMoneySyntax, in)
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("%w %q: at most 9 decimal places (one nano-dollar)", ErrMoneySyntax, in)
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%w %q: write a decimal number of US dollars such as 12.34", ErrMoneySyntax, in)
		}
	}
	var w uint64
	if whole != "" {
		var err error
		w, err = strconv.ParseUint(whole, 10, 64)
		if err != nil || w > uint64(math.MaxInt64/int64(Dollar)) {
			return 0, fmt.Errorf("%w %q: too large", ErrMoneySyntax, in)
		}
	}
	f := uint64(0)
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	v := int64(w)*int64(Dollar) + int64(f)
	if neg {
		v = -v
	}
	return Money(v), nil
}

// MustMoney is ParseMoney for constants in code and tests; it panics on a
// malformed literal.
func MustMoney(s string) Money {
	m, err := ParseMoney(s)
	if err != nil {
		panic(err)
	}
	return m
}

// String formats m with at least two and at most nine decimal places,
// without trailing zeros beyond the second: 12 → "12.00", 0.000125 →
// "0.000125".
func (m Money) String() string {
	neg := m < 0
	u := uint64(m)
	if neg {
		u = uint64(-m)
	}
	whole, frac := u/uint64(Dollar), u%uint64(Dollar)
	fs := fmt.Sprintf("%09d", frac)
	fs = strings.TrimRight(fs, "0")
	for len(fs) < 2 {
		fs += "0"
	}
	s := strconv.FormatUint(whole, 10) + "." + fs
	if neg {
		s = "-" + s
	}
	return s
}

// Nanos returns m as an integer count of nano-dollars.
func (m Money) Nanos() int64 { return int64(m) }

// MarshalText implements encoding.TextMarshaler.
func (m Money) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (m *Money) UnmarshalText(b []byte) error {
	v, err := ParseMoney(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// MarshalJSON encodes m as a JSON string ("12.34").
func (m Money) MarshalJSON() ([]byte, error) { return []byte(`"` + m.String() + `"`), nil }

// UnmarshalJSON accepts a JSON string or a bare JSON number, both parsed
// exactly as decimals.
func (m *Money) UnmarshalJSON(b []byte) error {
	s := string(b)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	return m.UnmarshalText([]byte(s))
}

// PerMillion returns the cost of tokens at a price per million tokens,
// rounded up to the next nano-dollar. Sums over several token classes should
// use [MoneyAccumulator] so that rounding happens once.
func PerMillion(pricePerMillion Money, tokens int64) Money {
	var a MoneyAccumulator
	a.Add(pricePerMillion, tokens)
	return a.Total()
}

// MoneyAccumulator sums tokens × price-per-million products exactly (in 128
// bits) and rounds up to a nano-dollar once, in Total. The zero value is an
// empty sum. Negative prices or token counts are treated as zero.
type MoneyAccumulator struct {
	hi, lo uint64
}

// Add adds tokens at pricePerMillion.
func (a *MoneyAccumulator) Add(pricePerMillion Money, tokens int64) {
	if pricePerMillion <= 0 || tokens <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(pricePerMillion), uint64(tokens))
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, lo, 0)
	a.hi, _ = bits.Add64(a.hi, hi, carry)
}

// Total returns the sum divided by one million, rounded up; it saturates at
// the largest Money instead of overflowing.
func (a MoneyAccumulator) Total() Money {
	const million = 1_000_000
	if a.hi >= million {
		return Money(math.MaxInt64)
	}
	q, r := bits.Div64(a.hi, a.lo, million)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return Money(math.MaxInt64)
	}
	return Money(q)
}
