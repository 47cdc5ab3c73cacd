#!/usr/bin/env python3
"""Write one equivalent input for cortexbuild render, ruler and rulesync.

Input: the ten built-in personas (texts and per-host models from
render/defaults/agents), rule-critic-gate, one more always-on rule
(commit-messages) and one path-scoped rule (go-style, **/*.go).
"""
import json, os, sys

import yaml

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "defaults")
out = sys.argv[1]

def fm(path):
    s = open(path).read()
    _, front, body = s.split("---\n", 2)
    return yaml.safe_load(front), body.strip() + "\n"

personas = []
for f in sorted(os.listdir(SRC + "/agents")):
    meta, body = fm(f"{SRC}/agents/{f}")
    personas.append((f[:-3], meta, body))
gate_meta, gate_body = fm(SRC + "/rules/rule-critic-gate.md")
closing = """
## Closing line (required)

You are the independent reviewer rule-critic-gate asks for. If you run on the model that wrote
the plan, say so and do not approve. End your output with this line, alone, naming the model or
agent id you run on:

independent_reviewer: <model-or-agent-id>
"""
commit = "Write commit messages as a short imperative subject (at most 72 characters), a blank line, then\nwhat changed and why.\n"
gostyle = "- Wrap errors with `%w` at the end of the message; callers use `errors.Is` and `errors.As`.\n- Tests are table-driven with `t.Run`, and never sleep: inject time.\n"

claude_tools = {"read": ["Read"], "search": ["Grep", "Glob"], "edit": ["Edit", "Write"], "execute": ["Bash"],
                "web": ["WebFetch", "WebSearch"], "agent": ["Agent"], "todo": ["TodoWrite"]}

def w(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    open(path, "w").write(text)

def readonly(meta):
    t = meta.get("tools")
    return t != ["all"] and not ({"edit", "execute"} & set(t))

# --- cortexbuild: the built-ins are the personas and the gate; add the two rules.
d = f"{out}/cortexbuild"
w(f"{d}/.cortexbuild/rules/commit-messages.md", "---\ndescription: Commit messages say what changed and why.\n---\n" + commit)
w(f"{d}/.cortexbuild/rules/go-style.md", "---\ndescription: Go error and test conventions.\npaths: [\"**/*.go\"]\n---\n" + gostyle)

# --- ruler: .ruler/*.md are concatenated; one frontmatter per subagent, one model string.
d = f"{out}/ruler"
w(f"{d}/.ruler/AGENTS.md", "# Project rules\n\n## commit-messages\n\n" + commit)
w(f"{d}/.ruler/rule-critic-gate.md", "## rule-critic-gate\n\n" + gate_body)
w(f"{d}/.ruler/go-style.md", "## go-style (Go files only)\n\n" + gostyle)
w(f"{d}/.ruler/ruler.toml", 'default_agents = ["claude", "codex", "copilot", "cursor"]\n\n[agents]\nenabled = true\n')
for pid, meta, body in personas:
    fmd = {"name": pid, "description": meta["description"]}
    if meta["tools"] != ["all"]:
        fmd["tools"] = [t for x in meta["tools"] for t in claude_tools[x]]
    fmd["model"] = meta["models"]["claude"]  # ruler has one model field for all hosts
    if readonly(meta):
        fmd["readonly"] = True
    b = body + (closing if pid == "critic" else "")
    w(f"{d}/.ruler/agents/{pid}.md", "---\n" + yaml.safe_dump(fmd, sort_keys=False, width=1000) + "---\n\n" + b)

# --- rulesync: one root rule; the gate as a non-root always-on rule; per-tool sections.
d = f"{out}/rulesync"
w(f"{d}/rulesync.jsonc", json.dumps({"targets": ["claudecode", "codexcli", "copilot", "cursor"],
                                      "features": ["rules", "subagents"]}, indent=2) + "\n")
w(f"{d}/.rulesync/rules/overview.md", "---\nroot: true\ntargets: [\"*\"]\ndescription: Project rules\nglobs: [\"**/*\"]\n---\n\n# Project rules\n\n## commit-messages\n\n" + commit)
w(f"{d}/.rulesync/rules/rule-critic-gate.md", "---\nroot: false\ntargets: [\"*\"]\ndescription: \"" + gate_meta["description"] + "\"\nglobs: [\"**/*\"]\ncursor:\n  alwaysApply: true\n  globs: []\n---\n\n## rule-critic-gate\n\n" + gate_body)
w(f"{d}/.rulesync/rules/go-style.md", "---\nroot: false\ntargets: [\"*\"]\ndescription: Go error and test conventions.\nglobs: [\"**/*.go\"]\n---\n\n" + gostyle)
for pid, meta, body in personas:
    m = meta["models"]
    fmd = {"name": pid, "targets": ["*"], "description": meta["description"],
           "claudecode": {"model": m["claude"]}, "codexcli": {"model": m["codex"]},
           "copilot": {"model": m["copilot"]}, "cursor": {"model": m["cursor"]}}
    if meta["tools"] != ["all"]:
        fmd["claudecode"]["tools"] = [t for x in meta["tools"] for t in claude_tools[x]]
        fmd["copilot"]["tools"] = meta["tools"]
    if readonly(meta):
        fmd["codexcli"]["sandbox_mode"] = "read-only"
        fmd["cursor"]["readonly"] = True
    b = body + (closing if pid == "critic" else "")
    w(f"{d}/.rulesync/subagents/{pid}.md", "---\n" + yaml.safe_dump(fmd, sort_keys=False, width=1000) + "---\n\n" + b)
print("inputs in", out)
