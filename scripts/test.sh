#!/usr/bin/env bash
# `npm test`: sets everything up, builds, lints, and runs the whole suite (unit, golden, protocol, end-to-end).
# Extra arguments are test files (dist/test/...js) to run instead of all of them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
export PATH="$root/node_modules/.bin:$PATH"
# The LLM ext_proc's own wire reader/writer is checked against protobuf-es on every message the suite exchanges.
export SLUICE_EXTPROC_WIRE_CHECK=1
tsc -p tsconfig.json
biome ci --error-on-warnings --colors=off .
if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <(find dist/test -name '*.test.js' | sort); fi
# E2E files each start their own Envoy on ports picked at run time, so files run in parallel.
exec node --test --test-concurrency="${SLUICE_TEST_CONCURRENCY:-4}" --test-timeout=300000 "${files[@]}"
