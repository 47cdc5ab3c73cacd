// Package agentmark is the line a rendered persona carries so that the
// gateway knows which CortexBuild agent a host's request belongs to.
//
// Host tools (Claude Code, Codex CLI, Copilot CLI) spawn a rendered persona
// as a sub-agent whose system prompt is the persona's body, but the model
// name they send is the host's own (a family alias, a vendor model, a
// display name), shared by several personas and often by the main session.
// The model name cannot carry the agent, so the persona's body does: render
// writes Line(agent) as its first line, and the gateway looks for it in the
// request's system and developer texts (never in user turns or tool output,
// which a file or a web page can fill).
//
// The line reads naturally to a model and is inert when the host talks to its
// vendor directly:
//
//	[cortexbuild agent: critic]
package agentmark

import (
	"fmt"
	"regexp"
	"strings"
)

const (
	prefix = "[cortexbuild agent: "
	suffix = "]"
)

// line matches a marker line; the name is the agent's, as config writes it
// (letters, digits, '_' and '-').
var line = regexp.MustCompile(`(?m)^[ \t]*\[cortexbuild agent: ([A-Za-z0-9_-]{1,64})\][ \t]*\r?$`)

// Line is the marker line for agent, without a newline.
func Line(agent string) string { return prefix + agent + suffix }

// Find returns the agent named by the marker lines in texts: "" when there
// is none. Texts naming two different agents are an error (one request is one
// agent's); the same agent named twice is fine.
func Find(texts ...string) (string, error) {
	agent := ""
	for _, t := range texts {
		if !strings.Contains(t, prefix) {
			continue
		}
		for _, m := range line.FindAllStringSubmatch(t, -1) {
			switch {
			case agent == "":
				agent = m[1]
			case agent != m[1]:
				return "", fmt.Errorf("the system prompt names two CortexBuild agents (%q and %q); a request is one agent's", agent, m[1])
			}
		}
	}
	return agent, nil
}
