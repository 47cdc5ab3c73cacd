#!/usr/bin/env bash
# Renders one input with cortexbuild render, ruler and rulesync, times them in
# one interleaved run and checks each output against the hosts' loading rules.
# Needs Go, Node 20 with npm, Python 3.11 with PyYAML, git. Writes only under
# $WORK (default: a new temporary directory); the repository is not touched.
#
#   bash render/testdata/compare/run.sh [RUNS]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
export WORK="${WORK:-$(mktemp -d)}"
runs="${1:-20}"
mkdir -p "$WORK" && cd "$WORK"
[ -f package.json ] || npm init -y >/dev/null
npm install --no-audit --no-fund --silent @intellectronica/ruler@0.3.44 rulesync@17.0.0 >/dev/null
(cd "$repo" && go build -o "$WORK/cortexbuild" ./cmd/cortexbuild)
rm -rf inputs && python3 "$here/mkinputs.py" inputs >/dev/null
echo "== timings ($runs runs each)"
python3 "$here/bench.py" "$runs"
echo "== what each host loads"
python3 "$here/analyze.py"
