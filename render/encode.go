package render

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlScalar writes s as a YAML scalar: plain when that reads back as the
// same string in every YAML version hosts use, else double-quoted.
func yamlScalar(s string) string {
	if yamlPlainOK(s) {
		return s
	}
	return strconv.Quote(s) // Go's escapes (\n, \", \\, \xNN, \uNNNN) are all valid YAML
}

// yamlAmbiguous are plain words some YAML 1.1 readers take for booleans or
// null.
var yamlAmbiguous = map[string]bool{
	"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true,
	"true": true, "false": true, "null": true, "~": true,
}

func yamlPlainOK(s string) bool {
	if s == "" || strings.TrimSpace(s) != s || yamlAmbiguous[strings.ToLower(s)] {
		return false
	}
	if strings.ContainsAny(s, "\"'\\`") || strings.Contains(s, " #") || strings.Contains(s, ": ") || hasControl(s) {
		return false
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte("k: "+s), &m); err != nil {
		return false
	}
	v, ok := m["k"].(string)
	return ok && v == s
}

// yamlFlowList writes items as a YAML flow sequence: [a, b].
func yamlFlowList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = yamlScalar(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlString writes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlMultiline writes s (which ends with a newline) as a TOML multi-line
// string: a literal string in triple single quotes, which keeps the text
// exactly as written, unless s contains three single quotes in a row or a
// control character; then a basic string in triple double quotes, with
// escapes.
func tomlMultiline(s string) string {
	literalOK := !strings.Contains(s, "'''")
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f {
			literalOK = false
		}
	}
	if literalOK {
		return "'''\n" + s + "'''"
	}
	var b strings.Builder
	b.WriteString("\"\"\"\n")
	quotes := 0
	for _, r := range s {
		if r == '"' {
			quotes++
			if quotes == 3 {
				b.WriteString(`\"`)
				quotes = 0
				continue
			}
			b.WriteRune(r)
			continue
		}
		quotes = 0
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(`"""`)
	return b.String()
}
