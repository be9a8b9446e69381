"""A gateway client for vantage in Python: ask ``vantage.v1.route``, then report the
request's lifecycle on ``vantage.v1.lifecycle.{pool}``.

The messages are exactly those of the language-neutral contracts in ``schemas/protocol``
(``route-request.v1.json``, ``route-reply.v1.json``, ``lifecycle-event.v1.json``); only the
public ``nats-py`` package is needed. Dynamo's hashes and worker ids are unsigned 64-bit
integers: they travel as decimal strings (or, for a prompt's hashes, as base64 of
little-endian u64s) and are Python ints here, which are exact at any size.

    nc = await nats.connect("nats://127.0.0.1:4222")
    gw = GatewayClient(nc, {
        "efficient": PoolSpec(model="model-8b", pool="efficient"),
        "capable": PoolSpec(model="model-70b", pool="capable"),
    })
    reply = await gw.route("req-1", "session-1", "efficient",
                           {"efficient": TokenIds(tokens), "capable": TokenIds(tokens)})
    placement = reply.placement()
    await gw.first_token(placement)
    ...
    await gw.done(placement, Usage(input_tokens=len(tokens), output_tokens=42, cached_tokens=None))
"""

from __future__ import annotations

import base64
import json
import re
import struct
import time
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import nats.errors

ROUTE_SUBJECT = "vantage.v1.route"
LIFECYCLE_PREFIX = "vantage.v1.lifecycle"

ROLES = ("efficient", "capable")
LIFECYCLE_KINDS = ("first_token", "done", "cancelled", "failed", "usage")

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1
MAX_SAFE_INTEGER = (1 << 53) - 1  # the schemas' bound on counts and times (JSON numbers)
MAX_HASHES = 131_072
MAX_TOKENS = 2_097_152

_POOL = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_U64_TEXT = re.compile(r"^(0|[1-9][0-9]{0,19})$")

# Error headers of a vantage service reply (@vantage/runtime's writeErrorHeaders).
HEADER_SERVICE_ERROR = "Nats-Service-Error"
HEADER_SERVICE_ERROR_CODE = "Nats-Service-Error-Code"
HEADER_VANTAGE_ERROR_CODE = "Vantage-Error-Code"
HEADER_VANTAGE_RETRYABLE = "Vantage-Error-Retryable"


class RouteError(Exception):
    """Why a route failed. ``kind`` keeps apart what a gateway handles differently:

    - ``no_responders``: no decision service is subscribed: dispatch Stage's choice at once;
    - ``timeout``: a decision service exists but did not answer in time: Stage's choice;
    - ``service``: the decision service answered with an error code (``code``, e.g. ``BAD_REQUEST``);
    - ``transport``: the NATS request failed otherwise (connection closed, ...);
    - ``bad_reply``: a reply arrived but is not a v1 route reply for this request.
    """

    def __init__(self, kind: str, code: str, message: str, retryable: bool):
        super().__init__(f"{kind} ({code}): {message}")
        self.kind = kind
        self.code = code
        self.retryable = retryable


@dataclass(frozen=True)
class PoolSpec:
    """One candidate model and the pool serving it."""

    model: str
    pool: Optional[str] = None  # absent: the decision service's configured mapping


@dataclass(frozen=True)
class TokenIds:
    """A prompt as token ids (after the chat template and tokenizer); the decision service hashes them."""

    token_ids: Sequence[int]
    lora_name: Optional[str] = None


@dataclass(frozen=True)
class LocalHashes:
    """A prompt as Dynamo's local block hashes (XXH3-64, seed 1337) of its full blocks, computed by the caller."""

    hashes: Sequence[int]
    prompt_tokens: int
    lora_name: Optional[str] = None
    # Decimal strings instead of the compact base64 form (both are in the schema).
    as_decimal: bool = False


Prompt = Union[TokenIds, LocalHashes]


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    output_tokens: int
    cached_tokens: Optional[int] = None  # None when the backend does not report it


@dataclass(frozen=True)
class Placement:
    """Where a routed request went: what the lifecycle events name."""

    request_id: str
    session_id: str
    pool: str
    worker_id: Optional[int]
    dp_rank: Optional[int]


