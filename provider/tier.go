package provider

import "fmt"

// Tier is a model class chosen by capability and cost rather than by name.
// Its text form is the spec's string ("reasoning_heavy", "balanced",
// "fast_cheap"); the zero value is not a valid tier, and Request treats it as
// [TierBalanced], the spec's default.
type Tier string

// The three tiers of the spec, from the most capable to the cheapest.
const (
	TierReasoningHeavy Tier = "reasoning_heavy"
	TierBalanced       Tier = "balanced"
	TierFastCheap      Tier = "fast_cheap"
)

// Tiers lists every tier from the most capable to the cheapest.
var Tiers = []Tier{TierReasoningHeavy, TierBalanced, TierFastCheap}

// Valid reports whether t is one of the three tiers.
func (t Tier) Valid() bool {
	switch t {
	case TierReasoningHeavy, TierBalanced, TierFastCheap:
		return true
	}
	return false
}

// Smaller returns the next cheaper tier and true, or t and false when t is
// already the cheapest. The orchestrator uses it to retry a timeout on a
// smaller model.
func (t Tier) Smaller() (Tier, bool) {
	switch t {
	case TierReasoningHeavy:
		return TierBalanced, true
	case TierBalanced:
		return TierFastCheap, true
	}
	return t, false
}

// String returns the spec's name of the tier.
func (t Tier) String() string { return string(t) }

// ParseTier parses a tier name. The error lists the valid names and, for a
// near miss, the one that was probably meant.
func ParseTier(s string) (Tier, error) {
	t := Tier(s)
	if t.Valid() {
		return t, nil
	}
	names := make([]string, len(Tiers))
	for i, v := range Tiers {
		names[i] = string(v)
	}
	return "", fmt.Errorf("unknown tier %q%s; valid tiers: %s", s, didYouMean(s, names), joinQuoted(names))
}

// MarshalText implements encoding.TextMarshaler.
func (t Tier) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid tier %q", string(t))
	}
	return []byte(t), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it rejects unknown names.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
