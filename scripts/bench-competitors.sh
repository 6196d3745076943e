#!/usr/bin/env bash
# Installs the gateways bench/llm compares Sluice with, into .cache/bench (not needed for tests):
#   Portkey gateway (npm @portkey-ai/gateway) and the LiteLLM proxy (PyPI litellm[proxy]).
# Then: PORTKEY_DIR=.cache/bench/portkey LITELLM_BIN=.cache/bench/litellm-venv/bin/litellm node dist/bench/llm.js
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/env.sh
PORTKEY_VERSION=1.15.2
LITELLM_VERSION=1.106.2
mkdir -p .cache/bench/portkey
[ -f .cache/bench/portkey/package.json ] || echo "{}" > .cache/bench/portkey/package.json
(cd .cache/bench/portkey && npm install --no-audit --no-fund "@portkey-ai/gateway@${PORTKEY_VERSION}")
if [ ! -x .cache/bench/litellm-venv/bin/litellm ]; then
  python3 -m venv .cache/bench/litellm-venv
  .cache/bench/litellm-venv/bin/pip install --quiet "litellm[proxy]==${LITELLM_VERSION}"
fi
echo "bench competitors: Portkey ${PORTKEY_VERSION} in .cache/bench/portkey, LiteLLM ${LITELLM_VERSION} in .cache/bench/litellm-venv"
