/**
 * `vantage replay-sim`: offline discrete-event replay of a Mooncake trace (or
 * generated agentic sessions) on simulated Dynamo engines behind a router
 * that runs the indexer's own PoolState and selection code. All the logic is
 * in @vantage/sim; this file parses options, reports progress and prints.
 */
import { basename } from 'node:path';
import {
  DEFAULT_AGENTIC_CONFIG,
  generateAgenticSessions,
  parseMooncakeTrace,
  prepareTrace,
  runReplay,
  stderrProgress,
  traceSessions,
  type Distribution,
  type ReplayEngineConfig,
  type ReplayMetrics,
  type RouterSpec,
  type Workload,
} from '@vantage/sim';
import { choice, numOpt, parseOptions, readInput } from '../args';
import { EXIT, InputError, UsageError } from '../exit-codes';
import type { CliIo } from '../io';

const ROUTERS = ['round_robin', 'random', 'kv_router', 'llmd'] as const;
const MODES = ['open', 'closed'] as const;
const FORMULAS = ['prefill_load_scale', 'overlap_weight'] as const;
const SCORERS = ['token-load', 'active-request'] as const;
const TIE_BREAKS = ['random', 'tree'] as const;

export const name = 'replay-sim';
export const summary = 'replay a Mooncake trace or agentic sessions on simulated engines behind a router; print Dynamo-style metrics';
export const help = `Usage: vantage replay-sim (--trace FILE | --sessions N) [--router R] [--mode open|closed]
                         [--concurrency N] [--speedup X] [--workers N] [engine options] [router options]
                         [--event-delay-ms MS] [--seed N] [--quiet]

Replay a Mooncake trace (or seeded agentic sessions) on simulated Dynamo
engines behind a router. KV events feed the indexer's PoolState as they are
emitted; requests are booked at routing, prefill-marked at the first token,
released at completion. Prints Dynamo-style metrics; the last stdout line is
one JSON object. Progress on stderr.

Traces may be multi-turn, in Dynamo's form: lines sharing a "session_id" are
one session's turns in file order; the first turn arrives at its "timestamp",
each later turn "delay" ms after the previous turn of its session completes
(without "delay": its timestamp minus the previous one's).

Workload:
  --trace FILE             Mooncake JSONL trace (single- or multi-turn)
  --mode open|closed       open loop at the trace timestamps (default) or closed loop
  --speedup X              open loop: divide timestamps and delays by X (default 1)
  --concurrency N          closed loop: sessions in flight, each holding its place
                           across its turns (a request each in a single-turn trace; default 32)
  --sessions N             instead of a trace: N agentic sessions (default shape)
  --session-seed S         seed of the session generator (default 1)
Router:
  --router R               round_robin, random, kv_router (default), llmd
  --formula F              kv_router: prefill_load_scale (default) or overlap_weight
  --credit X               overlap_score_credit (default 1)
  --scale X                prefill_load_scale (default 1)
  --weight X               overlap_score_weight (overlap_weight formula; default 1)
  --temperature X          router_temperature (default 0)
  --tie-break T            kv_router at temperature 0: exact cost ties drawn at random
                           (default, as Dynamo 1.6.1) or to the smaller tree first
  --scorer S               llmd: token-load (default) or active-request
  --affinity X             llmd: affinity threshold (default 0.8)
  --max-ttft-penalty-ms MS llmd: stickiness release gate (default 18000)
Engines:
  --workers N              default 8
  --block-size N           default 64
  --num-gpu-blocks N       default 16384
  --max-num-batched-tokens N  default 8192 (seed 001: 16384)
  --max-num-seqs N         default 256 (seed 001: 512)
Other:
  --event-delay-ms MS      KV events reach the router MS after their pass starts (default 0)
  --seed N                 selection seed (default 1)
  --quiet                  no progress
  -h, --help               this help

Exit codes: 0 done, 64 bad arguments, 65 bad trace line, 66 unreadable trace.
`;

export const ENGINE_OPTIONS = ['workers', 'block-size', 'num-gpu-blocks', 'max-num-batched-tokens', 'max-num-seqs'];

export function engineConfig(values: Record<string, string | boolean | undefined>, defaults: { batched: number; seqs: number }): { workers: number; engine: ReplayEngineConfig } {
  return {
    workers: numOpt('workers', values['workers'], 8, { integer: true, min: 1, max: 1024 }),
    engine: {
      blockSize: numOpt('block-size', values['block-size'], 64, { integer: true, min: 1 }),
      numGpuBlocks: numOpt('num-gpu-blocks', values['num-gpu-blocks'], 16_384, { integer: true, min: 1 }),
      maxNumBatchedTokens: numOpt('max-num-batched-tokens', values['max-num-batched-tokens'], defaults.batched, { integer: true, min: 1 }),
      maxNumSeqs: numOpt('max-num-seqs', values['max-num-seqs'], defaults.seqs, { integer: true, min: 1 }),
    },
  };
}

/** Read and parse a Mooncake trace through the CLI's IO. */
export async function readTrace(io: CliIo, path: string): Promise<ReturnType<typeof parseMooncakeTrace> & { ok: true }> {
  const parsed = parseMooncakeTrace(new TextDecoder('utf-8').decode(await readInput(io, path)));
  if (!parsed.ok) throw new InputError(`${path}:${parsed.line}: ${parsed.reason}`, EXIT.DATA);
  return parsed;
}

const d1 = (d: Distribution): string => `mean ${d.mean.toFixed(1)}  p50 ${d.p50.toFixed(1)}  p90 ${d.p90.toFixed(1)}  p95 ${d.p95.toFixed(1)}  p99 ${d.p99.toFixed(1)}`;

