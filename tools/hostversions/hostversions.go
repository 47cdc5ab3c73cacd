// Package hostversions holds the pinned versions of the host CLIs that
// CortexBuild renders into (GitHub CLI, Claude Code, Codex CLI, Copilot CLI):
// host-versions.yaml beside this file, built into the binary. The VM image
// installs exactly these versions; 'cortexbuild doctor' compares the CLIs
// found on PATH with them.
package hostversions

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/cortexbuild/cortexbuild/internal/yamlx"
)

// FileName is the pins file, in this package's directory.
const FileName = "host-versions.yaml"

//go:embed host-versions.yaml
var embedded []byte

// Tool is one pinned host CLI.
type Tool struct {
	Pos yamlx.Pos `yaml:"-"`

	// Name is the executable looked up on PATH ("claude").
	Name string `yaml:"name,required" desc:"Executable name looked up on PATH."`
	// Title is the product's name ("Claude Code").
	Title string `yaml:"title,required" desc:"Product name."`
	// Version is the pinned version, MAJOR.MINOR.PATCH.
	Version string `yaml:"version,required" desc:"Pinned version, MAJOR.MINOR.PATCH."`
	// VersionCommand prints the installed version; its first element is
	// the executable.
	VersionCommand []string `yaml:"version_command,required" desc:"Command that prints the installed version, e.g. [claude, --version]."`
	// Install says how to install the pinned version: the one-line fix.
	Install string `yaml:"install,required" desc:"How to install the pinned version."`
}

// Pins is the whole file.
type Pins struct {
	Version int    `yaml:"version" desc:"Format version; only 1 exists."`
	Tools   []Tool `yaml:"tools,required" desc:"The pinned host CLIs."`
}

// versionRE finds a MAJOR.MINOR.PATCH version (with an optional
// pre-release or build suffix, and after an optional "v") in a CLI's
// output.
var versionRE = regexp.MustCompile(`(?:^|[^0-9.])(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)`)

// exactRE is a pinned version: MAJOR.MINOR.PATCH exactly.
var exactRE = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// ExtractVersion returns the first MAJOR.MINOR.PATCH version in a CLI's
// version output, or "" when there is none.
func ExtractVersion(output string) string {
	if m := versionRE.FindStringSubmatch(output); m != nil {
		return m[1]
	}
	return ""
}

// Default returns the pins built into the binary.
func Default() (*Pins, error) { return Parse(FileName, embedded) }

// Parse reads a pins file (named file in messages) and checks it: every
// tool named once, an exact version, a version command that starts with
// the tool's executable.
func Parse(file string, data []byte) (*Pins, error) {
	var p Pins
	if err := yamlx.Decode(file, data, &p); err != nil {
		return nil, err
	}
	if p.Version != 0 && p.Version != 1 {
		return nil, fmt.Errorf("%s: version %d is not supported; only 1 exists", file, p.Version)
	}
	seen := map[string]bool{}
	var problems []string
	for _, t := range p.Tools {
		at := t.Pos.String()
		if at == "" {
			at = file
		}
		switch {
		case seen[t.Name]:
			problems = append(problems, fmt.Sprintf("%s: tool %q is listed twice", at, t.Name))
		case !exactRE.MatchString(t.Version):
			problems = append(problems, fmt.Sprintf("%s: %s: version %q is not an exact MAJOR.MINOR.PATCH version", at, t.Name, t.Version))
		case len(t.VersionCommand) == 0 || t.VersionCommand[0] != t.Name:
			problems = append(problems, fmt.Sprintf("%s: %s: version_command must start with %q", at, t.Name, t.Name))
		}
		seen[t.Name] = true
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return &p, nil
}
