#!/usr/bin/env bash
# envoyproxy/ratelimit (the reference Envoy rate limit service, RLS v3, Redis-backed) for
# test/e2e/ratelimit-redis.test.ts: built from its Go module into .cache/ratelimit-<version>/ratelimit. Idempotent:
# does nothing when that binary exists. The module has no release tags the proxy serves (its list is empty), so the
# version is the pseudo-version the proxy answers for @latest (commit 3fb702589d36 of 2026-01-22).
set -euo pipefail
RATELIMIT_VERSION="${RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/.cache/ratelimit-${RATELIMIT_VERSION##*-}"
[ -x "$dir/ratelimit" ] && exit 0
go="$(command -v go || echo /usr/local/go/bin/go)"
[ -x "$go" ] || { echo "setup: ratelimit needs Go (not found)" >&2; exit 1; }
mkdir -p "$dir"
GOBIN="$dir/bin" GOFLAGS=-mod=mod "$go" install "github.com/envoyproxy/ratelimit/src/service_cmd@$RATELIMIT_VERSION"
mv "$dir/bin/service_cmd" "$dir/ratelimit"
rmdir "$dir/bin"
echo "setup: envoyproxy/ratelimit $RATELIMIT_VERSION in $dir"
