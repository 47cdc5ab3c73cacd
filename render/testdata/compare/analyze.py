#!/usr/bin/env python3
"""Render the same input with cortexbuild, ruler and rulesync, then apply the
hosts' recorded loading rules to each output and report the differences."""
import glob, json, os, re, shutil, subprocess, sys, tempfile
import tomllib

import yaml

W = os.environ["WORK"]  # holds inputs/, cortexbuild and node_modules/ (see run.sh)
CB = os.path.join(W, "cortexbuild")
BIN = os.path.join(W, "node_modules", ".bin")
RUNS = {
    "cortexbuild": [[CB, "render"]],
    "ruler": [[os.path.join(BIN, "ruler"), "apply"]],
    "rulesync": [[os.path.join(BIN, "rulesync"), "generate"]],
}
GATE = "Before a task whose risk is medium or high is treated as done"
GOSTYLE = "Wrap errors with `%w` at the end of the message"
CLAUDE_ALIASES = {"opus", "sonnet", "haiku", "fable"}

# intended per-host models, from the built-in personas
MODELS = {}
for f in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "defaults", "agents", "*.md")):
    meta = yaml.safe_load(open(f).read().split("---\n")[1])
    MODELS[os.path.basename(f)[:-3]] = meta["models"]

def read(d, p):
    try:
        return open(os.path.join(d, p)).read()
    except (FileNotFoundError, IsADirectoryError):
        return None

def front(text):
    if not text or not text.startswith("---\n"):
        return None, text or ""
    i = text.find("\n---\n", 4)
    return text[4:i + 1], text[i + 5:]

def yfront(text):
    f, body = front(text)
    if f is None:
        return None, body
    try:
        return yaml.safe_load(f) or {}, body
    except yaml.YAMLError as e:
        return {"__error__": str(e).splitlines()[0]}, body

def cursor_line_front(text):  # Cursor SDK subagent parser: split at first colon, no quote stripping
    f, body = front(text)
    out = {}
    for ln in (f or "").split("\n"):
        s = ln.strip()
        if not s or s.startswith("#") or ":" not in s:
            continue
        k, v = s.split(":", 1)
        out[k.strip().lower()] = v.strip()
    return out, body

def expand(d, p, depth=0):
    t = read(d, p)
    if t is None or depth > 5:
        return ""
    out = []
    for ln in t.splitlines(True):
        s = ln.strip()
        if s.startswith("@") and " " not in s:
            out.append(expand(d, os.path.normpath(os.path.join(os.path.dirname(p), s[1:])), depth + 1))
        else:
            out.append(ln)
    return "".join(out)

def files(d, pattern):
    return sorted(glob.glob(os.path.join(d, pattern)))

def claude_start(d):
    s = expand(d, "CLAUDE.md") if read(d, "CLAUDE.md") is not None else (read(d, "AGENTS.md") or "")
    for f in files(d, ".claude/rules/*.md"):
        m, body = yfront(open(f).read())
        if not m or not m.get("paths"):
            s += body
    return re.sub(r"(?s)<!--.*?-->", "", s)

def codex_start(d):
    return (read(d, "AGENTS.override.md") or read(d, "AGENTS.md") or "")[:32768]

def copilot_start(d):
    s = (read(d, ".github/copilot-instructions.md") or "") + (read(d, "AGENTS.md") or "") + expand(d, "CLAUDE.md")
    for f in files(d, ".github/instructions/*.instructions.md"):
        m, body = yfront(open(f).read())
        if m and str(m.get("applyTo", "")).strip() in ("**", "**/*"):
            s += body
    for f in files(d, ".claude/rules/*.md"):
        m, body = yfront(open(f).read())
        paths = (m or {}).get("paths") or []
        if isinstance(paths, str):
            paths = [paths]
        if not paths or any(p in ("**", "**/*") for p in paths):  # paths -> applyTo
            s += body
    return s

def cursor_start(d, third_party):
    s = (read(d, "CLAUDE.md") or "") if third_party else ""
    s += read(d, "AGENTS.md") or ""
    for f in files(d, ".cursor/rules/*.mdc"):
        m, body = cursor_line_front(open(f).read())
        if m.get("alwaysapply", "").strip("\"'") == "true":
            s += body
    return s

def claude_scoped(d, path):  # does the go rule load lazily for a .go file?
    n = 0
    for f in files(d, ".claude/rules/*.md"):
        m, body = yfront(open(f).read())
        if m and m.get("paths") and GOSTYLE in body:
            n += 1
    return n

