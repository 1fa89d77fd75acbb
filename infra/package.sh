#!/usr/bin/env bash
# Builds the deployable package the module zips (var.source_dir): package.json, package-lock.json and
# the compiled dist/. Cloud Build installs the production dependencies from the lock file; the scripts
# are dropped so it does not try to run `build` (TypeScript is a dev dependency and dist/ is prebuilt).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build/function}"
cd "$root"
npm run build
rm -rf "$out"
mkdir -p "$out"
cp package.json package-lock.json "$out/"
cp -R dist "$out/dist"
rm -rf "$out/dist/test" "$out/dist/bench" "$out/dist/examples" "$out/dist/scripts"  # not deployed: tests, benchmarks, example app, local stack
(cd "$out" && npm pkg delete scripts >/dev/null)
echo "deployable package in $out ($(du -sh "$out" | cut -f1))"
