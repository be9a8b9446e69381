/**
 * `vantage replay-sim` side by side with NVIDIA Dynamo's own offline replay
 * (`dynamo.replay.run_trace_replay` from PyPI ai-dynamo 1.6.1, in the venv
 * that packages/testkit/scripts/ensure-dynamo-py.sh installs) on one trace
 * and configuration. Used by the agreement benchmark and its integration test.
 *
 * Dynamo's kv_router draws exact cost ties at random and cannot be seeded, so
 * a kv_router comparison is the mean over several Dynamo runs against the
 * mean over as many replay-sim seeds; round_robin is deterministic on both
 * sides (one run each).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { run, type CliIo } from '../src/index';

const ENSURE = fileURLToPath(new URL('../../testkit/scripts/ensure-dynamo-py.sh', import.meta.url));
const SCRIPT = fileURLToPath(new URL('./dynamo_replay.py', import.meta.url));

export interface AgreementSpec {
  readonly trace: string;
  readonly router: 'round_robin' | 'kv_router';
  readonly workers: number;
  /** Closed loop with this many sessions in flight; open loop at the timestamps when absent. */
  readonly concurrency?: number;
  readonly speedup?: number;
  /** Runs per side (kv_router); round_robin always runs once. Default 5. */
  readonly repeats?: number;
  readonly blockSize?: number;
  readonly numGpuBlocks?: number;
  readonly maxNumBatchedTokens?: number;
  readonly maxNumSeqs?: number;
}

/** The metrics compared, one run. */
export interface RunMetrics {
  readonly requests: number;
  readonly meanTtftMs: number;
  readonly meanE2eMs: number;
  readonly prefixReuse: number;
  readonly p90TtftMs: number;
  readonly p90E2eMs: number;
  readonly meanTpotMs: number;
}

export interface Agreement {
  readonly spec: AgreementSpec;
  readonly ours: readonly RunMetrics[];
  readonly dynamo: readonly RunMetrics[];
  readonly oursMean: RunMetrics;
  readonly dynamoMean: RunMetrics;
  /** (ours − Dynamo) / Dynamo of the means. */
  readonly rel: { readonly meanTtftMs: number; readonly meanE2eMs: number; readonly prefixReuse: number };
}

const KEYS = ['requests', 'meanTtftMs', 'meanE2eMs', 'prefixReuse', 'p90TtftMs', 'p90E2eMs', 'meanTpotMs'] as const;

function meanOf(runs: readonly RunMetrics[]): RunMetrics {
  const m = {} as Record<(typeof KEYS)[number], number>;
  for (const k of KEYS) m[k] = runs.reduce((a, r) => a + r[k], 0) / runs.length;
  return m;
}

let python: string | undefined;

/** Dynamo's venv interpreter, installing it on first use (idempotent, quick when present). */
export function dynamoPython(): string {
  if (python !== undefined) return python;
  const r = spawnSync('bash', [ENSURE], { encoding: 'utf8', timeout: 600_000 });
  if (r.status !== 0) throw new Error(`ensure-dynamo-py.sh failed (${r.status ?? r.signal}): ${r.stderr.slice(-2000)}`);
  python = r.stdout.trim().split('\n').at(-1)!;
  return python;
}

const num = (o: Record<string, unknown>, k: string): number => {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new Error(`Dynamo's summary has no number ${k}: ${JSON.stringify(v)}`);
  return v;
};

/** Dynamo's replay, `runs` times. */
export function runDynamo(spec: AgreementSpec, runs: number): RunMetrics[] {
  const arg = {
    trace: spec.trace,
    router_mode: spec.router,
    num_workers: spec.workers,
    replay_concurrency: spec.concurrency ?? null,
    arrival_speedup_ratio: spec.speedup ?? 1,
    trace_block_size: 512,
    engine: {
      block_size: spec.blockSize ?? 64,
      num_gpu_blocks: spec.numGpuBlocks ?? 16_384,
      max_num_seqs: spec.maxNumSeqs ?? 256,
      max_num_batched_tokens: spec.maxNumBatchedTokens ?? 8192,
    },
    repeats: runs,
  };
  // Dynamo logs every routing decision at INFO on stderr; warnings and errors are enough here.
  const r = spawnSync(dynamoPython(), [SCRIPT, JSON.stringify(arg)], { encoding: 'utf8', timeout: 300_000, maxBuffer: 64 << 20, env: { ...process.env, DYN_LOG: 'warn', RUST_LOG: 'warn' } });
  if (r.status !== 0) throw new Error(`Dynamo's replay failed (${r.status ?? r.signal}): ${r.stderr.slice(-2000)}`);
  const lines = r.stdout.split('\n').filter((l) => l.startsWith('{'));
  if (lines.length !== runs) throw new Error(`Dynamo's replay printed ${lines.length} summaries, expected ${runs}: ${r.stderr.slice(-2000)}`);
  return lines.map((l) => {
    const s = JSON.parse(l) as Record<string, unknown>;
    if (num(s, 'completed_requests') !== num(s, 'num_requests')) throw new Error(`Dynamo completed ${String(s['completed_requests'])} of ${String(s['num_requests'])} requests`);
    return {
      requests: num(s, 'completed_requests'),
      meanTtftMs: num(s, 'mean_ttft_ms'),
      meanE2eMs: num(s, 'mean_e2e_latency_ms'),
      prefixReuse: num(s, 'prefix_cache_reused_ratio'),
      p90TtftMs: num(s, 'p90_ttft_ms'),
      p90E2eMs: num(s, 'p90_e2e_latency_ms'),
      meanTpotMs: num(s, 'mean_tpot_ms'),
    };
  });
}

