#!/usr/bin/env bash
# Web dashboard checks, for CI and by hand: install (npm ci), unit/component tests (Vitest), build,
# and the browser test that needs no cluster (Debian's Chromium). With SF_MASTER_URL set, also the
# end-to-end test against that running cluster. Screenshots go under $SF_ARTIFACTS_DIR
# (default build-webui-artifacts/ at the repository root).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root/webui"
export SF_ARTIFACTS_DIR="${SF_ARTIFACTS_DIR:-$root/build-webui-artifacts}"
if ! command -v npm >/dev/null; then echo "npm not found: install Node.js 20 and npm" >&2; exit 2; fi
if [ ! -x "${SF_CHROMIUM:-/usr/bin/chromium}" ]; then echo "Chromium not found at ${SF_CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)" >&2; exit 2; fi
npm ci --no-audit --no-fund
npm test
npm run build
SF_ARTIFACTS_DIR="$SF_ARTIFACTS_DIR/offline" node e2e/offline.e2e.mjs
if [ -n "${SF_MASTER_URL:-}" ]; then
  SF_ARTIFACTS_DIR="$SF_ARTIFACTS_DIR/e2e" node e2e/dashboard.e2e.mjs
fi
