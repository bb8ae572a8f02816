#!/usr/bin/env bash
# Web dashboard checks, for CI and by hand: install (npm ci), that the generated API types are
# current with the API description the C++ build writes (build/openapi.json, CMake target
# openapi_json; SF_OPENAPI_JSON points elsewhere), unit/component tests (Vitest), build, and the
# browser test that needs no cluster (Debian's Chromium). With SF_MASTER_URL set, also the
# end-to-end test against that running cluster. Screenshots go under $SF_ARTIFACTS_DIR
# (default build-webui-artifacts/ at the repository root).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root/webui"
export SF_ARTIFACTS_DIR="${SF_ARTIFACTS_DIR:-$root/build-webui-artifacts}"
if ! command -v npm >/dev/null; then echo "npm not found: install Node.js 20 and npm" >&2; exit 2; fi
if [ ! -x "${SF_CHROMIUM:-/usr/bin/chromium}" ]; then echo "Chromium not found at ${SF_CHROMIUM:-/usr/bin/chromium} (apt-get install chromium)" >&2; exit 2; fi
npm ci --no-audit --no-fund
openapi="${SF_OPENAPI_JSON:-$root/build/openapi.json}"
if [ ! -f "$openapi" ]; then
  echo "No API description at $openapi: build it first (cmake --build build --target openapi_json)," >&2
  echo "or set SF_OPENAPI_JSON to an OpenAPI document (a copy of a master's GET /api/v1/openapi.json)." >&2
  exit 2
fi
SF_OPENAPI_JSON="$openapi" npm run check:api
npm test
npm run build
SF_ARTIFACTS_DIR="$SF_ARTIFACTS_DIR/offline" node e2e/offline.e2e.mjs
if [ -n "${SF_MASTER_URL:-}" ]; then
  SF_ARTIFACTS_DIR="$SF_ARTIFACTS_DIR/e2e" node e2e/dashboard.e2e.mjs
fi
