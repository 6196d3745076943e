# Sourced by the scripts: puts the project's Node.js (when installed by setup) and Envoy first on PATH.
_sluice_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -x "$_sluice_root/.cache/node/bin/node" ]; then
  export PATH="$_sluice_root/.cache/node/bin:$PATH"
fi
if [ -z "${ENVOY_BIN:-}" ] && ! command -v envoy >/dev/null 2>&1 && [ -x "$_sluice_root/.cache/envoy-venv/bin/envoy" ]; then
  export ENVOY_BIN="$_sluice_root/.cache/envoy-venv/bin/envoy"
fi
sluice_envoy_version() {
  "${ENVOY_BIN:-envoy}" --version 2>/dev/null | sed -n 's/.*version: [0-9a-f]*\/\([0-9.]*\)\/.*/\1/p'
}
