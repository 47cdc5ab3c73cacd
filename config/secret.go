package config

import (
	"fmt"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
)

// Secret is a credential as written in the file: either an ${ENV_VAR}
// reference (recommended) or a literal value. It never prints its value.
type Secret struct {
	raw    string
	envVar string
	pos    yamlx.Pos
}

var envRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// UnmarshalYAMLNode implements yamlx.NodeUnmarshaler, keeping the position
// for later errors (an unset variable is reported where it was referenced).
func (s *Secret) UnmarshalYAMLNode(file string, n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return fmt.Errorf("expected text such as ${API_KEY}")
	}
	s.raw, s.pos = n.Value, yamlx.Pos{File: file, Line: n.Line, Column: n.Column}
	if m := envRef.FindStringSubmatch(n.Value); m != nil {
		s.envVar = m[1]
	} else if len(n.Value) > 1 && n.Value[0] == '$' {
		return fmt.Errorf("malformed reference %q: write ${NAME} with a letter or _ first, letters, digits and _ after", n.Value)
	}
	return nil
}

// IsZero reports whether nothing was written.
func (s Secret) IsZero() bool { return s.raw == "" }

// EnvVar returns the referenced variable's name, or "" for a literal.
func (s Secret) EnvVar() string { return s.envVar }

// Pos returns where the secret was written.
func (s Secret) Pos() yamlx.Pos { return s.pos }

// Resolve returns the value: the variable's value for a reference, else the
// literal. An unset or empty variable is an error naming it and its line.
func (s Secret) Resolve(lookup func(string) (string, bool)) (string, error) {
	if s.envVar == "" {
		return s.raw, nil
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(s.envVar)
	if !ok || v == "" {
		return "", s.pos.Errorf("environment variable %s is not set: export %s=... before running, or remove the reference", s.envVar, s.envVar)
	}
	return v, nil
}

// String shows the reference, or a redaction marker for a literal.
func (s Secret) String() string {
	switch {
	case s.raw == "":
		return ""
	case s.envVar != "":
		return s.raw
	}
	return "[redacted]"
}

// NewSecretRef returns a Secret that references an environment variable.
func NewSecretRef(envVar string) Secret { return Secret{raw: "${" + envVar + "}", envVar: envVar} }

// MarshalText shows the reference or the redaction marker, never a value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
