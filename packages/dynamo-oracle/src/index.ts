/**
 * @vantage/dynamo-oracle (test tooling, never imported by product code): Dynamo's own code as the
 * independent implementation our differential tests and `npm run bench:index` check against. A
 * small Rust program (`rust/`) over the published `dynamo-kv-router` crate reads the files this
 * module writes: its RadixTree answers match queries after an event stream, its serde encoders
 * write wire messages, its hashing hashes token blocks, and in its timed mode its indexers replay
 * the benchmark's streams on one thread (README).
 *
 * BENCH_DYNAMO (the benchmark's `prepareOracle`): `auto` (default) runs the oracle when `cargo` is
 * on PATH and skips it, saying why, otherwise or when its build fails; `1` makes either a failure;
 * `0` skips it. The build (`scripts/ensure-dynamo-oracle.sh`) goes to `.infra/cargo-target`
 * (ignored; the first one takes a few minutes on 2 cores).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KvEvent, StorageTier, WorkerId } from '@vantage/types';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Builds the oracle (idempotent) into TARGET: the same script `npm test` runs first. */
const ENSURE = join(ROOT, 'packages/dynamo-oracle/scripts/ensure-dynamo-oracle.sh');
const TARGET = join(ROOT, '.infra/cargo-target');
const BIN = join(TARGET, 'release/vantage-dynamo-oracle');
const WORK = join(ROOT, '.infra/bench/dynamo-oracle');

const TIERS: Readonly<Record<StorageTier, number>> = { device: 0, host_pinned: 1, disk: 2, external: 3 };
const KINDS = { stored: 1, removed: 2, cleared: 3 } as const;

/** A worker (every dp rank) or one dp rank leaving the pool: `removeWorker`, `removeDpRank`. */
export type Leave =
  | { readonly leave: 'worker'; readonly workerId: WorkerId }
  | { readonly leave: 'dp_rank'; readonly workerId: WorkerId; readonly dpRank: number };

/**
 * The event file `rust/src/main.rs` reads (its `read_events` has the layout), KV events and
 * workers leaving in one order: every id and hash written as the u64 it is, from the
 * BigUint64Arrays, never through a JS number.
 */
export function encodeEvents(events: ReadonlyArray<KvEvent | Leave>): Uint8Array {
  let bytes = 8;
  for (const e of events) {
    if ('leave' in e) {
      bytes += 36;
      continue;
    }
    const d = e.data;
    bytes += 36 + (d.kind === 'stored' ? 16 * d.blockHashes.length : d.kind === 'removed' ? 8 * d.blockHashes.length : 0);
  }
  const buf = new Uint8Array(bytes);
  const v = new DataView(buf.buffer);
  buf.set([0x56, 0x45, 0x56, 0x31], 0); // "VEV1"
  v.setUint32(4, events.length, true);
  let at = 8;
  for (const e of events) {
    if ('leave' in e) {
      v.setUint8(at, e.leave === 'worker' ? 4 : 5);
      v.setUint32(at + 4, e.leave === 'dp_rank' ? e.dpRank : 0, true);
      v.setBigUint64(at + 8, e.workerId, true);
      at += 36; // no event id, parent or blocks: the count stays 0
      continue;
    }
    const d = e.data;
    v.setUint8(at, KINDS[d.kind]);
    v.setUint8(at + 1, TIERS[e.storageTier]);
    const parent = d.kind === 'stored' ? d.parentHash : null;
    v.setUint8(at + 2, parent === null ? 0 : 1);
    v.setUint32(at + 4, e.dpRank, true);
    v.setBigUint64(at + 8, e.workerId, true);
    v.setBigUint64(at + 16, e.eventId, true);
    v.setBigUint64(at + 24, parent ?? 0n, true);
    v.setUint32(at + 32, d.kind === 'cleared' ? 0 : d.blockHashes.length, true);
    at += 36;
    if (d.kind === 'stored') {
      for (let i = 0; i < d.blockHashes.length; i++) {
        v.setBigUint64(at, d.blockHashes[i]!, true);
        v.setBigUint64(at + 8, d.tokensHashes[i]!, true);
        at += 16;
      }
    } else if (d.kind === 'removed') {
      for (let i = 0; i < d.blockHashes.length; i++, at += 8) v.setBigUint64(at, d.blockHashes[i]!, true);
    }
  }
  if (at !== bytes) throw new Error(`event file: wrote ${at} of ${bytes} bytes`);
  return buf;
}

/** How long a test should allow `oracleBinary` (the first build fetches crates and compiles). */
export const ORACLE_BUILD_TIMEOUT_MS = 900_000;

/**
 * The oracle's binary for the tests that check our code against Dynamo's, built first if need be
 * (idempotent: about a second once built). Throws, with cargo's output, if it cannot be built.
 */
export function oracleBinary(): string {
  return execFileSync('bash', [ENSURE], { encoding: 'utf8', timeout: ORACLE_BUILD_TIMEOUT_MS }).trim().split('\n').pop() ?? '';
}

/** Queries: "VEQ1", u32 count; per query u32 length then its local block hashes as u64. */
export function encodeQueries(queries: readonly BigUint64Array[]): Uint8Array {
  const bytes = 8 + queries.reduce((a, q) => a + 4 + 8 * q.length, 0);
  const buf = new Uint8Array(bytes);
  const v = new DataView(buf.buffer);
  buf.set([0x56, 0x45, 0x51, 0x31], 0); // "VEQ1"
  v.setUint32(4, queries.length, true);
  let at = 8;
  for (const q of queries) {
    v.setUint32(at, q.length, true);
    at += 4;
    for (let i = 0; i < q.length; i++, at += 8) v.setBigUint64(at, q[i]!, true);
  }
  return buf;
}

