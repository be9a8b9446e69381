#!/usr/bin/env bash
# Ensure a Python virtualenv with fastavro exists at <repo>/.infra/py.
#
# fastavro is the independent Avro implementation our tests decode against, so
# a bug shared by our encoder and avsc cannot hide. Idempotent: when the venv
# already imports fastavro this exits in well under a second without touching
# the network. Prints the interpreter path on success (the test reads it).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
venv="${VANTAGE_PY_VENV:-$repo_root/.infra/py}"
py="$venv/bin/python"

if [[ -x "$py" ]] && "$py" -c 'import fastavro' >/dev/null 2>&1; then
  echo "$py"
  exit 0
fi

# Serialise concurrent first-time installs (parallel test workers, CI jobs).
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

if [[ ! -x "$py" ]]; then
  python3 -m venv "$venv" >&2
fi
if ! "$py" -c 'import fastavro' >/dev/null 2>&1; then
  "$venv/bin/pip" install --quiet fastavro >&2
fi
"$py" -c 'import fastavro' >&2
echo "$py"
