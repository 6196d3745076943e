#!/usr/bin/env bash
# `npm run quickstart`: sets everything up, builds, starts the demo upstream (127.0.0.1:8081) and runs the
# quickstart gateway with `sluice run -f examples/quickstart`: Envoy on 127.0.0.1:8080, configured over ADS.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh --no-kube
source scripts/env.sh
export PATH="$root/node_modules/.bin:$PATH"
tsc -p tsconfig.json
node examples/quickstart/upstream.mjs &
upstream=$!
trap 'kill $upstream 2>/dev/null || true' EXIT
echo "quickstart: try  curl -i http://127.0.0.1:8080/  (Ctrl-C stops)"
node --min-semi-space-size=16 --max-semi-space-size=16 bin/sluice.js run -f examples/quickstart "$@"
