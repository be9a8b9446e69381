import { fileURLToPath } from 'node:url';
/**
 * Offline replay benchmark: the whole synthetic Mooncake trace (3,993
 * requests) replayed open loop at its timestamps on 8 simulated engines
 * behind Dynamo's kv_router — every decision an `observe` of the indexer's
 * PoolState, every KV event applied to its prefix index, every request booked,
 * marked and released in its ledger. Baseline in the same run: the same replay
 * with round_robin, which skips observe (engines, index and bookings only).
 *
 *   npm run bench:replay [-- trace [workers]]
 *
 * Prompt hashing (once per trace, shared by both runs) is timed separately
 * and included in wall_s (load + hash + kv_router replay). On a shared, loaded
 * machine wall time includes waiting for a core, so CPU time (user + system
 * of this single-threaded process) is reported beside it. The last line is
 * one JSON object.
 */
import { loadMooncakeTrace, prepareTrace, runReplay, stderrProgress, type RouterSpec } from '@vantage/sim';
// The shared data folder beside the repository (traces are not part of the product).
const SHARED = fileURLToPath(new URL('../../../../shared', import.meta.url));

const path = process.argv[2] ?? `${SHARED}/traces/synthetic_trace.jsonl`;
const workers = Number(process.argv[3] ?? 8);

const cpu0 = process.cpuUsage();
const t0 = performance.now();
const records = loadMooncakeTrace(path);
const loadMs = performance.now() - t0;
const t1 = performance.now();
const trace = prepareTrace(records, 64, path);
const hashMs = performance.now() - t1;
const prepCpu = process.cpuUsage(cpu0);
const prepCpuMs = (prepCpu.user + prepCpu.system) / 1000;

function run(router: RouterSpec) {
  const c0 = process.cpuUsage();
  const r = runReplay({ workers, router, workload: { kind: 'open_loop', trace }, seed: 1, onProgress: stderrProgress(`replay ${router.kind}`), progressEveryMs: 2000 });
  const c = process.cpuUsage(c0);
  return { ...r, cpuMs: (c.user + c.system) / 1000 };
}

const base = run({ kind: 'round_robin' });
const kv = run({ kind: 'kv_router' });
const wallS = (loadMs + hashMs + kv.wallMs) / 1000;
const m = kv.metrics;
const b = base.metrics;
console.log(`trace ${path}: ${records.length} requests on ${workers} engines, open loop at trace timestamps`);
console.log(`load ${loadMs.toFixed(0)} ms, hash prompts ${hashMs.toFixed(0)} ms (${prepCpuMs.toFixed(0)} ms CPU)`);
console.log(
  `kv_router: replay ${kv.wallMs.toFixed(0)} ms wall, ${kv.cpuMs.toFixed(0)} ms CPU (${kv.counters.observes} observes, ${kv.counters.kvEvents} KV events, ${kv.counters.steps} steps / ${kv.counters.passes} passes); ` +
    `mean TTFT ${m.ttftMs.mean.toFixed(1)} ms, mean E2E ${m.e2eMs.mean.toFixed(1)} ms, reuse ${m.prefixCacheReusedRatio.toFixed(3)}`,
);
console.log(
  `round_robin baseline (no observe): replay ${base.wallMs.toFixed(0)} ms wall, ${base.cpuMs.toFixed(0)} ms CPU (${base.counters.steps} steps); ` +
    `mean TTFT ${b.ttftMs.mean.toFixed(1)} ms, mean E2E ${b.e2eMs.mean.toFixed(1)} ms, reuse ${b.prefixCacheReusedRatio.toFixed(3)}`,
);
console.log(
  JSON.stringify({
    requests: m.requests,
    workers,
    wall_s: Number(wallS.toFixed(3)),
    cpu_s: Number(((prepCpuMs + kv.cpuMs) / 1000).toFixed(3)),
    replay_s: Number((kv.wallMs / 1000).toFixed(3)),
    replay_cpu_s: Number((kv.cpuMs / 1000).toFixed(3)),
    hash_s: Number((hashMs / 1000).toFixed(3)),
    sim_requests_per_s: Number((m.requests / (kv.wallMs / 1000)).toFixed(1)),
    mean_ttft_ms: Number(m.ttftMs.mean.toFixed(2)),
    mean_e2e_ms: Number(m.e2eMs.mean.toFixed(2)),
    prefix_cache_reused_ratio: Number(m.prefixCacheReusedRatio.toFixed(4)),
    observes: kv.counters.observes,
    kv_events: kv.counters.kvEvents,
    baseline_router: 'round_robin',
    baseline_replay_s: Number((base.wallMs / 1000).toFixed(3)),
    baseline_replay_cpu_s: Number((base.cpuMs / 1000).toFixed(3)),
    baseline_mean_ttft_ms: Number(b.ttftMs.mean.toFixed(2)),
    baseline_prefix_cache_reused_ratio: Number(b.prefixCacheReusedRatio.toFixed(4)),
  }),
);
