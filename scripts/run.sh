#!/usr/bin/env bash
# Runs a command from node_modules/.bin with the project's Node.js and Envoy on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$root/scripts/env.sh"
export PATH="$root/node_modules/.bin:$PATH"
exec "$@"
