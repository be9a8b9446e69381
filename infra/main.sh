#!/usr/bin/env bash
# The main job, from a fresh clone: install what is needed, bring up the brokers,
# start every service, show them healthy, run the job, and stop cleanly (Ctrl-C too).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || ! cmp -s package-lock.json node_modules/.vantage-lock-stamp; then
  echo "[main] installing npm packages"
  npm ci --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.vantage-lock-stamp
fi
exec node --import tsx infra/src/main.ts "$@"
