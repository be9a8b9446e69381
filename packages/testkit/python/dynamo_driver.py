"""Drive Dynamo 1.6.1 workers with Dynamo's own client, for vantage's integration tests.

Talks JSON lines over stdin/stdout. Every u64 (worker ids) travels as a decimal string.
Requests run concurrently; each reply carries the request's `id`. Commands:

  {"op": "instances", "id": N}
      -> {"id": N, "ok": true, "workers": ["<instance id>", ...]}
  {"op": "generate", "id": N, "tokens": [...], "max_tokens": K, "worker": "<id>"|null}
      -> {"id": N, "ok": true, "tokens_out": T, "cached_tokens": C|null}
      Through `client.direct(request, worker)` when a worker is named, else `client.generate`.
  {"op": "overlap", "id": N, "tokens": [...]}
      -> {"id": N, "ok": true, "block_size": B, "workers": [{"worker_id": "<id>", "dp_rank": R, "device_blocks": D}, ...]}
      Dynamo's own ground truth: `KvRouter(endpoint, block_size, KvRouterConfig()).get_overlap_scores(tokens)`.
  {"op": "best_worker", "id": N, "tokens": [...], "request_id": "<id>"|null}
      -> {"id": N, "ok": true, "worker_id": "<id>", "dp_rank": R, "overlap_blocks": B}
      `KvRouter.best_worker(tokens, request_id=...)`: with a request id the router books the request on
      the worker it picks (published to other routers with `--router-replica-sync`); without, a query.
  {"op": "free", "id": N, "request_id": "<id>"}, {"op": "prefill_complete", "id": N, "request_id": "<id>"}
      -> {"id": N, "ok": true}: `KvRouter.free` / `KvRouter.mark_prefill_complete`.
  {"op": "potential_loads", "id": N, "tokens": [...]}
      -> {"id": N, "ok": true, "loads": [{"worker_id": "<id>", "dp_rank", "potential_prefill_tokens", "potential_decode_blocks", "active_requests"}]}
  {"op": "quit"}

Errors of one command come back as {"id": N, "ok": false, "error": "..."}; the driver keeps going.
On start it prints {"ready": true, "workers": [...]} once `--min-workers` instances are listed.

Environment: Dynamo's own (DYN_DISCOVERY_BACKEND, DYN_FILE_KV or ETCD_ENDPOINTS, DYN_EVENT_PLANE, NATS_SERVER,
DYN_REQUEST_PLANE, DYN_TCP_*); the caller sets them exactly as for the workers.
"""

import argparse
import asyncio
import json
import os
import sys

from dynamo._core import DistributedRuntime, KvRouter, KvRouterConfig


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def plain(v):
    """Responses may be Annotated wrappers or plain dicts, depending on the binding."""
    if isinstance(v, dict):
        return v
    data = getattr(v, "data", None)
    if callable(data):
        return data()
    return data if data is not None else v


async def run_generate(client, msg):
    request = {
        "token_ids": msg["tokens"],
        "stop_conditions": {"max_tokens": int(msg.get("max_tokens", 2)), "ignore_eos": True},
        "sampling_options": {},
        "output_options": {},
        "eos_token_ids": [],
        "annotations": [],
    }
    worker = msg.get("worker")
    if worker is not None:
        stream = await client.direct(request, int(worker))
    else:
        stream = await client.generate(request)
    out = 0
    cached = None
    async for item in stream:
        d = plain(item)
        if isinstance(d, dict):
            out += len(d.get("token_ids") or [])
            usage = d.get("completion_usage") or {}
            details = usage.get("prompt_tokens_details") or {}
            if details.get("cached_tokens") is not None:
                cached = details["cached_tokens"]
    return {"tokens_out": out, "cached_tokens": cached}


async def run_overlap(router, msg):
    scores = await router.get_overlap_scores(msg["tokens"])
    rows = []
    for w in scores.get("workers", []):
        rows.append(
            {
                "worker_id": str(w["worker_id"]),
                "dp_rank": int(w.get("dp_rank") or 0),
                "device_blocks": int(w.get("device_blocks") or 0),
            }
        )
    return {"block_size": scores.get("block_size"), "workers": rows}


async def handle(client, router, msg):
    mid = msg.get("id")
    try:
        op = msg.get("op")
        if op == "generate":
            res = await run_generate(client, msg)
        elif op == "overlap":
            res = await run_overlap(router, msg)
        elif op == "best_worker":
            w, dp, overlap = await router.best_worker(msg["tokens"], request_id=msg.get("request_id"))
            res = {"worker_id": str(w), "dp_rank": int(dp), "overlap_blocks": int(overlap)}
        elif op == "free":
            await router.free(msg["request_id"])
            res = {}
        elif op == "prefill_complete":
            await router.mark_prefill_complete(msg["request_id"])
            res = {}
        elif op == "potential_loads":
            loads = await router.get_potential_loads(msg["tokens"])
            res = {"loads": [{**{k: int(v) for k, v in l.items() if k != "worker_id"}, "worker_id": str(l["worker_id"])} for l in loads]}
        elif op == "instances":
            res = {"workers": [str(i) for i in client.instance_ids()]}
        else:
            raise ValueError(f"unknown op {op!r}")
        emit({"id": mid, "ok": True, **res})
    except Exception as e:  # one failed command must not end the driver
        emit({"id": mid, "ok": False, "error": f"{type(e).__name__}: {e}"})


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default="dynamo.backend.generate")
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--min-workers", type=int, default=1)
    ap.add_argument("--no-router", action="store_true", help="do not start a KvRouter (no overlap queries)")
    ap.add_argument("--router-replica-sync", action="store_true", help="the KvRouter publishes its bookings (active_sequences_events)")
    args = ap.parse_args()

    loop = asyncio.get_running_loop()
    # The discovery backend the workers were started with (file unless DYN_DISCOVERY_BACKEND says
    # etcd; etcd's endpoints then come from ETCD_ENDPOINTS, as for the workers).
    runtime = DistributedRuntime(loop, os.environ.get("DYN_DISCOVERY_BACKEND", "file"), "tcp", event_plane="nats")
    endpoint = runtime.endpoint(args.endpoint)
    client = await endpoint.client()
    while len(client.instance_ids()) < args.min_workers:
        await asyncio.sleep(0.1)
    router = None if args.no_router else KvRouter(endpoint, args.block_size, KvRouterConfig(router_replica_sync=args.router_replica_sync))
    emit({"ready": True, "workers": [str(i) for i in client.instance_ids()]})

    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks = set()
    while True:
        line = await reader.readline()
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError as e:
            emit({"id": None, "ok": False, "error": f"bad json: {e}"})
            continue
        if msg.get("op") == "quit":
            break
        t = asyncio.ensure_future(handle(client, router, msg))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)
    runtime.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
