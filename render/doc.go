// Package render writes CortexBuild's rules and agent personas into the AI
// coding tools (hosts) that run them on their own vendors' models: Claude
// Code, Codex CLI, GitHub Copilot and Cursor. This is the spec's rendered
// mode; it needs no API key and no provider configuration.
//
// Sources are the ten built-in personas of the spec and the built-in rule
// rule-critic-gate, overridden or extended by the project's
// .cortexbuild/agents/<id>.md and .cortexbuild/rules/<id>.md (YAML
// frontmatter, then Markdown). Each persona names a model per host: Claude
// aliases for Claude Code, OpenAI ids for Codex, Copilot model names, Cursor
// ids.
//
// Each host gets the files it really loads, in the format it parses:
//
//	LoadSources ──> Sources ──> Render(targets) ──> []File
//	                                                  │
//	   disk + .cortexbuild/render-manifest.json ──> NewPlan ──> Plan ──> Apply
//
//	AGENTS.md                          always-on rules, persona roster (Codex, Copilot, Cursor)
//	CLAUDE.md                          "@AGENTS.md": Claude Code gets the rules once
//	.claude/agents/<name>.md           Claude Code subagents (YAML frontmatter)
//	.claude/rules/<id>.md              path-scoped rules, with paths
//	.codex/agents/<name>.toml          Codex agents (no tools list: Codex drops the agent)
//	.github/copilot-instructions.md    a pointer to AGENTS.md, not a copy
//	.github/agents/<name>.agent.md     Copilot custom agents
//	.github/instructions/<id>.instructions.md   path-scoped rules, with applyTo
//	.cursor/rules/<id>.mdc             path-scoped rules, with globs
//	.cursor/agents/<name>.md           Cursor subagents (line-based, single-line values)
//
// rule-critic-gate lives in AGENTS.md (and, for Copilot subagents, in the
// Copilot personas) only, so each host's session loads it once;
// the one exception the hosts force is GitHub Copilot, which also loads
// CLAUDE.md and expands its import, so it sees AGENTS.md twice when Claude
// Code is rendered too. Render refuses a configuration where a host's
// critic model is unset, inherit, or the planner's, and every critic body
// ends with the instruction to print "independent_reviewer: <id>".
//
// Every persona's prompt starts with agentmark.Line(<id>), the line that
// names its CortexBuild agent to the gateway (the host's model name cannot);
// no other rendered file carries one. A Copilot persona also gets the
// always-on rules after its text: Copilot gives a subagent its persona
// only, not AGENTS.md.
//
// A persona whose id is a built-in agent of any host (explore) is rendered
// as cortex-<id> everywhere, so it neither shadows nor is shadowed by the
// host's own agent and has one name in every host.
//
// Output is byte-identical from run to run. The manifest records what
// render wrote, with SHA-256 hashes: a file render did not write, or one
// edited by hand since, is never overwritten or deleted without Force, and
// Clean removes only render's own files.
package render