/** `vantage replay-sim` in-process, once per seed; its last stdout line is the JSON summary. */
export async function runReplaySim(spec: AgreementSpec, seeds: readonly number[], io: CliIo): Promise<RunMetrics[]> {
  const out: RunMetrics[] = [];
  for (const seed of seeds) {
    const argv = [
      'replay-sim', '--trace', spec.trace, '--router', spec.router, '--workers', String(spec.workers), '--seed', String(seed), '--quiet',
      '--block-size', String(spec.blockSize ?? 64), '--num-gpu-blocks', String(spec.numGpuBlocks ?? 16_384),
      '--max-num-batched-tokens', String(spec.maxNumBatchedTokens ?? 8192), '--max-num-seqs', String(spec.maxNumSeqs ?? 256),
      ...(spec.concurrency !== undefined ? ['--mode', 'closed', '--concurrency', String(spec.concurrency)] : ['--speedup', String(spec.speedup ?? 1)]),
    ];
    let text = '';
    let err = '';
    const code = await run(argv, { ...io, stdout: (t) => void (text += t), stderr: (t) => void (err += t) });
    if (code !== 0) throw new Error(`replay-sim exited ${code}: ${err}`);
    const j = JSON.parse(text.trimEnd().split('\n').at(-1)!) as Record<string, number>;
    if (j['rejected'] !== 0) throw new Error(`replay-sim rejected ${j['rejected']} requests`);
    out.push({
      requests: j['requests']!,
      meanTtftMs: j['mean_ttft_ms']!,
      meanE2eMs: j['mean_e2e_ms']!,
      prefixReuse: j['prefix_cache_reused_ratio']!,
      p90TtftMs: j['p90_ttft_ms']!,
      p90E2eMs: j['p90_e2e_ms']!,
      meanTpotMs: j['mean_tpot_ms']!,
    });
  }
  return out;
}

export async function compareWithDynamo(spec: AgreementSpec, io: CliIo): Promise<Agreement> {
  const n = spec.router === 'round_robin' ? 1 : (spec.repeats ?? 5);
  const dynamo = runDynamo(spec, n);
  const ours = await runReplaySim(spec, Array.from({ length: n }, (_, i) => i + 1), io);
  const oursMean = meanOf(ours);
  const dynamoMean = meanOf(dynamo);
  const rel = (k: 'meanTtftMs' | 'meanE2eMs' | 'prefixReuse'): number => (oursMean[k] - dynamoMean[k]) / dynamoMean[k];
  return { spec, ours, dynamo, oursMean, dynamoMean, rel: { meanTtftMs: rel('meanTtftMs'), meanE2eMs: rel('meanE2eMs'), prefixReuse: rel('prefixReuse') } };
}

const pct = (x: number): string => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(2)} %`;

/** Side-by-side rows: per comparison, the means (and the range over runs when there are several). */
export function agreementTable(rows: readonly Agreement[]): string {
  const range = (runs: readonly RunMetrics[], k: 'meanTtftMs' | 'meanE2eMs' | 'prefixReuse', d: number): string => {
    if (runs.length < 2) return '';
    const v = runs.map((r) => r[k]);
    return ` [${Math.min(...v).toFixed(d)}–${Math.max(...v).toFixed(d)}]`;
  };
  const out: string[] = [];
  for (const a of rows) {
    const s = a.spec;
    const mode = s.concurrency !== undefined ? `closed c=${s.concurrency}` : `open x${s.speedup ?? 1}`;
    out.push(`${s.trace.split('/').at(-1)} ${s.router} ${s.workers}w ${mode}, ${a.oursMean.requests} requests, ${a.ours.length} run(s) each`);
    for (const [name, k, d] of [
      ['mean TTFT ms', 'meanTtftMs', 2],
      ['mean E2E ms ', 'meanE2eMs', 1],
      ['prefix reuse', 'prefixReuse', 4],
    ] as const) {
      out.push(`  ${name}  replay-sim ${a.oursMean[k].toFixed(d)}${range(a.ours, k, d)}  Dynamo ${a.dynamoMean[k].toFixed(d)}${range(a.dynamo, k, d)}  ${pct(a.rel[k])}`);
    }
  }
  return out.join('\n');
}