/** One query's answer from Dynamo's RadixTree: "worker:dpRank:score" for every worker it scores. */
export type OracleAnswer = string[];

/** What `deviceOverlap` reads of a prefix-index match answer. */
export interface MatchLike {
  readonly workers: readonly { readonly workerId: bigint; readonly dpRank: number; readonly deviceBlocks: number }[];
}

/**
 * Our match in the shape of an `OracleAnswer`: "worker:dpRank:deviceBlocks" for every publisher
 * with at least one leading device block (Dynamo scores only those), sorted.
 */
export function deviceOverlap(match: MatchLike): OracleAnswer {
  return match.workers
    .filter((m) => m.deviceBlocks > 0)
    .map((m) => `${m.workerId}:${m.dpRank}:${m.deviceBlocks}`)
    .sort();
}

/**
 * The answers file the oracle writes: "VEA1", u32 count; per query u32 entries, then per entry u64
 * worker id, u32 dp rank, u32 score (leading device-tier blocks matched).
 */
export function decodeAnswers(buf: Uint8Array): OracleAnswer[] {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (String.fromCharCode(...buf.subarray(0, 4)) !== 'VEA1') throw new Error('oracle answers: bad magic');
  const n = v.getUint32(4, true);
  const out: OracleAnswer[] = [];
  let at = 8;
  for (let i = 0; i < n; i++) {
    const k = v.getUint32(at, true);
    at += 4;
    const a: string[] = [];
    for (let j = 0; j < k; j++, at += 16) a.push(`${v.getBigUint64(at, true)}:${v.getUint32(at + 8, true)}:${v.getUint32(at + 12, true)}`);
    out.push(a.sort());
  }
  if (at !== buf.length) throw new Error('oracle answers: trailing bytes');
  return out;
}

/** One scenario's figures from the oracle's timed mode (its JSON line). */
export interface OracleScenario {
  readonly [key: string]: unknown;
  readonly scenario: string;
  readonly block_ops: number;
  readonly radix_tree_block_ops_per_s: number;
  readonly positional_block_ops_per_s: number;
  readonly concurrent_radix_tree_compressed_block_ops_per_s: number;
  readonly radix_tree_rejected_events: number;
  readonly positional_rejected_events: number;
  readonly concurrent_radix_tree_compressed_rejected_events: number;
}

/** The oracle's timed mode, for the benchmark. */
export interface Oracle {
  /** Why the oracle does not run (BENCH_DYNAMO=0, no cargo, a failed build), or null when it does. */
  readonly skipped: string | null;
  /** Times `reps` passes of each of Dynamo's indexers over `events`; RadixTree answers `queries`, best of `rounds`. */
  run(label: string, events: readonly KvEvent[], queries: readonly BigUint64Array[], reps: number, rounds: number): { scenario: OracleScenario; answers: OracleAnswer[] };
}

/** Builds the oracle (once, with cargo's progress on stderr) when BENCH_DYNAMO allows it. */
export function prepareOracle(log: (msg: string) => void): Oracle {
  const mode = process.env.BENCH_DYNAMO ?? 'auto';
  const off = (why: string): Oracle => {
    if (mode === '1') throw new Error(`BENCH_DYNAMO=1: ${why}`);
    log(`Dynamo oracle skipped: ${why}`);
    return { skipped: why, run: () => { throw new Error(why); } };
  };
  if (mode === '0') return off('BENCH_DYNAMO=0');
  if (spawnSync('cargo', ['--version'], { stdio: 'ignore' }).status !== 0) return off('cargo is not on PATH');
  log(`building the Dynamo oracle (dynamo-kv-router from crates.io) into ${TARGET}${existsSync(BIN) ? '' : '; the first build takes a few minutes'}`);
  const b = spawnSync('bash', [ENSURE], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (b.status !== 0) return off(`${ENSURE} failed (exit ${b.status ?? b.signal})`);
  mkdirSync(WORK, { recursive: true });
  return {
    skipped: null,
    run(label, events, queries, reps, rounds) {
      const base = join(WORK, label.replace(/[^A-Za-z0-9_-]/g, '_'));
      writeFileSync(`${base}.events`, encodeEvents(events));
      writeFileSync(`${base}.queries`, encodeQueries(queries));
      const r = spawnSync(BIN, ['--reps', String(reps), '--rounds', String(rounds), '--queries', `${base}.queries`, '--answers', `${base}.answers`, `${label}=${base}.events`], {
        stdio: ['ignore', 'pipe', 'inherit'],
        encoding: 'utf8',
        maxBuffer: 1 << 24,
      });
      if (r.status !== 0) throw new Error(`Dynamo oracle failed on ${label} (exit ${r.status ?? r.signal})`);
      const line = r.stdout.trim().split('\n').pop()!;
      const scenario = JSON.parse(line) as OracleScenario;
      // Each indexer must have applied every event, or the rates compare different work.
      for (const k of ['radix_tree', 'positional', 'concurrent_radix_tree_compressed'] as const) {
        const n = scenario[`${k}_rejected_events`];
        if (n !== 0) throw new Error(`Dynamo oracle on ${label}: ${k} rejected ${n} events`);
      }
      return { scenario, answers: decodeAnswers(readFileSync(`${base}.answers`)) };
    },
  };
}
