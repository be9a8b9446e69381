"""Route one request through vantage and report its lifecycle, as a gateway would.

    python route_once.py --nats nats://127.0.0.1:4222 --request-id r1 --session-id s1 \
        --stage efficient --efficient efficient:efficient --capable capable:capable --tokens 256

``--efficient`` and ``--capable`` are ``MODEL[:POOL]``. The prompt is ``--tokens`` token ids
(a fixed, repeatable sequence from ``--seed``), or ``--token-ids 1,2,3``. After the reply it waits
``--first-token-ms`` and sends ``first_token``, waits ``--done-ms`` and sends ``done`` with the
usage (``--output-tokens``, ``--cached-tokens``). Prints one JSON object: the reply, the placement
and the events sent. Exit codes: 0 routed and reported, 3 the route failed (RouteError, printed as
``{"error": {...}}``), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys

import nats

from vantage_gateway import GatewayClient, PoolSpec, RouteError, TokenIds, Usage, now_ms


def pool_spec(text: str) -> PoolSpec:
    model, _, pool = text.partition(":")
    return PoolSpec(model=model, pool=pool or None)


async def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nats", default="nats://127.0.0.1:4222")
    ap.add_argument("--request-id", required=True)
    ap.add_argument("--session-id", required=True)
    ap.add_argument("--stage", choices=["efficient", "capable"], default="efficient")
    ap.add_argument("--efficient", type=pool_spec, required=True, metavar="MODEL[:POOL]")
    ap.add_argument("--capable", type=pool_spec, required=True, metavar="MODEL[:POOL]")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--token-ids", default=None, help="comma-separated token ids (instead of --tokens)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--route-subject", default="vantage.v1.route")
    ap.add_argument("--lifecycle-prefix", default="vantage.v1.lifecycle")
    ap.add_argument("--timeout-s", type=float, default=2.0)
    ap.add_argument("--deadline-ms", type=int, default=None)
    ap.add_argument("--first-token-ms", type=int, default=20)
    ap.add_argument("--done-ms", type=int, default=30)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--cached-tokens", type=int, default=None)
    a = ap.parse_args(argv)

    if a.token_ids is not None:
        tokens = [int(t) for t in a.token_ids.split(",") if t != ""]
    else:
        rng = random.Random(a.seed)
        tokens = [rng.randrange(0, 32_000) for _ in range(a.tokens)]

    nc = await nats.connect(a.nats)
    try:
        gw = GatewayClient(
            nc,
            {"efficient": a.efficient, "capable": a.capable},
            route_timeout_s=a.timeout_s,
            route_subject=a.route_subject,
            lifecycle_prefix=a.lifecycle_prefix,
        )
        sent_at = now_ms()
        try:
            reply = await gw.route(
                a.request_id,
                a.session_id,
                a.stage,
                {"efficient": TokenIds(tokens), "capable": TokenIds(tokens)},
                deadline_ms=a.deadline_ms,
            )
        except RouteError as e:
            print(json.dumps({"error": {"kind": e.kind, "code": e.code, "retryable": e.retryable, "message": str(e)}}))
            return 3
        routed_ms = now_ms() - sent_at
        placement = reply.placement()
        await asyncio.sleep(a.first_token_ms / 1000)
        first_ms = now_ms()
        await gw.first_token(placement, first_ms)
        await asyncio.sleep(a.done_ms / 1000)
        done_ms = now_ms()
        usage = Usage(input_tokens=len(tokens), output_tokens=a.output_tokens, cached_tokens=a.cached_tokens)
        await gw.done(placement, usage, done_ms)
        await gw.flush()
        print(
            json.dumps(
                {
                    "reply": reply.raw,
                    "routeMs": routed_ms,
                    "placement": {
                        "requestId": placement.request_id,
                        "sessionId": placement.session_id,
                        "pool": placement.pool,
                        # Decimal text: a JSON reader in another language must not round it.
                        "workerId": None if placement.worker_id is None else str(placement.worker_id),
                        "dpRank": placement.dp_rank,
                    },
                    "events": [
                        {"kind": "first_token", "atMs": first_ms},
                        {"kind": "done", "atMs": done_ms, "inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens},
                    ],
                }
            )
        )
        return 0
    finally:
        await nc.drain()


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(sys.argv[1:])))
    except ValueError as e:
        print(f"route_once: {e}", file=sys.stderr)
        sys.exit(2)
