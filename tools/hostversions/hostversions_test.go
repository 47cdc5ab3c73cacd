package hostversions

import (
	"strings"
	"testing"
)

func TestExtractVersion(t *testing.T) {
	for out, want := range map[string]string{
		"gh version 2.102.0 (2026-09-30)\nhttps://github.com/cli/cli/releases/tag/v2.102.0": "2.102.0",
		"2.1.332 (Claude Code)": "2.1.332",
		"codex-cli 0.171.0":     "0.171.0",
		"GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n": "1.0.102",
		"mytool v1.2.3":              "1.2.3",
		"tool 1.0.0-rc.1 (build 7)":  "1.0.0-rc.1",
		"codex-cli (development)":    "",
		"version 1.2":                "",
		"release 10.20.30+meta.1 ok": "10.20.30+meta.1",
	} {
		if got := ExtractVersion(out); got != want {
			t.Errorf("ExtractVersion(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestBuiltInPins(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range p.Tools {
		names[tool.Name] = true
		if !strings.Contains(tool.Install, tool.Version) {
			t.Errorf("%s: the install line %q does not install the pinned %s", tool.Name, tool.Install, tool.Version)
		}
	}
	for _, want := range []string{"gh", "claude", "codex", "copilot"} {
		if !names[want] {
			t.Errorf("no pin for %s", want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for name, body := range map[string]string{
		"loose version":  "tools:\n  - {name: a, title: A, version: ^1.2.0, version_command: [a, --version], install: x}\n",
		"twice":          "tools:\n  - {name: a, title: A, version: 1.2.0, version_command: [a], install: x}\n  - {name: a, title: A, version: 1.2.0, version_command: [a], install: x}\n",
		"other command":  "tools:\n  - {name: a, title: A, version: 1.2.0, version_command: [b], install: x}\n",
		"unknown key":    "tools:\n  - {name: a, title: A, version: 1.2.0, version_command: [a], install: x, url: y}\n",
		"missing field":  "tools:\n  - {name: a, version: 1.2.0, version_command: [a], install: x}\n",
		"format version": "version: 2\ntools: []\n",
	} {
		if _, err := Parse("pins.yaml", []byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
