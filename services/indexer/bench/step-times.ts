/**
 * Step timings of a live indexer's observe handler, from the diagnostics channel it publishes on
 * (src/diagnostics.ts; nothing is measured while no subscriber listens). Loaded into the indexer
 * process as a preload, it appends one line per window of requests and encoding to STEP_TIMES_FILE
 * (default /tmp/vantage-step-times.txt; STEP_TIMES_WINDOW requests, default 4000): p50/p99 of
 * decode, answer (match, rows, Dynamo's pick, encoding), respond (handing the reply to NATS), total.
 *
 *   rm -f /tmp/vantage-step-times.txt
 *   flock /tmp/vantage-bench.lock env BENCH_RATES=1000 \
 *     BENCH_INDEXER_NODE_ARGS="--import tsx --import ./services/indexer/bench/step-times.ts" npm run bench:indexer
 *   cat /tmp/vantage-step-times.txt
 */
import { subscribe } from 'node:diagnostics_channel';
import { appendFileSync } from 'node:fs';
import { OBSERVE_STEPS_CHANNEL, type ObserveSteps } from '@vantage/indexer';
import { StepWindow } from './step-window';

const FILE = process.env.STEP_TIMES_FILE ?? '/tmp/vantage-step-times.txt';
const WINDOW = Number(process.env.STEP_TIMES_WINDOW ?? 4000);
const windows = [new StepWindow('binary', WINDOW), new StepWindow('json', WINDOW)];

subscribe(OBSERVE_STEPS_CHANNEL, (m) => {
  for (const w of windows) {
    const line = w.add(m as ObserveSteps);
    if (line !== null) appendFileSync(FILE, `${line}\n`);
  }
});
