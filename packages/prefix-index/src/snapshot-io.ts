/**
 * The snapshot image (README.md, "Snapshot format (version 1)") and its little-endian byte writer
 * and reader. Typed arrays are copied as raw bytes (the host is little-endian; @vantage/hashing
 * refuses to load otherwise), so a 100 MB index snapshots at memcpy speed. The tree travels as a
 * dump, what the index also rebuilds itself from in a compaction: positions in preorder (a parent
 * before its children, a chain a run of consecutive positions), then each publisher's entries.
 */
import { xxh3_64 } from '@vantage/hashing';
import type { WorkerId } from '@vantage/types';
import type { IndexCounters, SuspectInfo, SuspectReason } from './types';

export class SnapshotError extends Error {
  readonly code: 'bad_magic' | 'unsupported_version' | 'corrupt';
  constructor(code: SnapshotError['code'], message: string) {
    super(message);
    this.name = 'SnapshotError';
    this.code = code;
  }
}

/** An image whose checksum is right but whose content is not. */
export function corrupt(why: string): never {
  throw new SnapshotError('corrupt', `snapshot is inconsistent: ${why}`);
}

/** Little-endian writes into a buffer of the image's exact size (`writeImage` computes it up front). */
class ByteWriter {
  readonly buf: Uint8Array;
  private readonly view: DataView;
  length = 0;

  constructor(size: number) {
    this.buf = new Uint8Array(size);
    this.view = new DataView(this.buf.buffer);
  }
  u8(v: number): void {
    this.view.setUint8(this.length, v);
    this.length += 1;
  }
  u32(v: number): void {
    this.view.setUint32(this.length, v >>> 0, true);
    this.length += 4;
  }
  u64(v: bigint): void {
    this.view.setBigUint64(this.length, v, true);
    this.length += 8;
  }
  f64(v: number): void {
    this.view.setFloat64(this.length, v, true);
    this.length += 8;
  }
  bytes(src: ArrayBufferView): void {
    this.buf.set(new Uint8Array(src.buffer, src.byteOffset, src.byteLength), this.length);
    this.length += src.byteLength;
  }
}

