#!/usr/bin/env bash
# DBOS compatibility: afterlife writes DBOS's tables directly, so the recovery, reaper and repair suites
# also run against the oldest DBOS 5.x it supports (default 5.2.11; the lockfile pins 5.3.0, which
# `npm test` covers). The older SDK is installed once from the npm registry into
# node_modules/.cache/dbos-<version>, and node_modules/@dbos-inc/dbos-sdk points at it for the run (the
# test process, the template database's DBOS migrations and the DBOS executors it forks all resolve it
# there), then is put back, also on failure or interrupt. Override with DBOS_COMPAT_VERSION or pass test
# paths as arguments.
set -euo pipefail
cd "$(dirname "$0")/.."

version="${DBOS_COMPAT_VERSION:-5.2.11}"
cache="node_modules/.cache/dbos-$version"
sdk="node_modules/@dbos-inc/dbos-sdk"
aside="node_modules/.cache/dbos-sdk-pinned"
older="$cache/node_modules/@dbos-inc/dbos-sdk"

if [ ! -f "$older/package.json" ] || [ "$(node -p "require('./$older/package.json').version")" != "$version" ]; then
  echo "dbos-compat: installing @dbos-inc/dbos-sdk@$version from the npm registry into $cache"
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-save --no-package-lock --no-audit --no-fund "@dbos-inc/dbos-sdk@$version" >/dev/null
fi

restore() {
  if [ -L "$sdk" ] && [ -d "$aside" ]; then rm "$sdk" && mv "$aside" "$sdk"; fi
}
trap restore EXIT INT TERM
if [ ! -L "$sdk" ]; then
  rm -rf "$aside"
  mv "$sdk" "$aside"
  ln -s "$(pwd)/$older" "$sdk"
fi
actual="$(node -p "require('./$sdk/package.json').version")"
[ "$actual" = "$version" ] || { echo "dbos-compat: expected @dbos-inc/dbos-sdk $version, resolved $actual" >&2; exit 1; }
echo "dbos-compat: running against @dbos-inc/dbos-sdk $actual"

if [ "$#" -eq 0 ]; then
  set -- \
    test/compat/dbosVersion.test.ts \
    test/integration/recovery/deathNotice.test.ts \
    test/integration/recovery/claimNow.test.ts \
    test/integration/reaper/sigkill.test.ts \
    test/integration/reaper/stuckRepair.test.ts \
    test/integration/reaper/orphanedRewind.test.ts \
    test/integration/fork/rewind.test.ts \
    test/integration/fork/dataSource.test.ts \
    test/integration/fork/unrecordedTransaction.test.ts \
    test/integration/fork/divergence.test.ts \
    test/integration/retention/retention.test.ts
fi
[ -f dist/cli/index.js ] || npm run build
# test/globalSetup.ts builds a fresh template database per run, migrated by this SDK itself.
EXPECT_DBOS_VERSION="$version" node_modules/.bin/vitest run "$@"
