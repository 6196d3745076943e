#!/usr/bin/env bash
# h2spec (HTTP/2 conformance checker) for test/e2e/h2spec.test.ts: built from its Go module into
# .cache/h2spec-<version>/h2spec. Idempotent: does nothing when that binary exists. v2.2.1 is the newest version the
# module proxy serves (it answers "not available" for v2.6.0); it has no go.mod of
# its own, so its few dependencies resolve to their latest versions at build time.
set -euo pipefail
H2SPEC_VERSION="${H2SPEC_VERSION:-v2.2.1+incompatible}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$root/.cache/h2spec-${H2SPEC_VERSION%%+*}"
[ -x "$dir/h2spec" ] && exit 0
go="$(command -v go || echo /usr/local/go/bin/go)"
[ -x "$go" ] || { echo "setup: h2spec needs Go (not found)" >&2; exit 1; }
mkdir -p "$dir"
GOBIN="$dir" GOFLAGS=-mod=mod "$go" install "github.com/summerwind/h2spec/cmd/h2spec@$H2SPEC_VERSION"
echo "setup: h2spec $H2SPEC_VERSION in $dir"
