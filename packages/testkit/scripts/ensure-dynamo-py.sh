#!/usr/bin/env bash
# Ensure a Python virtualenv with NVIDIA Dynamo 1.6.1 (PyPI `ai-dynamo-runtime`,
# `ai-dynamo` without its heavy dependencies) exists at <repo>/.infra/dynamo-py.
#
# Dynamo's own processes (its mocker, its KvRouter, its replay, its selection
# service) are the peers the integration tests check us against. No torch, no
# model weights: the mocker runs on token ids alone. Idempotent: when the venv
# already imports dynamo at the pinned version this exits in well under a second
# without touching the network. Prints the interpreter path on success.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
venv="${VANTAGE_DYNAMO_VENV:-$repo_root/.infra/dynamo-py}"
py="$venv/bin/python"
version="1.6.1"
check="import importlib.metadata as m, dynamo._core, dynamo.mocker, dynamo.select_service, nats, zmq, msgpack; assert m.version('ai-dynamo') == '$version' and m.version('ai-dynamo-runtime') == '$version'"

if [[ -x "$py" ]] && "$py" -c "$check" >/dev/null 2>&1; then
  echo "$py"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

if [[ ! -x "$py" ]]; then
  python3 -m venv "$venv" >&2
fi
if ! "$py" -c "$check" >/dev/null 2>&1; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ai-dynamo-runtime==$version" >&2
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "ai-dynamo==$version" >&2
  # The few pure-Python packages the mocker, replay and selection service import (pyzmq and
  # msgpack also for python/zmq_kv_publisher.py, the KV event source the selection service reads),
  # and nats-py for the example Python gateway client.
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    pyyaml msgspec pyzmq aiohttp prometheus-client tqdm zstandard redis packaging msgpack nats-py >&2
fi
"$py" -c "$check" >&2
echo "$py"
