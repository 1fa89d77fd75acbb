#!/usr/bin/env bash
# Runtime parity: deploys run nodejs22 on Cloud Run functions while these machines have Node 20. This runs
# a fast subset of the test suite under Node 22 from the npm registry's `node` package (it ships the
# binary), installed once into node_modules/.cache/node22:
#   - test/unit                                        (everything pure)
#   - test/integration/executorDeath/recovery.test.ts  (real DBOS executors forked under Node 22)
#   - test/integration/stack/start.test.ts             (npm start: functions-framework under Node 22)
# The whole suite already runs under Node 20 in `npm test`; the subset keeps CI (2 cores) well under its
# budget. Override with NODE22_VERSION or pass test paths as arguments.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${NODE22_VERSION:-22.23.3}"
cache="node_modules/.cache/node22"
node22="$cache/node_modules/node/bin/node"

if [ ! -x "$node22" ] || [ "$("$node22" -p process.versions.node 2>/dev/null)" != "$version" ]; then
  echo "node22: installing node@$version from the npm registry into $cache"
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-package-lock --no-audit --no-fund "node@$version" >/dev/null
fi
actual="$("$node22" -p process.version)"
case "$actual" in
  v22.*) echo "node22: running tests under $actual ($node22)" ;;
  *) echo "node22: expected Node 22, got $actual" >&2; exit 1 ;;
esac

if [ "$#" -eq 0 ]; then
  set -- test/unit test/integration/executorDeath/recovery.test.ts test/integration/stack/start.test.ts
fi
[ -f dist/cli/index.js ] || npm run build
# EXPECT_NODE_MAJOR makes test/unit/runtime.test.ts fail unless the tests really run on Node 22.
EXPECT_NODE_MAJOR=22 "$node22" node_modules/vitest/vitest.mjs run "$@"