def agents(d, host):
    out = {}
    if host == "claude":
        for f in files(d, ".claude/agents/*.md"):
            m, b = yfront(open(f).read())
            if m and m.get("name") and m.get("description") and ":" not in m["name"]:
                out[m["name"]] = m
    elif host == "codex":
        for f in files(d, ".codex/agents/*.toml"):
            try:
                m = tomllib.loads(open(f).read())
            except tomllib.TOMLDecodeError:
                continue  # Codex: "Ignoring malformed agent role definition"
            if not {"name", "description", "developer_instructions"} <= m.keys() or "tools" in m:
                continue
            out[m["name"]] = m
    elif host == "copilot":
        for pat in (".github/agents/*.md", ".claude/agents/*.md"):
            for f in files(d, pat):
                m, b = yfront(open(f).read())
                aid = re.sub(r"(\.agent)?\.md$", "", os.path.basename(f))
                if m and m.get("description") and aid not in out:
                    out[aid] = m
    elif host == "cursor":
        for f in files(d, ".cursor/agents/*.md"):
            m, b = cursor_line_front(open(f).read())
            if b.strip():
                out[m.get("name") or os.path.basename(f)[:-3]] = m
    return out

def tree(d):
    out = {}
    for root, dirs, fs in os.walk(d):
        dirs[:] = [x for x in dirs if x not in (".git", ".ruler", ".rulesync", ".cortexbuild")]
        for f in fs:
            if f == "rulesync.jsonc":  # an input
                continue
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out

def main():
    root = tempfile.mkdtemp(prefix="rendercmp-analyze-")
    report = {}
    for tool, cmds in RUNS.items():
        d = os.path.join(root, tool)
        shutil.copytree(f"{W}/inputs/{tool}", d)
        subprocess.run(["git", "init", "-q", d], check=True)
        for c in cmds:
            subprocess.run(c, cwd=d, check=True, capture_output=True)
        first = tree(d)
        subprocess.run(cmds[-1], cwd=d, check=True, capture_output=True)
        second = tree(d)
        r = report[tool] = {}
        r["files"] = len(first)
        r["rerun identical"] = first == {k: v for k, v in second.items() if k in first}
        r["rerun new files"] = sorted(set(second) - set(first))
        r["gate at start"] = {
            "Claude Code": claude_start(d).count(GATE),
            "Codex CLI": codex_start(d).count(GATE),
            "Copilot CLI": copilot_start(d).count(GATE),
            "Cursor": cursor_start(d, False).count(GATE),
            "Cursor (3rd-party on)": cursor_start(d, True).count(GATE),
        }
        r["go rule always on in"] = [h for h, s in [("Claude Code", claude_start(d)), ("Codex CLI", codex_start(d)),
                                               ("Copilot CLI", copilot_start(d)), ("Cursor", cursor_start(d, False))] if GOSTYLE in s]
        r["CLAUDE.md imports AGENTS.md"] = "@AGENTS.md" in (read(d, "CLAUDE.md") or "")
        wrong = []
        for host, key in [("claude", "claude"), ("codex", "codex"), ("copilot", "copilot"), ("cursor", "cursor")]:
            ag = agents(d, host)
            if len(ag) != 10:
                wrong.append(f"{host}: {len(ag)} agents load")
            for name, m in ag.items():
                pid = name.replace("cortex-", "")
                want = MODELS.get(pid, {}).get(key)
                got = str(m.get("model", "")).strip('"')
                if got != want:
                    wrong.append(f"{host}/{name}: model {got!r}, want {want!r}")
                if host == "copilot" and m.get("disable-model-invocation"):
                    wrong.append(f"{host}/{name}: disable-model-invocation (hidden from delegation)")
            if host == "codex":
                for name, m in ag.items():
                    if str(m.get("model", "")) in CLAUDE_ALIASES:
                        wrong.append(f"codex/{name}: Claude alias {m['model']!r} as model")
            if "explore" in ag and host in ("copilot", "cursor", "claude"):
                wrong.append(f"{host}: persona named 'explore' clashes with the host's built-in Explore/explore")
        r["agent problems"] = wrong
        markers = {}
        for p, c in first.items():
            s = c.decode(errors="replace")
            markers[p] = bool(re.search(r"(?i)generated by", s[:400]))
        r["files without a generated marker"] = sorted(p for p, ok in markers.items() if not ok)
        # cursor agent frontmatter: block scalars or lists break Cursor's line parser
        bad = []
        for f in files(d, ".cursor/agents/*.md"):
            fr, _ = front(open(f).read())
            for ln in (fr or "").split("\n"):
                if re.match(r"^\s*-\s", ln) or re.search(r":\s*[>|][-+]?\s*$", ln) or (ln and ln[0] == " "):
                    bad.append(os.path.basename(f)); break
        r["cursor agents with multi-line values"] = bad
    print(json.dumps(report, indent=2))
    shutil.rmtree(root)

main()
