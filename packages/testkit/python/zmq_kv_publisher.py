"""Publish vLLM-format KV event batches over ZMQ, one PUB endpoint per simulated worker.

This is the worker side that Dynamo's runtime-free selection service (`python -m dynamo.select_service`)
subscribes to: a worker registered there names a `kv_events_endpoint`, and the service's SUB socket
connects to it. Each endpoint is an XPUB socket bound on 127.0.0.1 (a free port), so this process
sees the service's subscription arrive and can hold events back until it has (PUB/SUB drops what is
sent before a subscriber is connected).

Wire format (vLLM's `ZmqEventPublisher`, as Dynamo's listener decodes it): a three-frame message
[topic, sequence (u64 big-endian), payload], payload = msgpack array
[timestamp, [event, ...], data_parallel_rank], each event a tagged array:
  ["BlockStored", [block_hash, ...], parent_block_hash | None, [token_id, ...], block_size, lora_id | None, medium]
  ["BlockRemoved", [block_hash, ...], medium]
  ["AllBlocksCleared"]
Block hashes travel as unsigned 64-bit msgpack integers (exact).

JSON lines over stdin/stdout; each reply carries the command's `id`. u64 arrays (block hashes) and
token ids travel as base64 of little-endian u64 / u32 arrays, so nothing passes through a float.

  {"op": "wait_subscribed", "id": N, "timeout_ms": T}
      -> {"id": N, "ok": true, "subscribed": K, "topics": ["<hex>", ...]}
      Waits until every endpoint has seen a subscription (or the timeout); K endpoints have.
  {"op": "publish", "id": N, "worker": I, "seq": S, "dp_rank": R, "events": [E, ...]}
      E = {"kind": "stored", "block_hashes_b64": "...", "parent_hash": "<u64 decimal>" | null,
           "tokens_b64": "...", "block_size": B}
        | {"kind": "removed", "block_hashes_b64": "..."} | {"kind": "cleared"}
      -> {"id": N, "ok": true, "bytes": <payload bytes>}
  {"op": "quit"}

Errors of one command come back as {"id": N, "ok": false, "error": "..."}; the process keeps going.
On start it prints {"ready": true, "endpoints": ["tcp://127.0.0.1:P", ...]}.
"""

import argparse
import base64
import json
import sys
import time

import msgpack
import zmq


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def u64s(b64):
    return memoryview(base64.b64decode(b64)).cast("Q").tolist()


def u32s(b64):
    return memoryview(base64.b64decode(b64)).cast("I").tolist()


def encode_event(e):
    kind = e["kind"]
    if kind == "stored":
        parent = e.get("parent_hash")
        return [
            "BlockStored",
            u64s(e["block_hashes_b64"]),
            None if parent is None else int(parent),
            u32s(e["tokens_b64"]),
            int(e["block_size"]),
            None,
            "GPU",
        ]
    if kind == "removed":
        return ["BlockRemoved", u64s(e["block_hashes_b64"]), "GPU"]
    if kind == "cleared":
        return ["AllBlocksCleared"]
    raise ValueError(f"unknown event kind {kind!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--topic", default="")
    args = ap.parse_args()

    ctx = zmq.Context()
    socks = []
    endpoints = []
    for _ in range(args.workers):
        s = ctx.socket(zmq.XPUB)
        s.setsockopt(zmq.SNDHWM, 0)
        s.setsockopt(zmq.LINGER, 0)
        port = s.bind_to_random_port("tcp://127.0.0.1")
        socks.append(s)
        endpoints.append(f"tcp://127.0.0.1:{port}")
    subscribed = [None] * args.workers
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)

    def drain(timeout_ms):
        for s, _ in poller.poll(timeout_ms):
            i = socks.index(s)
            while True:
                try:
                    frame = s.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if frame[:1] == b"\x01":
                    subscribed[i] = frame[1:].hex()

    topic = args.topic.encode()
    emit({"ready": True, "endpoints": endpoints})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        op = msg.get("op")
        if op == "quit":
            break
        mid = msg.get("id")
        try:
            if op == "wait_subscribed":
                deadline = time.monotonic() + int(msg.get("timeout_ms", 10_000)) / 1000
                while any(x is None for x in subscribed) and time.monotonic() < deadline:
                    drain(50)
                drain(0)
                n = sum(1 for x in subscribed if x is not None)
                emit({"id": mid, "ok": True, "subscribed": n, "topics": sorted({x for x in subscribed if x is not None})})
            elif op == "publish":
                drain(0)
                i = int(msg["worker"])
                events = [encode_event(e) for e in msg["events"]]
                payload = msgpack.packb([time.time(), events, int(msg.get("dp_rank", 0))], use_bin_type=True)
                socks[i].send_multipart([topic, int(msg["seq"]).to_bytes(8, "big"), payload])
                emit({"id": mid, "ok": True, "bytes": len(payload)})
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as e:  # one bad command must not end the publisher
            emit({"id": mid, "ok": False, "error": f"{type(e).__name__}: {e}"})
    for s in socks:
        s.close(0)
    ctx.term()


if __name__ == "__main__":
    main()
