#!/usr/bin/env bash
# Installs the official Node.js SDKs the gateway's Node tests run (the
# Anthropic TypeScript SDK, whose toolRunner exists only there) from npm
# into a directory, at pinned versions, without running any package
# script. Prints the directory; pass it to the tests as
# CORTEXBUILD_NODESDKS.
#
#   scripts/install-node-sdks.sh [DIR]     # default: .cache/nodesdks
set -euo pipefail
cd "$(dirname "$0")/.."
anthropic_sdk=1.16.0 # @anthropic-ai/sdk: toolRunner threads by default since 1.2.0
dir=${1:-${CORTEXBUILD_NODESDKS:-$PWD/.cache/nodesdks}}

installed() { # package version
  [ -f "$dir/node_modules/$1/package.json" ] &&
    node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' "$dir/node_modules/$1/package.json" "$2"
}
command -v node >/dev/null || { echo "ERROR: node is needed to run the Node SDKs (apt-get install nodejs)" >&2; exit 1; }
if installed @anthropic-ai/sdk "$anthropic_sdk"; then
  echo "$dir"; exit 0
fi

command -v npm >/dev/null || { echo "ERROR: npm is needed to install the Node SDKs (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
echo "installing @anthropic-ai/sdk $anthropic_sdk into $dir" >&2
npm install --prefix "$dir" --ignore-scripts --no-audit --no-fund --no-save --loglevel=error \
  "@anthropic-ai/sdk@$anthropic_sdk" >&2
installed @anthropic-ai/sdk "$anthropic_sdk" || { echo "ERROR: @anthropic-ai/sdk is not version $anthropic_sdk after installing" >&2; exit 1; }
echo "$dir"
