package provider

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
)

// Capability is something a provider or model can do. Its text form is the
// spec's string ("tool_use", "long_context_1m", ...).
type Capability string

// The spec's nine capabilities.
const (
	CapCodeExecution   Capability = "code_execution"
	CapWebBrowse       Capability = "web_browse"
	CapFileIO          Capability = "file_io"
	CapVision          Capability = "vision"
	CapLongContext200K Capability = "long_context_200k"
	CapLongContext1M   Capability = "long_context_1m"
	CapPromptCaching   Capability = "prompt_caching"
	CapToolUse         Capability = "tool_use"
	CapStreaming       Capability = "streaming"
)

// CapStructuredOutput: the model can be held to a JSON Schema for its
// answer ([Request.ResponseFormat]); routing requires it when one is set.
const CapStructuredOutput Capability = "structured_output"

// Sampling capabilities, beyond the spec's nine: what a model does with the
// best-effort settings of a [Request]. A model without one drops the
// setting (see [Request.Unhonoured]); routing never requires them.
const (
	CapSampling Capability = "sampling" // honours temperature and top_p
	CapTopK     Capability = "top_k"    // honours top_k
	CapSeed     Capability = "seed"     // honours seed
	// CapReasoning: the model takes a reasoning setting
	// ([Request.Reasoning]) and returns its reasoning where the provider
	// gives it.
	CapReasoning Capability = "reasoning"
)

// Capabilities lists every capability in a fixed order (the order of the
// spec, then the sampling capabilities, structured output and reasoning).
var Capabilities = []Capability{
	CapCodeExecution, CapWebBrowse, CapFileIO, CapVision, CapLongContext200K,
	CapLongContext1M, CapPromptCaching, CapToolUse, CapStreaming,
	CapSampling, CapTopK, CapSeed, CapStructuredOutput, CapReasoning,
}

func (c Capability) bit() (CapabilitySet, bool) {
	for i, v := range Capabilities {
		if v == c {
			return 1 << i, true
		}
	}
	return 0, false
}

// Valid reports whether c is one of [Capabilities].
func (c Capability) Valid() bool { _, ok := c.bit(); return ok }

// String returns the spec's name of the capability.
func (c Capability) String() string { return string(c) }

// ParseCapability parses a capability name; the error lists the valid names
// and suggests the nearest one.
func ParseCapability(s string) (Capability, error) {
	c := Capability(s)
	if c.Valid() {
		return c, nil
	}
	names := make([]string, len(Capabilities))
	for i, v := range Capabilities {
		names[i] = string(v)
	}
	return "", fmt.Errorf("unknown capability %q%s; valid capabilities: %s", s, didYouMean(s, names), joinQuoted(names))
}

// MarshalText implements encoding.TextMarshaler.
func (c Capability) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("invalid capability %q", string(c))
	}
	return []byte(c), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; it rejects unknown names.
func (c *Capability) UnmarshalText(b []byte) error {
	v, err := ParseCapability(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// CapabilitySet is a set of capabilities. The zero value is the empty set.
// It marshals to JSON as a list of names in the spec's order.
type CapabilitySet uint16

// NewCapabilitySet returns the set holding caps. Invalid capabilities are
// ignored; validate input with [ParseCapability] first.
func NewCapabilitySet(caps ...Capability) CapabilitySet {
	var s CapabilitySet
	for _, c := range caps {
		s = s.With(c)
	}
	return s
}

// ParseCapabilitySet parses a comma-separated list such as
// "tool_use,long_context_1m". Blank entries are ignored.
func ParseCapabilitySet(list string) (CapabilitySet, error) {
	var s CapabilitySet
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		c, err := ParseCapability(part)
		if err != nil {
			return 0, err
		}
		s = s.With(c)
	}
	return s, nil
}

// Has reports whether c is in the set.
func (s CapabilitySet) Has(c Capability) bool {
	b, ok := c.bit()
	return ok && s&b != 0
}

// With returns the set with c added.
func (s CapabilitySet) With(c Capability) CapabilitySet {
	b, _ := c.bit()
	return s | b
}

// Without returns the set with c removed.
func (s CapabilitySet) Without(c Capability) CapabilitySet {
	b, _ := c.bit()
	return s &^ b
}

// Union returns the capabilities in s or o.
func (s CapabilitySet) Union(o CapabilitySet) CapabilitySet { return s | o }

// Contains reports whether every capability of o is in s.
func (s CapabilitySet) Contains(o CapabilitySet) bool { return s&o == o }

// Missing returns the capabilities of required that s lacks.
func (s CapabilitySet) Missing(required CapabilitySet) CapabilitySet { return required &^ s }

// Len returns the number of capabilities in the set.
func (s CapabilitySet) Len() int { return bits.OnesCount16(uint16(s)) }

// List returns the capabilities in the spec's order.
func (s CapabilitySet) List() []Capability {
	out := make([]Capability, 0, s.Len())
	for i, c := range Capabilities {
		if s&(1<<i) != 0 {
			out = append(out, c)
		}
	}
	return out
}

// String returns the names joined by commas, in the spec's order.
func (s CapabilitySet) String() string {
	names := make([]string, 0, s.Len())
	for _, c := range s.List() {
		names = append(names, string(c))
	}
	return strings.Join(names, ",")
}

// MarshalJSON encodes the set as a JSON array of names.
func (s CapabilitySet) MarshalJSON() ([]byte, error) { return json.Marshal(s.List()) }

// UnmarshalJSON decodes a JSON array of names; unknown names are errors.
func (s *CapabilitySet) UnmarshalJSON(b []byte) error {
	var caps []Capability
	if err := json.Unmarshal(b, &caps); err != nil {
		return err
	}
	*s = NewCapabilitySet(caps...)
	return nil
}