@dataclass(frozen=True)
class RouteReply:
    """The decision service's answer; ``raw`` is the whole reply as decoded JSON."""

    raw: Dict[str, Any]

    @property
    def request_id(self) -> str:
        return self.raw["requestId"]

    @property
    def model(self) -> str:
        return self.raw["model"]

    @property
    def model_role(self) -> str:
        return self.raw["modelRole"]

    @property
    def pool(self) -> Optional[str]:
        return self.raw.get("pool")

    @property
    def worker_id(self) -> Optional[int]:
        w = self.raw.get("workerId")
        return None if w is None else int(w)

    @property
    def dp_rank(self) -> Optional[int]:
        return self.raw.get("dpRank")

    @property
    def reason(self) -> str:
        return self.raw["reason"]

    @property
    def fallback(self) -> Optional[str]:
        return self.raw.get("fallback")

    def placement(self) -> Placement:
        pool = self.pool
        if pool is None:
            raise ValueError(f"route reply for {self.request_id} names no pool")
        return Placement(
            request_id=self.request_id,
            session_id=self.raw.get("sessionId") or self.request_id,
            pool=pool,
            worker_id=self.worker_id,
            dp_rank=self.dp_rank,
        )


def _text(name: str, value: Any, max_len: int = 256) -> str:
    if not isinstance(value, str) or not (1 <= len(value) <= max_len):
        raise ValueError(f"{name} must be a string of 1 to {max_len} characters, got {value!r:.80}")
    return value


def _count(name: str, value: Any, maximum: int = MAX_SAFE_INTEGER) -> int:
    # bool is an int in Python; the schema's integers are not booleans.
    if isinstance(value, bool) or not isinstance(value, int) or not (0 <= value <= maximum):
        raise ValueError(f"{name} must be an integer from 0 to {maximum}, got {value!r:.80}")
    return value


def _lora(value: Any) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 256:
        raise ValueError(f"lora_name must be a string of at most 256 characters or None, got {value!r:.80}")
    return value


