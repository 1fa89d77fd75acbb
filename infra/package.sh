#!/usr/bin/env bash
# Builds the deployable package the module zips (var.source_dir): package.json, package-lock.json and
# the compiled dist/. Cloud Build installs the production dependencies from the lock file; the scripts
# are dropped so it does not try to run `build` (TypeScript is a dev dependency and dist/ is prebuilt).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$root/build/function}"
cd "$root"
rm -rf "$out"
mkdir -p "$out"
# Only what is deployed is compiled (tsconfig.deploy.json: the functions, what they share, the kit's modules
# the plane imports, the CLI): no tests, benchmarks, example app or local stack reach the artefact.
npx tsc -p tsconfig.deploy.json --outDir "$out/dist"
cp -R shared/db/migrations "$out/dist/shared/db/migrations"
cp package.json package-lock.json "$out/"
(cd "$out" && npm pkg delete scripts >/dev/null)
echo "deployable package in $out ($(du -sh "$out" | cut -f1))"
