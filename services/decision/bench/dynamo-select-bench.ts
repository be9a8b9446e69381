/**
 * `npm run bench:dynamo-select`: Dynamo's runtime-free selection service given the decision
 * benchmark's 64 workers, their KV events and its prompts (`dynamo-select-peer.ts`), answers checked
 * against ours, then select latency at fixed open-loop rates and the highest sustained rate.
 * Last line: one JSON object with `dynamo_select_p50_us`, `dynamo_select_p99_us` (first scenario at
 * 1,000/s), `dynamo_select_max_per_s`, and every run.
 *
 * Environment: BENCH_SECONDS (4), BENCH_RATES (500,1000,2000), BENCH_SCENARIOS (32k-hashes,32k-token_ids),
 * BENCH_SEARCH_FROM (100), BENCH_STEP (100), BENCH_SEARCH_MAX (6000), BENCH_WARMUP_SELECTS (500), BENCH_SERIAL_SELECTS (200),
 * BENCH_WORKERS (64), BENCH_SELECT_THREADS (the service's --threads; its default 4 when unset),
 * BENCH_SOCKETS (64 keep-alive connections).
 */
import { runDynamoSelectPeer } from './dynamo-select-peer';

const env = (k: string): string | undefined => process.env[k];
const num = (k: string, d: number): number => Number(env(k) ?? d);
const log = (s: string): void => void process.stderr.write(`${s}\n`);

runDynamoSelectPeer({
  workers: num('BENCH_WORKERS', 64),
  ...(env('BENCH_SELECT_THREADS') === undefined ? {} : { threads: num('BENCH_SELECT_THREADS', 4) }),
  maxSockets: num('BENCH_SOCKETS', 64),
  scenarios: (env('BENCH_SCENARIOS') ?? '32k-hashes,32k-token_ids').split(','),
  rates: (env('BENCH_RATES') ?? '500,1000,2000').split(',').map(Number),
  seconds: num('BENCH_SECONDS', 4),
  searchFrom: num('BENCH_SEARCH_FROM', 100),
  searchStep: num('BENCH_STEP', 100),
  searchMax: num('BENCH_SEARCH_MAX', 6000),
  warmup: num('BENCH_WARMUP_SELECTS', 500),
  serial: num('BENCH_SERIAL_SELECTS', 200),
  log,
}).then(
  (r) => {
    process.stdout.write(`${JSON.stringify({ bench: 'dynamo-select', ...r })}\n`);
    process.exit(0);
  },
  (e: unknown) => {
    log(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exit(1);
  },
);
