#!/usr/bin/env bash
# Headless Chromium for the web console's browser test (test/e2e/console-*.test.ts, driven by puppeteer-core).
# Debian's `chromium` package; installed once, skipped when a chromium binary is already on PATH.
set -euo pipefail

if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: chromium not found and apt-get unavailable; the console browser test needs Debian's chromium" >&2
  exit 1
fi
echo "setup: installing chromium (apt-get) for the console browser test"
export DEBIAN_FRONTEND=noninteractive
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
$sudo_cmd apt-get install -y -qq --no-install-recommends chromium >/dev/null
