/**
 * Where each request's time goes, from the files timeline.patch writes (see its header):
 * the benchmark's send and reply times per request, and each responder's socket read, parse,
 * handler entry, handler exit and socket write, all CLOCK_MONOTONIC ns (one clock for every
 * process on the machine). A responder's n-th request is the client's (n + k)-th for one offset k
 * (one connection, one responder, order kept), found as the k that puts the most handler entries
 * between their request's send and reply; only requests whose stamps are in order are counted.
 * It also prints how the benchmark spaced its sends (the shares of the gaps between them by band).
 *
 * Run: node --import tsx services/indexer/bench/diagnostics/timeline-report.ts DIR
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (dir === undefined) {
  process.stderr.write('usage: timeline-report.ts DIR\n');
  process.exit(2);
}
const files = readdirSync(dir);

function rowsOf(file: string, width: number): number[][] {
  const v = readFileSync(join(dir!, file), 'utf8').split('\n').filter((l) => l !== '').map(Number);
  const out: number[][] = [];
  for (let i = 0; i + width <= v.length; i += width) out.push(v.slice(i, i + width));
  return out;
}

const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const LEGS = ['send → socket', 'socket → parse', 'parse → handler', 'handler', 'handler → write', 'write → reply', 'total'] as const;

interface Legs {
  n: number;
  matched: number;
  p50: Record<string, number>;
  lines: string[];
  queued: number;
}

function analyze(clientFile: string, responderFile: string): Legs {
  const c = rowsOf(clientFile, 2);
  const r = rowsOf(responderFile, 5); // socket read, parse, handler entry, handler exit, socket write
  let best = { k: 0, ok: -1 };
  for (let k = -r.length; k <= c.length; k++) {
    let ok = 0;
    for (let j = 0; j < r.length; j += 97) {
      const i = j + k;
      if (i >= 0 && i < c.length && c[i]![0]! <= r[j]![2]! && r[j]![2]! <= c[i]![1]!) ok++;
    }
    if (ok > best.ok) best = { k, ok };
  }
  const legs = LEGS.map(() => [] as number[]);
  let queued = 0;
  let n = 0;
  for (let j = 0; j < r.length; j++) {
    const i = j + best.k;
    if (i < 0 || i >= c.length) continue;
    const [s, e] = c[i]! as [number, number];
    const [d, q, a, b, w] = r[j]! as [number, number, number, number, number];
    if (!(s <= d && d <= q && q <= a && a <= b && b <= w && w <= e)) continue;
    n++;
    // Queued: its bytes were read before the previous request's handler had finished.
    if (j > 0 && d < r[j - 1]![3]!) queued++;
    [d - s, q - d, a - q, b - a, w - b, e - w, e - s].forEach((x, k) => legs[k]!.push(x / 1000));
  }
  const p50: Record<string, number> = {};
  const lines = LEGS.map((name, k) => {
    const s = legs[k]!.sort((x, y) => x - y);
    p50[name] = pct(s, 50);
    const mean = s.reduce((x, y) => x + y, 0) / s.length;
    return `    ${name.padEnd(16)} p25 ${pct(s, 25).toFixed(0).padStart(6)}  p50 ${pct(s, 50).toFixed(0).padStart(6)}  p75 ${pct(s, 75).toFixed(0).padStart(6)}  p90 ${pct(s, 90).toFixed(0).padStart(6)}  mean ${mean.toFixed(0).padStart(6)}`;
  });
  return { n: c.length, matched: n, p50, lines, queued };
}

/** How the benchmark spaced its sends: shares of the gaps between consecutive sends (µs bands). */
function sendGaps(clientFile: string): string {
  const c = rowsOf(clientFile, 2);
  const gaps: number[] = [];
  for (let i = 1; i < c.length; i++) gaps.push((c[i]![0]! - c[i - 1]![0]!) / 1000);
  const share = (lo: number, hi: number): string => `${((100 * gaps.filter((g) => g >= lo && g < hi).length) / gaps.length).toFixed(1)}%`;
  return `under 100 µs ${share(-Infinity, 100)}, 0.9–1.1 ms ${share(900, 1100)}, 1.5–2.1 ms ${share(1500, 2100)}`;
}

const indexerFile = files.find((f) => f.startsWith('indexer-'));
for (const cf of files.filter((f) => f.startsWith('client-bench_echo_')).sort()) {
  // client-bench_echo_<enc>_<pid>-<enc>-<rate>.txt ↔ echo-bench_echo_<enc>_<pid>-<echo pid>.txt and the indexer's client file.
  const m = /^client-(bench_echo_[a-z]+_\d+)-([a-z]+)-(\d+)\.txt$/.exec(cf);
  if (m === null) continue;
  const [, echoSubject, enc, rate] = m;
  const echoFile = files.find((f) => f.startsWith(`echo-${echoSubject}-`));
  const observeClient = files.find((f) => f.startsWith('client-vantage_') && f.endsWith(`-${enc}-${rate}.txt`));
  if (echoFile === undefined || observeClient === undefined || indexerFile === undefined) continue;
  const e = analyze(cf, echoFile);
  const o = analyze(observeClient, indexerFile);
  console.log(`${rate} req/s ${enc}: per request, µs (requests with every stamp in order: echo ${e.matched}/${e.n}, indexer ${o.matched}/${o.n})`);
  console.log(`  gaps between the benchmark's sends: to the echo ${sendGaps(cf)}; to the indexer ${sendGaps(observeClient)}`);
  console.log('  echo');
  for (const l of e.lines) console.log(l);
  console.log(`    queued behind the previous request: ${((100 * e.queued) / e.matched).toFixed(1)}%`);
  console.log('  indexer');
  for (const l of o.lines) console.log(l);
  console.log(`    queued behind the previous request: ${((100 * o.queued) / o.matched).toFixed(1)}%`);
  console.log(`  indexer − echo, p50 of each: ${LEGS.map((l) => `${l} ${(o.p50[l]! - e.p50[l]!).toFixed(0)}`).join(' | ')}`);
}
