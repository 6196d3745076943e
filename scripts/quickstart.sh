#!/usr/bin/env bash
# `npm run quickstart`: sets everything up, builds, and runs the quickstart gateway on 127.0.0.1:8080.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
export PATH="$root/node_modules/.bin:$PATH"
tsc -p tsconfig.json
exec node bin/sluice.js run -f examples/quickstart "$@"
