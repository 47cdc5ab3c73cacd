#!/usr/bin/env bash
# Installs the host CLIs pinned in tools/hostversions/host-versions.yaml
# (Claude Code, Codex CLI, Copilot CLI) from npm into a directory, for the
# host integration suite (internal/hostcli). Only each CLI's native binary
# for this platform is installed, without running any package script: the
# binaries need no Node.js. Prints the directory; pass it to the suite as
# CORTEXBUILD_HOSTCLIS.
#
#   scripts/install-host-clis.sh [DIR]     # default: .cache/hostclis
set -euo pipefail
cd "$(dirname "$0")/.."
pins=tools/hostversions/host-versions.yaml
dir=${1:-${CORTEXBUILD_HOSTCLIS:-$PWD/.cache/hostclis}}

pin() { # name -> the pinned version
  awk -v n="$1" '$1 == "-" && $2 == "name:" { cur = $3 } cur == n && $1 == "version:" { print $2; exit }' "$pins"
}
claude=$(pin claude) codex=$(pin codex) copilot=$(pin copilot)
for v in "$claude" "$codex" "$copilot"; do
  [ -n "$v" ] || { echo "ERROR: a host CLI has no version in $pins" >&2; exit 1; }
done

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) plat=linux-x64 triple=x86_64-unknown-linux-musl ;;
  Linux-aarch64) plat=linux-arm64 triple=aarch64-unknown-linux-musl ;;
  Darwin-arm64) plat=darwin-arm64 triple=aarch64-apple-darwin ;;
  Darwin-x86_64) plat=darwin-x64 triple=x86_64-apple-darwin ;;
  *) echo "ERROR: no host CLI binaries for $(uname -s) $(uname -m)" >&2; exit 1 ;;
esac

bin_claude="$dir/node_modules/@anthropic-ai/claude-code-$plat/claude"
bin_codex="$dir/node_modules/@openai/codex-$plat/vendor/$triple/bin/codex"
bin_copilot="$dir/node_modules/@github/copilot-$plat/copilot"

installed() { # binary version
  [ -x "$1" ] && "$1" --version 2>/dev/null | grep -qF "$2"
}
if installed "$bin_claude" "$claude" && installed "$bin_codex" "$codex" && installed "$bin_copilot" "$copilot"; then
  echo "$dir"; exit 0
fi

command -v npm >/dev/null || { echo "ERROR: npm is needed to install the host CLIs (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
echo "installing Claude Code $claude, Codex CLI $codex, Copilot CLI $copilot ($plat) into $dir" >&2
npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund --no-save --loglevel=error \
  "@anthropic-ai/claude-code-$plat@$claude" \
  "@openai/codex-$plat@npm:@openai/codex@$codex-$plat" \
  "@github/copilot-$plat@$copilot" >&2
for b in "$bin_claude:$claude" "$bin_codex:$codex" "$bin_copilot:$copilot"; do
  installed "${b%:*}" "${b##*:}" || { echo "ERROR: ${b%:*} is not version ${b##*:} after installing" >&2; exit 1; }
done
echo "$dir"