def _u64(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not (0 <= value <= U64_MAX):
        raise ValueError(f"{name} must be an unsigned 64-bit integer, got {value!r:.80}")
    return value


def encode_prompt(role: str, prompt: Prompt) -> Dict[str, Any]:
    """The ``prompt`` object and ``promptTokens`` of one candidate (exactly one prompt form)."""
    if isinstance(prompt, TokenIds):
        ids = list(prompt.token_ids)
        if len(ids) > MAX_TOKENS:
            raise ValueError(f"{role}: at most {MAX_TOKENS} token ids, got {len(ids)}")
        for i, t in enumerate(ids):
            _count(f"{role}: token_ids[{i}]", t, U32_MAX)
        return {"prompt": {"tokenIds": ids, "loraName": _lora(prompt.lora_name)}, "promptTokens": len(ids)}
    if isinstance(prompt, LocalHashes):
        hashes = [_u64(f"{role}: hashes[{i}]", h) for i, h in enumerate(prompt.hashes)]
        if len(hashes) > MAX_HASHES:
            raise ValueError(f"{role}: at most {MAX_HASHES} hashes, got {len(hashes)}")
        tokens = _count(f"{role}: prompt_tokens", prompt.prompt_tokens)
        if prompt.as_decimal:
            body: Dict[str, Any] = {"localHashes": [str(h) for h in hashes]}
        else:
            body = {"localHashesLe64": base64.b64encode(struct.pack(f"<{len(hashes)}Q", *hashes)).decode("ascii")}
        body["loraName"] = _lora(prompt.lora_name)
        return {"prompt": body, "promptTokens": tokens}
    raise TypeError(f"{role}: prompt must be TokenIds or LocalHashes, got {type(prompt).__name__}")


def encode_route_request(
    request_id: str,
    session_id: str,
    stage_proposal: str,
    pools: Mapping[str, PoolSpec],
    prompts: Mapping[str, Prompt],
    deadline_ms: Optional[int] = None,
) -> bytes:
    """A ``vantage.v1.route`` request (``schemas/protocol/route-request.v1.json``) as UTF-8 JSON."""
    if stage_proposal not in ROLES:
        raise ValueError(f"stage_proposal must be one of {ROLES}, got {stage_proposal!r:.80}")
    candidates: Dict[str, Any] = {}
    for role in ROLES:
        spec = pools.get(role)
        prompt = prompts.get(role)
        if spec is None or prompt is None:
            raise ValueError(f"a pool and a prompt are needed for both candidates; missing {role}")
        cand: Dict[str, Any] = {"model": _text(f"{role}: model", spec.model)}
        if spec.pool is not None:
            if not isinstance(spec.pool, str) or not _POOL.match(spec.pool):
                raise ValueError(f"{role}: pool must match {_POOL.pattern}, got {spec.pool!r:.80}")
            cand["pool"] = spec.pool
        cand.update(encode_prompt(role, prompt))
        candidates[role] = cand
    msg: Dict[str, Any] = {
        "v": 1,
        "requestId": _text("request_id", request_id),
        "sessionId": _text("session_id", session_id),
        "stageProposal": stage_proposal,
        "candidates": candidates,
    }
    if deadline_ms is not None:
        msg["deadlineMs"] = _count("deadline_ms", deadline_ms)
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_route_reply(data: bytes, request_id: str) -> RouteReply:
    """The reply as JSON, checked for the fields a gateway acts on; anything else is ``bad_reply``."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RouteError("bad_reply", "BAD_REPLY", f"route reply is not UTF-8 JSON: {e}", False) from None
    if not isinstance(raw, dict) or raw.get("v") != 1:
        raise RouteError("bad_reply", "BAD_REPLY", "route reply is not a v1 object", False)
    if raw.get("requestId") != request_id:
        raise RouteError("bad_reply", "BAD_REPLY", f"route reply is for {raw.get('requestId')!r:.80}, not {request_id!r}", False)
    if raw.get("modelRole") not in ROLES or raw.get("reason") not in ("kept", "overrode", "fallback"):
        raise RouteError("bad_reply", "BAD_REPLY", "route reply has no valid modelRole or reason", False)
    pool = raw.get("pool")
    if pool is not None and not (isinstance(pool, str) and _POOL.match(pool)):
        raise RouteError("bad_reply", "BAD_REPLY", f"route reply pool {pool!r:.80} is not a pool name", False)
    worker = raw.get("workerId")
    if worker is not None and not (isinstance(worker, str) and _U64_TEXT.match(worker) and int(worker) <= U64_MAX):
        raise RouteError("bad_reply", "BAD_REPLY", f"route reply workerId {worker!r:.80} is not a u64 decimal string", False)
    dp = raw.get("dpRank")
    if dp is not None and (isinstance(dp, bool) or not isinstance(dp, int) or not 0 <= dp <= U32_MAX):
        raise RouteError("bad_reply", "BAD_REPLY", f"route reply dpRank {dp!r:.80} is not a u32", False)
    return RouteReply(raw)


def encode_lifecycle_event(
    placement: Placement,
    kind: str,
    at_ms: int,
    usage: Optional[Usage] = None,
    error: Optional[Mapping[str, Optional[str]]] = None,
    background: Optional[bool] = None,
    arrival_ms: Optional[int] = None,
) -> bytes:
    """A ``vantage.v1.lifecycle.{pool}`` event (``schemas/protocol/lifecycle-event.v1.json``) as UTF-8 JSON."""
    if kind not in LIFECYCLE_KINDS:
        raise ValueError(f"kind must be one of {LIFECYCLE_KINDS}, got {kind!r:.80}")
    if not isinstance(placement.pool, str) or not _POOL.match(placement.pool):
        raise ValueError(f"pool must match {_POOL.pattern}, got {placement.pool!r:.80}")
    msg: Dict[str, Any] = {
        "v": 1,
        "requestId": _text("request_id", placement.request_id),
        "sessionId": _text("session_id", placement.session_id),
        "pool": placement.pool,
        "kind": kind,
        "atMs": _count("at_ms", at_ms),
        "workerId": None if placement.worker_id is None else str(_u64("worker_id", placement.worker_id)),
        "dpRank": None if placement.dp_rank is None else _count("dp_rank", placement.dp_rank, U32_MAX),
    }
    if kind == "usage" and usage is None:
        raise ValueError("a usage event carries usage")
    if usage is not None:
        msg["usage"] = {
            "inputTokens": _count("input_tokens", usage.input_tokens),
            "outputTokens": _count("output_tokens", usage.output_tokens),
            "cachedTokens": None if usage.cached_tokens is None else _count("cached_tokens", usage.cached_tokens),
        }
    if error is not None:
        message = error.get("message")
        if message is not None and (not isinstance(message, str) or len(message) > 4096):
            raise ValueError("error message must be a string of at most 4096 characters or None")
        msg["error"] = {"code": _text("error code", error.get("code"), 128), "message": message}
    if background is not None:
        msg["background"] = bool(background)
    if arrival_ms is not None:
        msg["arrivalMs"] = _count("arrival_ms", arrival_ms)
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class GatewayClient:
    """Routes requests and reports their lifecycle over one nats-py connection."""

    def __init__(
        self,
        nc: Any,
        pools: Mapping[str, PoolSpec],
        route_timeout_s: float = 1.0,
        route_subject: str = ROUTE_SUBJECT,
        lifecycle_prefix: str = LIFECYCLE_PREFIX,
    ):
        for role in ROLES:
            if role not in pools:
                raise ValueError(f"pools needs both roles; missing {role}")
        self._nc = nc
        self._pools = dict(pools)
        self._timeout = route_timeout_s
        self._subject = route_subject
        self._lifecycle_prefix = lifecycle_prefix

    async def route(
        self,
        request_id: str,
        session_id: str,
        stage_proposal: str,
        prompts: Mapping[str, Prompt],
        deadline_ms: Optional[int] = None,
    ) -> RouteReply:
        """Ask the decision service. Raises ValueError for arguments the schema refuses, else only RouteError."""
        body = encode_route_request(request_id, session_id, stage_proposal, self._pools, prompts, deadline_ms)
        try:
            msg = await self._nc.request(self._subject, body, timeout=self._timeout)
        except nats.errors.NoRespondersError:
            raise RouteError("no_responders", "NATS_NO_RESPONDERS", f"no decision service on {self._subject}", True) from None
        except nats.errors.TimeoutError:
            raise RouteError("timeout", "NATS_TIMEOUT", f"no route reply within {self._timeout} s", True) from None
        except nats.errors.Error as e:
            raise RouteError("transport", "NATS_REQUEST_FAILED", f"route request failed: {e!r}", True) from None
        headers = msg.headers or {}
        code = headers.get(HEADER_VANTAGE_ERROR_CODE)
        if code is not None or headers.get(HEADER_SERVICE_ERROR_CODE) is not None:
            retryable = headers.get(HEADER_VANTAGE_RETRYABLE) == "true"
            text = headers.get(HEADER_SERVICE_ERROR) or ""
            raise RouteError("service", code or f"STATUS_{headers.get(HEADER_SERVICE_ERROR_CODE)}", text, retryable)
        return decode_route_reply(msg.data, request_id)

    def lifecycle_subject(self, pool: str) -> str:
        return f"{self._lifecycle_prefix}.{pool}"

    async def _lifecycle(self, placement: Placement, kind: str, at_ms: Optional[int], **extra: Any) -> None:
        body = encode_lifecycle_event(placement, kind, now_ms() if at_ms is None else at_ms, **extra)
        await self._nc.publish(self.lifecycle_subject(placement.pool), body)

    async def first_token(self, placement: Placement, at_ms: Optional[int] = None) -> None:
        await self._lifecycle(placement, "first_token", at_ms)

    async def done(self, placement: Placement, usage: Optional[Usage] = None, at_ms: Optional[int] = None) -> None:
        await self._lifecycle(placement, "done", at_ms, usage=usage)

    async def cancelled(self, placement: Placement, at_ms: Optional[int] = None) -> None:
        await self._lifecycle(placement, "cancelled", at_ms)

    async def failed(self, placement: Placement, code: str, message: Optional[str] = None, at_ms: Optional[int] = None) -> None:
        await self._lifecycle(placement, "failed", at_ms, error={"code": code, "message": message})

    async def usage(self, placement: Placement, usage: Usage, at_ms: Optional[int] = None) -> None:
        await self._lifecycle(placement, "usage", at_ms, usage=usage)

    async def flush(self) -> None:
        """Returns once the server has everything published so far."""
        await self._nc.flush()
