#!/usr/bin/env bash
# Runtime parity: deploys run nodejs24 on Cloud Run functions while these machines have Node 20. This runs
# a fast subset of the test suite under Node 24 from the npm registry's `node` package (it ships the
# binary), installed once into node_modules/.cache/node24:
#   - test/unit                                        (everything pure)
#   - test/integration/recovery/deathNotice.test.ts  (real DBOS executors forked under Node 24)
#   - test/integration/stack/start.test.ts             (npm start: functions-framework under Node 24)
# The whole suite already runs under Node 20 in `npm test`; the subset keeps CI (2 cores) well under its
# budget. Override with NODE24_VERSION or pass test paths as arguments.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${NODE24_VERSION:-24.21.0}"
cache="node_modules/.cache/node24"
node24="$cache/node_modules/node/bin/node"

if [ ! -x "$node24" ] || [ "$("$node24" -p process.versions.node 2>/dev/null)" != "$version" ]; then
  echo "node24: installing node@$version from the npm registry into $cache"
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-package-lock --no-audit --no-fund "node@$version" >/dev/null
fi
actual="$("$node24" -p process.version)"
case "$actual" in
  v24.*) echo "node24: running tests under $actual ($node24)" ;;
  *) echo "node24: expected Node 24, got $actual" >&2; exit 1 ;;
esac

if [ "$#" -eq 0 ]; then
  set -- test/unit test/integration/recovery/deathNotice.test.ts test/integration/stack/start.test.ts
fi
[ -f dist/cli/index.js ] || npm run build
# EXPECT_NODE_MAJOR makes test/unit/runtime.test.ts fail unless the tests really run on Node 24.
EXPECT_NODE_MAJOR=24 "$node24" node_modules/vitest/vitest.mjs run "$@"