function metricsText(m: ReplayMetrics): string {
  return [
    `requests ${m.requests}, input tokens ${m.inputTokens}, output tokens ${m.outputTokens}, makespan ${(m.durationMs / 1000).toFixed(1)} s, preemptions ${m.preemptions}`,
    `TTFT ms  ${d1(m.ttftMs)}`,
    `TPOT ms  ${d1(m.tpotMs)}`,
    `ITL ms   ${d1(m.itlMs)}`,
    `E2E ms   ${d1(m.e2eMs)}`,
    `throughput ${m.requestThroughputPerS.toFixed(3)} req/s, ${m.outputTokenThroughputPerS.toFixed(1)} output tok/s, ${m.totalTokenThroughputPerS.toFixed(1)} total tok/s`,
    `prefix_cache_reused_ratio ${m.prefixCacheReusedRatio.toFixed(4)}; requests per worker ${m.requestsPerWorker.join(' ')}`,
  ].join('\n');
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const { values } = parseOptions(
    argv,
    ['trace', 'mode', 'speedup', 'concurrency', 'sessions', 'session-seed', 'router', 'formula', 'credit', 'scale', 'weight', 'temperature', 'tie-break', 'scorer', 'affinity', 'max-ttft-penalty-ms', ...ENGINE_OPTIONS, 'event-delay-ms', 'seed'],
    ['quiet'],
  );
  const trace = values['trace'];
  const sessions = values['sessions'];
  if ((typeof trace === 'string') === (sessions !== undefined)) throw new UsageError('give exactly one of --trace FILE and --sessions N');
  const { workers, engine } = engineConfig(values, { batched: 8192, seqs: 256 });
  const bs = engine.blockSize ?? 64;
  const routerKind = choice('router', values['router'], ROUTERS, 'kv_router');
  const temperature = numOpt('temperature', values['temperature'], 0, { min: 0 });
  let router: RouterSpec;
  if (routerKind === 'kv_router') {
    const formula = choice('formula', values['formula'], FORMULAS, 'prefill_load_scale');
    const tieBreakByTreeSize = choice('tie-break', values['tie-break'], TIE_BREAKS, 'random') === 'tree';
    const knobs =
      formula === 'overlap_weight'
        ? { formula, overlapScoreWeight: numOpt('weight', values['weight'], 1, { min: 0 }) }
        : { formula, overlapScoreCredit: numOpt('credit', values['credit'], 1, { min: 0, max: 1 }), prefillLoadScale: numOpt('scale', values['scale'], 1, { min: 0 }) };
    router = { kind: 'kv_router', policy: { kind: 'kv_router', ...knobs, temperature, tieBreakByTreeSize } };
  } else if (routerKind === 'llmd') {
    router = {
      kind: 'llmd',
      policy: {
        kind: 'llmd',
        scorer: choice('scorer', values['scorer'], SCORERS, 'token-load'),
        affinityThreshold: numOpt('affinity', values['affinity'], 0.8, { min: 0, max: 1 }),
        maxTTFTPenaltyMs: numOpt('max-ttft-penalty-ms', values['max-ttft-penalty-ms'], 18_000, { min: 0 }),
      },
    };
  } else router = { kind: routerKind };

  let workload: Workload;
  let label: string;
  if (typeof trace === 'string') {
    const parsed = await readTrace(io, trace);
    const prepared = prepareTrace(parsed.records, bs, basename(trace));
    const sessionCount = traceSessions(parsed.records).length;
    const mode = choice('mode', values['mode'], MODES, 'open');
    workload =
      mode === 'open'
        ? { kind: 'open_loop', trace: prepared, speedup: numOpt('speedup', values['speedup'], 1, { min: Number.MIN_VALUE }) }
        : { kind: 'closed_loop', trace: prepared, concurrency: numOpt('concurrency', values['concurrency'], 32, { integer: true, min: 1 }) };
    label = `${basename(trace)} ${mode} loop${sessionCount < parsed.records.length ? ` (${sessionCount} sessions, ${parsed.records.length} turns)` : ''}`;
  } else {
    const n = numOpt('sessions', sessions, 0, { integer: true, min: 1 });
    workload = { kind: 'sessions', sessions: generateAgenticSessions({ ...DEFAULT_AGENTIC_CONFIG, sessions: n, seed: values['session-seed'] === undefined ? 1 : String(values['session-seed']) }) };
    label = `${n} agentic sessions`;
  }
  const result = runReplay({
    workers,
    engine,
    router,
    workload,
    seed: numOpt('seed', values['seed'], 1, { integer: true, min: 0 }),
    eventDelayMs: numOpt('event-delay-ms', values['event-delay-ms'], 0, { min: 0 }),
    ...(values['quiet'] === true ? {} : { onProgress: stderrProgress(`replay-sim ${router.kind}`, io.stderr) }),
  });
  io.stdout(`${label}, ${workers} workers, router ${result.router}, replayed in ${(result.wallMs / 1000).toFixed(2)} s\n`);
  io.stdout(`${metricsText(result.metrics)}\n`);
  const m = result.metrics;
  io.stdout(
    `${JSON.stringify({
      router: result.router,
      workers,
      requests: m.requests,
      rejected: result.counters.rejected,
      mean_ttft_ms: m.ttftMs.mean,
      p90_ttft_ms: m.ttftMs.p90,
      mean_tpot_ms: m.tpotMs.mean,
      mean_itl_ms: m.itlMs.mean,
      mean_e2e_ms: m.e2eMs.mean,
      p90_e2e_ms: m.e2eMs.p90,
      request_throughput: m.requestThroughputPerS,
      output_token_throughput: m.outputTokenThroughputPerS,
      prefix_cache_reused_ratio: m.prefixCacheReusedRatio,
      wall_s: result.wallMs / 1000,
    })}\n`,
  );
  return EXIT.OK;
}
