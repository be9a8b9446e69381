"""Run NVIDIA Dynamo's own offline trace replay (`dynamo.replay.run_trace_replay`,
PyPI ai-dynamo 1.6.1) and print its metrics, one JSON object per run on stdout.

Usage: python dynamo_replay.py '<spec JSON>'
spec: {"trace": path, "router_mode": "round_robin"|"kv_router", "num_workers": n,
       "replay_concurrency": n|null, "arrival_speedup_ratio": x, "trace_block_size": 512,
       "engine": {"block_size", "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens"},
       "router_config": {"overlap_score_credit", "prefill_load_scale", "router_temperature"} | null,
       "repeats": n}

Dynamo's kv_router breaks cost ties at random (no seed; see run_synthetic_trace_replay's
docstring), so its results vary from run to run: `repeats` runs it that many times.
"""
import json
import sys

from dynamo._core import KvRouterConfig
from dynamo.replay import run_trace_replay

KEYS = [
    "num_requests", "completed_requests", "total_input_tokens", "total_output_tokens", "duration_ms",
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
    "mean_e2e_latency_ms", "median_e2e_latency_ms", "p90_e2e_latency_ms", "p99_e2e_latency_ms",
    "mean_tpot_ms", "mean_itl_ms", "request_throughput_rps", "output_throughput_tok_s",
    "prefix_cache_reused_ratio", "wall_time_ms",
]


def main() -> None:
    spec = json.loads(sys.argv[1])
    engine = spec["engine"]
    rc = spec.get("router_config")
    router_config = None if rc is None else KvRouterConfig(**rc)
    for _ in range(int(spec.get("repeats", 1))):
        report = run_trace_replay(
            spec["trace"],
            num_workers=int(spec["num_workers"]),
            router_mode=spec["router_mode"],
            trace_block_size=int(spec.get("trace_block_size", 512)),
            replay_concurrency=spec.get("replay_concurrency"),
            arrival_speedup_ratio=float(spec.get("arrival_speedup_ratio", 1.0)),
            router_config=router_config,
            extra_engine_args={
                "engine": {
                    "backend": "vllm",
                    "block_size": int(engine["block_size"]),
                    "num_gpu_blocks": int(engine["num_gpu_blocks"]),
                    "max_num_seqs": int(engine["max_num_seqs"]),
                    "max_num_batched_tokens": int(engine["max_num_batched_tokens"]),
                    "enable_prefix_caching": True,
                    "enable_chunked_prefill": True,
                }
            },
        )
        s = report.summary
        print(json.dumps({k: s.get(k) for k in KEYS}), flush=True)


if __name__ == "__main__":
    main()
