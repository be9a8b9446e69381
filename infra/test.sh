#!/usr/bin/env bash
# The whole test suite, from a fresh clone on a fresh machine: installs what it
# needs (npm packages, nats-server, Kafka jars, etcd, Python fastavro — all cached under
# ignored folders), then typecheck, lint, unit tests and integration tests against
# real brokers that the test setup starts on free ports and stops afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { printf '\n== %s (%ss)\n' "$1" "$(( $(date +%s) - start ))"; }

step "npm packages"
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.vantage-lock-stamp; then
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.vantage-lock-stamp
fi

step "brokers (nats-server, Kafka jars, etcd)"
npx tsx infra/src/cli.ts install

for s in packages/*/scripts/ensure-*.sh; do
  [ -f "$s" ] || continue
  step "$s"
  bash "$s"
done

step "typecheck"
npx tsc -p tsconfig.json

step "lint"
npx eslint .

step "unused exports, files and dependencies (knip)"
npx knip --no-progress

step "tests (unit, then integration against real brokers)"
mkdir -p .infra
set +e
npx vitest run --reporter=default --reporter=json --outputFile.json=.infra/test-results.json "$@"
rc=$?
set -e
node -e '
  const r = JSON.parse(require("fs").readFileSync(".infra/test-results.json", "utf8"));
  const skipped = r.numPendingTests + r.numTodoTests;
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`);
' || true
step "done"
exit $rc
