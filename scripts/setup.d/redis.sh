#!/usr/bin/env bash
# redis-server (Debian package) for test/e2e/ratelimit-redis.test.ts, the store envoyproxy/ratelimit counts in. The
# tests start their own server on a port picked at run time, without persistence. Idempotent: installs only when
# redis-server is not on PATH.
set -euo pipefail
command -v redis-server >/dev/null 2>&1 && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends redis-server >/dev/null
# The package starts a system service where there is an init system; the tests need only the binary.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet redis-server 2>/dev/null; then
  systemctl stop redis-server || true
fi
echo "setup: redis-server $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p') installed"
