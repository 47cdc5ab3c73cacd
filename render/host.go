package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Host is an AI coding tool that render writes rules and personas into.
type Host string

// The hosts, in the order render lists them.
const (
	Claude  Host = "claude"  // Claude Code
	Codex   Host = "codex"   // OpenAI Codex CLI
	Copilot Host = "copilot" // GitHub Copilot: CLI, VS Code, cloud agent, code review
	Cursor  Host = "cursor"  // Cursor: editor, CLI and SDK
)

var allHosts = []Host{Claude, Codex, Copilot, Cursor}

// Hosts returns every host render knows, in order.
func Hosts() []Host { return slices.Clone(allHosts) }

// Title is the host's product name, for messages.
func (h Host) Title() string {
	switch h {
	case Claude:
		return "Claude Code"
	case Codex:
		return "Codex CLI"
	case Copilot:
		return "GitHub Copilot"
	case Cursor:
		return "Cursor"
	}
	return string(h)
}

func (h Host) valid() bool { return slices.Contains(allHosts, h) }

// ErrUnknownTarget is wrapped by ParseTargets' error for a name that is not
// a host.
var ErrUnknownTarget = errors.New("unknown render target")

// ParseTargets parses a comma-separated list of hosts ("claude,codex") or
// "all". The result is in host order, without duplicates.
func ParseTargets(s string) ([]Host, error) {
	valid := "valid targets: " + joinHosts(allHosts) + ", or all"
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: empty --target (%s)", ErrUnknownTarget, valid)
	}
	seen := map[Host]bool{}
	for _, part := range strings.Split(s, ",") {
		name := Host(strings.ToLower(strings.TrimSpace(part)))
		switch {
		case name == "all":
			for _, h := range allHosts {
				seen[h] = true
			}
		case name.valid():
			seen[name] = true
		default:
			return nil, fmt.Errorf("%w %q (%s)", ErrUnknownTarget, strings.TrimSpace(part), valid)
		}
	}
	var out []Host
	for _, h := range allHosts {
		if seen[h] {
			out = append(out, h)
		}
	}
	return out, nil
}

func joinHosts(hs []Host) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = string(h)
	}
	return strings.Join(s, ", ")
}

// builtinAgents are the agent names each host defines itself (host loading
// rules, "watch for clashes with built-ins"; Cursor's from its subagent
// documentation). They compare case-insensitively: Claude Code's "Explore"
// and a persona "explore" would be told apart by case alone.
var builtinAgents = map[Host][]string{
	Claude:  {"Explore", "Plan", "general-purpose", "claude"},
	Codex:   {"default", "explorer", "worker"},
	Copilot: {"explore"},
	Cursor:  {"explore", "bash", "browser"},
}

// clashPrefix is put before a persona id that is a built-in agent name in
// any host.
const clashPrefix = "cortex-"

// agentName is the name persona id is rendered under on every host. Copilot
// and Cursor also load .claude/agents, and a host keeps one agent per name,
// so a persona has one name everywhere: its id, or cortex-<id> when the id
// is a built-in agent of any host (Copilot's and Cursor's explore, Claude
// Code's Explore).
func agentName(id string) string {
	for _, names := range builtinAgents {
		for _, n := range names {
			if strings.EqualFold(n, id) {
				return clashPrefix + id
			}
		}
	}
	return id
}

// Tools are named in one vocabulary (GitHub Copilot's tool aliases) and
// mapped per host.
var toolVocabulary = []string{"read", "search", "edit", "execute", "web", "agent", "todo"}

// allTools in a persona's tools list means "every tool the host offers".
const allTools = "all"

// claudeTools maps the vocabulary to Claude Code tool names.
var claudeTools = map[string][]string{
	"read":    {"Read"},
	"search":  {"Grep", "Glob"},
	"edit":    {"Edit", "Write"},
	"execute": {"Bash"},
	"web":     {"WebFetch", "WebSearch"},
	"agent":   {"Agent"},
	"todo":    {"TodoWrite"},
}

// inherit is the model value that means "the host's default model".
const inherit = "inherit"

// claudeAliases are Claude Code's model aliases; Codex rejects them.
var claudeAliases = []string{"opus", "sonnet", "haiku", "fable"}