class ByteReader {
  private readonly view: DataView;
  pos: number;
  constructor(
    private readonly buf: Uint8Array,
    start: number,
    private readonly end: number,
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    this.pos = start;
  }
  private need(n: number): void {
    if (this.pos + n > this.end) throw new SnapshotError('corrupt', `snapshot truncated at byte ${this.pos}`);
  }
  u8(): number {
    this.need(1);
    return this.view.getUint8(this.pos++);
  }
  u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  u64(): bigint {
    this.need(8);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    return v;
  }
  f64(): number {
    this.need(8);
    const v = this.view.getFloat64(this.pos, true);
    this.pos += 8;
    return v;
  }
  /** Copy `count` elements into a fresh (aligned) typed array. */
  u32Array(count: number): Uint32Array {
    const n = count * 4;
    this.need(n);
    const out = new Uint32Array(count);
    new Uint8Array(out.buffer).set(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return out;
  }
  u8Array(count: number): Uint8Array {
    this.need(count);
    const out = this.buf.slice(this.pos, this.pos + count);
    this.pos += count;
    return out;
  }
  i32Array(count: number): Int32Array {
    const u = this.u32Array(count);
    return new Int32Array(u.buffer);
  }
  done(): boolean {
    return this.pos === this.end;
  }
}

/** A position's parent: the root; or none, it hangs from nothing (an unknown parent, or one that left the tree). */
export const ROOT_REF = -1;
export const DETACHED_REF = -2;

export interface PublisherEntries {
  readonly idLo: Int32Array;
  readonly idHi: Int32Array;
  readonly pos: Int32Array;
  /** Low four bits: the id's tiers; high four: the publisher's tier bits at the position. */
  readonly tiers: Uint8Array;
}

export interface TreeDump {
  /** Positions: parent (an earlier position, ROOT_REF or DETACHED_REF) and local hash halves. */
  readonly parent: Int32Array;
  readonly lo: Int32Array;
  readonly hi: Int32Array;
  /** One per publisher, in publisher order. */
  readonly entries: PublisherEntries[];
}

const SNAPSHOT_MAGIC = 0x58495056; // "VPIX" read as a little-endian u32
/** The one image version this build writes and reads. */
export const SNAPSHOT_VERSION = 1;
const HEADER_BYTES = 4 + 4 + 4 + 8; // magic, version, payload length, xxh3-64 of payload
const REASONS: readonly SuspectReason[] = ['unknown_parent', 'event_gap', 'missed_start'];
const NTIERS = 4;
/** A publisher head: worker, dp rank, slot, flags, last event id and time, suspect reason, since and incidents, tier counts. */
const HEAD_BYTES = 8 + 4 + 4 + 1 + 8 + 8 + 1 + 8 + 4 + 4 * NTIERS;
/** The counters an image holds as f64, in image order; `missedEvents` follows them as a u64. */
const F64_COUNTERS = [
  'eventsApplied', 'duplicates', 'gaps', 'unknownParents', 'unknownRemovals',
  'blocksStored', 'blocksRemoved', 'clears', 'missedStarts',
] as const;

/** A publisher without its blocks, as an image holds it. */
export interface PublisherHead {
  readonly workerId: WorkerId;
  readonly dpRank: number;
  readonly slot: number;
  lastEventId: bigint | null;
  /** True until the first event: an id above 1 then means history was missed. */
  expectStart: boolean;
  suspect: SuspectInfo | null;
  lastEventMs: number | null;
  /** Entries holding each tier. */
  readonly tierBlocks: Uint32Array;
}

interface Image {
  readonly blockSize: number;
  readonly counters: IndexCounters;
  readonly heads: PublisherHead[];
  readonly tree: TreeDump;
}

/** The image: header, block size, counters, publisher heads, then the tree (positions, then each publisher's entries). */
export function writeImage(blockSize: number, c: IndexCounters, heads: readonly PublisherHead[], d: TreeDump): Uint8Array {
  let size = HEADER_BYTES + 4 + 8 * F64_COUNTERS.length + 8 + 4 + heads.length * HEAD_BYTES + 4 + 12 * d.parent.length;
  for (const e of d.entries) size += 4 + 13 * e.pos.length;
  const w = new ByteWriter(size);
  w.u32(SNAPSHOT_MAGIC);
  w.u32(SNAPSHOT_VERSION);
  w.u32(0); // payload length and checksum: set at the end
  w.u64(0n);
  w.u32(blockSize);
  for (const k of F64_COUNTERS) w.f64(c[k]);
  w.u64(c.missedEvents);
  w.u32(heads.length);
  for (const p of heads) {
    w.u64(p.workerId);
    w.u32(p.dpRank);
    w.u32(p.slot);
    w.u8((p.lastEventId !== null ? 1 : 0) | (p.expectStart ? 2 : 0) | (p.suspect !== null ? 4 : 0) | (p.lastEventMs !== null ? 8 : 0));
    w.u64(p.lastEventId ?? 0n);
    w.f64(p.lastEventMs ?? 0);
    w.u8(p.suspect === null ? 0 : REASONS.indexOf(p.suspect.reason));
    w.f64(p.suspect?.sinceMs ?? 0);
    w.u32(p.suspect?.incidents ?? 0);
    w.bytes(p.tierBlocks);
  }
  w.u32(d.parent.length);
  w.bytes(d.parent);
  w.bytes(d.lo);
  w.bytes(d.hi);
  for (const e of d.entries) {
    w.u32(e.pos.length);
    w.bytes(e.idLo);
    w.bytes(e.idHi);
    w.bytes(e.pos);
    w.bytes(e.tiers);
  }
  // The size above must match what was written: short, a write throws; long, the image would end in zeros.
  if (w.length !== size) throw new Error(`snapshot image: wrote ${w.length} bytes of ${size}`);
  const out = w.buf;
  const dv = new DataView(out.buffer);
  dv.setUint32(8, out.length - HEADER_BYTES, true);
  dv.setBigUint64(12, xxh3_64(out.subarray(HEADER_BYTES)), true);
  return out;
}

/**
 * What `writeImage` wrote, its header, version and checksum checked, and every reference of its tree.
 * Throws SnapshotError: `bad_magic`, `unsupported_version` or `corrupt`.
 */
export function readImage(bytes: Uint8Array): Image {
  if (bytes.length < HEADER_BYTES) throw new SnapshotError('bad_magic', 'not a prefix-index snapshot (too short)');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dv.getUint32(0, true) !== SNAPSHOT_MAGIC) throw new SnapshotError('bad_magic', 'not a prefix-index snapshot (bad magic)');
  const version = dv.getUint32(4, true);
  if (version !== SNAPSHOT_VERSION) {
    throw new SnapshotError('unsupported_version', `prefix-index snapshot version ${version} is not supported (this build reads version ${SNAPSHOT_VERSION})`);
  }
  const len = dv.getUint32(8, true);
  if (HEADER_BYTES + len !== bytes.length) {
    throw new SnapshotError('corrupt', `snapshot length ${bytes.length} does not match its header (${HEADER_BYTES + len})`);
  }
  if (xxh3_64(bytes.subarray(HEADER_BYTES)) !== dv.getBigUint64(12, true)) throw new SnapshotError('corrupt', 'snapshot checksum mismatch');
  const r = new ByteReader(bytes, HEADER_BYTES, bytes.length);
  const blockSize = r.u32();
  const counters = {} as IndexCounters;
  for (const k of F64_COUNTERS) counters[k] = r.f64();
  counters.missedEvents = r.u64();
  const np = r.u32();
  if (np > 1 << 20) corrupt(`${np} publishers`);
  const heads: PublisherHead[] = [];
  for (let i = 0; i < np; i++) {
    const workerId = r.u64() as WorkerId;
    const dpRank = r.u32();
    const slot = r.u32();
    const flags = r.u8();
    const lastEventId = r.u64();
    const lastEventMs = r.f64();
    const reason = REASONS[r.u8()];
    const sinceMs = r.f64();
    const incidents = r.u32();
    if ((flags & 4) !== 0 && reason === undefined) corrupt('unknown suspect reason');
    heads.push({
      workerId,
      dpRank,
      slot,
      lastEventId: (flags & 1) !== 0 ? lastEventId : null,
      expectStart: (flags & 2) !== 0,
      suspect: (flags & 4) !== 0 ? { reason: reason!, sinceMs, incidents } : null,
      lastEventMs: (flags & 8) !== 0 ? lastEventMs : null,
      tierBlocks: r.u32Array(NTIERS),
    });
  }
  const n = r.u32();
  if (n > 1 << 30) corrupt(`position count ${n}`);
  const parent = r.i32Array(n);
  const lo = r.i32Array(n);
  const hi = r.i32Array(n);
  for (let i = 0; i < n; i++) {
    const p = parent[i]!;
    if (p !== ROOT_REF && p !== DETACHED_REF && (p < 0 || p >= i)) corrupt(`position ${i} has parent ${p}`);
  }
  const entries: PublisherEntries[] = [];
  for (let j = 0; j < np; j++) {
    const m = r.u32();
    if (m > 1 << 28) corrupt(`publisher ${j} has ${m} entries`);
    const idLo = r.i32Array(m);
    const idHi = r.i32Array(m);
    const pos = r.i32Array(m);
    const tiers = r.u8Array(m);
    for (let k = 0; k < m; k++) {
      if (pos[k]! < 0 || pos[k]! >= n) corrupt(`publisher ${j} entry ${k} names position ${pos[k]}`);
      if ((tiers[k]! & 15) === 0) corrupt(`publisher ${j} entry ${k} has no tier`);
    }
    entries.push({ idLo, idHi, pos, tiers });
  }
  if (!r.done()) corrupt('trailing bytes');
  return { blockSize, counters, heads, tree: { parent, lo, hi, entries } };
}
