"""Unit tests of the message encoders and the reply decoder (standard library only, no broker):
``python -m unittest test_vantage_gateway`` from this folder. The integration test
(``test/examples/python-gateway.int.test.ts``) runs them and then the client against the real
services, validating every message the client sends against the JSON Schemas."""

import base64
import json
import struct
import unittest

from vantage_gateway import (
    U64_MAX,
    LocalHashes,
    Placement,
    PoolSpec,
    RouteError,
    TokenIds,
    Usage,
    decode_route_reply,
    encode_lifecycle_event,
    encode_route_request,
)

POOLS = {"efficient": PoolSpec("m-8b", "eff"), "capable": PoolSpec("m-70b")}


def route(**over):
    args = dict(
        request_id="r1",
        session_id="s1",
        stage_proposal="efficient",
        pools=POOLS,
        prompts={"efficient": TokenIds([1, 2, 3]), "capable": TokenIds([4294967295])},
    )
    args.update(over)
    return json.loads(encode_route_request(**args))


class RouteRequestTest(unittest.TestCase):
    def test_token_ids(self):
        m = route(deadline_ms=80)
        self.assertEqual(m["v"], 1)
        self.assertEqual(m["stageProposal"], "efficient")
        self.assertEqual(m["deadlineMs"], 80)
        self.assertEqual(m["candidates"]["efficient"], {"model": "m-8b", "pool": "eff", "prompt": {"tokenIds": [1, 2, 3], "loraName": None}, "promptTokens": 3})
        self.assertNotIn("pool", m["candidates"]["capable"])
        self.assertNotIn("deadlineMs", route())

    def test_local_hashes_exact_at_u64_max(self):
        hashes = [0, 1, 2**63, U64_MAX]
        m = route(prompts={"efficient": LocalHashes(hashes, 256), "capable": LocalHashes(hashes, 256, as_decimal=True)})
        le = base64.b64decode(m["candidates"]["efficient"]["prompt"]["localHashesLe64"])
        self.assertEqual(list(struct.unpack("<4Q", le)), hashes)
        self.assertEqual(m["candidates"]["capable"]["prompt"]["localHashes"], ["0", "1", "9223372036854775808", "18446744073709551615"])
        self.assertEqual(m["candidates"]["capable"]["promptTokens"], 256)

    def test_refuses_what_the_schema_refuses(self):
        bad = [
            dict(stage_proposal="big"),
            dict(request_id=""),
            dict(session_id="x" * 257),
            dict(prompts={"efficient": TokenIds([-1]), "capable": TokenIds([1])}),
            dict(prompts={"efficient": TokenIds([2**32]), "capable": TokenIds([1])}),
            dict(prompts={"efficient": TokenIds([True]), "capable": TokenIds([1])}),
            dict(prompts={"efficient": LocalHashes([2**64], 64), "capable": TokenIds([1])}),
            dict(prompts={"efficient": TokenIds([1])}),
            dict(pools={"efficient": PoolSpec("m", "no spaces"), "capable": PoolSpec("m")}),
            dict(deadline_ms=1.5),
        ]
        for over in bad:
            with self.subTest(over=repr(over)[:60]):
                with self.assertRaises(ValueError):
                    route(**over)


class LifecycleTest(unittest.TestCase):
    P = Placement("r1", "s1", "eff", U64_MAX, 0)

    def test_done_with_usage_keeps_the_worker_id_exact(self):
        m = json.loads(encode_lifecycle_event(self.P, "done", 1_700_000_000_000, usage=Usage(10, 2, None)))
        self.assertEqual(m, {"v": 1, "requestId": "r1", "sessionId": "s1", "pool": "eff", "kind": "done", "atMs": 1_700_000_000_000,
                             "workerId": "18446744073709551615", "dpRank": 0, "usage": {"inputTokens": 10, "outputTokens": 2, "cachedTokens": None}})

    def test_failed_and_background(self):
        m = json.loads(encode_lifecycle_event(Placement("r", "s", "p", None, None), "failed", 5, error={"code": "engine_oom", "message": None}, background=True, arrival_ms=1))
        self.assertEqual(m["error"], {"code": "engine_oom", "message": None})
        self.assertIsNone(m["workerId"])
        self.assertTrue(m["background"])
        self.assertEqual(m["arrivalMs"], 1)

    def test_refusals(self):
        with self.assertRaises(ValueError):
            encode_lifecycle_event(self.P, "started", 1)
        with self.assertRaises(ValueError):
            encode_lifecycle_event(self.P, "usage", 1)
        with self.assertRaises(ValueError):
            encode_lifecycle_event(self.P, "done", -1)
        with self.assertRaises(ValueError):
            encode_lifecycle_event(Placement("r", "s", "a.b", None, None), "done", 1)


class ReplyTest(unittest.TestCase):
    OK = {"v": 1, "requestId": "r1", "modelRole": "capable", "reason": "overrode", "pool": "cap", "workerId": "18446744073709551615", "dpRank": 1, "model": "m"}

    def test_reads_the_worker_id_exactly(self):
        r = decode_route_reply(json.dumps(self.OK).encode(), "r1")
        self.assertEqual(r.worker_id, U64_MAX)
        self.assertEqual(r.placement(), Placement("r1", "r1", "cap", U64_MAX, 1))

    def test_bad_replies(self):
        cases = [
            b"\xff",
            b"[1]",
            json.dumps({**self.OK, "v": 2}).encode(),
            json.dumps({**self.OK, "requestId": "other"}).encode(),
            json.dumps({**self.OK, "workerId": 18446744073709551615}).encode(),  # a JSON number: refused, not rounded
            json.dumps({**self.OK, "workerId": "18446744073709551616"}).encode(),
            json.dumps({**self.OK, "reason": "maybe"}).encode(),
        ]
        for data in cases:
            with self.subTest(data=data[:60]):
                with self.assertRaises(RouteError) as cm:
                    decode_route_reply(data, "r1")
                self.assertEqual(cm.exception.kind, "bad_reply")


if __name__ == "__main__":
    unittest.main()
