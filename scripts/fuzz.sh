#!/usr/bin/env bash
# A longer run of the fuzz properties of the suite (test/unit/fuzz-*.test.ts): each property runs for --seconds (and
# up to --runs cases) instead of the suite's 1.5 s, and prints how many cases it ran. Build first (npm run build).
#
#   bash scripts/fuzz.sh [--seconds 60] [--runs 1000000] [--seed N] [--only hpack,http,cel,yaml,llm-stream]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=60 runs=1000000 seed="" only="hpack,http,cel,yaml,llm-stream"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    *) echo "usage: $0 [--seconds N] [--runs N] [--seed N] [--only hpack,http,cel,yaml,llm-stream]" >&2; exit 2 ;;
  esac
done
source scripts/env.sh >/dev/null
files=()
for name in ${only//,/ }; do files+=("dist/test/unit/fuzz-$name.test.js"); done
export FUZZ_SECONDS="$seconds" FUZZ_RUNS="$runs" FUZZ_REPORT=1
[ -n "$seed" ] && export FUZZ_SEED="$seed"
# One file at a time: the machine is shared, and each property's figure is then its own.
status=0
for f in "${files[@]}"; do
  node --test --test-concurrency=1 --test-timeout=0 "$f" 2>&1 | sed -n 's/^# \(fuzz: .*\)/\1/p; s/^\(not ok .*\)/\1/p; /Counterexample\|seed:\|error:/p' || status=1
done
exit $status
