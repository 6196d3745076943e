#!/usr/bin/env bash
# Regenerates src/gen/ from the pinned go-control-plane release: descriptors (Go) -> TypeScript (buf + protoc-gen-es).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/env.sh
(cd tools/envoy-descriptors && go run .) > proto/envoy.binpb
npx buf generate
echo "gen: $(find src/gen -name '*.ts' | wc -l) files in src/gen"
