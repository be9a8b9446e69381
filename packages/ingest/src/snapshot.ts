/**
 * The indexer's snapshot container, stored as one object per pool in the
 * JetStream object store:
 *
 *   "VIXS" | u16 version (1) | u32 header length | header (UTF-8 JSON) | index snapshot bytes
 *
 * The header says which pool, when it was taken, which JetStream stream
 * position it covers (JetStream mode) and the dynamic worker registrations; the
 * index bytes are @vantage/prefix-index's own versioned snapshot. Anything else
 * is refused with a clear error and the service starts empty.
 */
import type { WorkerCapacity } from '@vantage/bookings';

const MAGIC = [0x56, 0x49, 0x58, 0x53]; // "VIXS"
const SNAPSHOT_VERSION = 1;

export interface SnapshotHeader {
  readonly pool: string;
  readonly blockSize: number;
  readonly takenAtMs: number;
  /** Last JetStream stream sequence applied before the snapshot (JetStream mode), else null. */
  readonly streamSeq: number | null;
  readonly registrations: readonly { workerId: string; capacity: WorkerCapacity; ttlMs: number | null }[];
}

export function encodeSnapshot(header: SnapshotHeader, index: Uint8Array): Uint8Array {
  const h = Buffer.from(JSON.stringify(header), 'utf8');
  const out = new Uint8Array(4 + 2 + 4 + h.length + index.length);
  const dv = new DataView(out.buffer);
  out.set(MAGIC, 0);
  dv.setUint16(4, SNAPSHOT_VERSION, true);
  dv.setUint32(6, h.length, true);
  out.set(h, 10);
  out.set(index, 10 + h.length);
  return out;
}

export function decodeSnapshot(bytes: Uint8Array): { header: SnapshotHeader; index: Uint8Array } {
  if (bytes.length < 10 || MAGIC.some((b, i) => bytes[i] !== b)) throw new Error('not an indexer snapshot (bad magic)');
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = dv.getUint16(4, true);
  if (version !== SNAPSHOT_VERSION) throw new Error(`indexer snapshot version ${version} is not supported (expected ${SNAPSHOT_VERSION})`);
  const hl = dv.getUint32(6, true);
  if (10 + hl > bytes.length) throw new Error('indexer snapshot truncated in its header');
  const header = JSON.parse(Buffer.from(bytes.subarray(10, 10 + hl)).toString('utf8')) as SnapshotHeader;
  if (typeof header.pool !== 'string' || typeof header.blockSize !== 'number' || typeof header.takenAtMs !== 'number') {
    throw new Error('indexer snapshot header is malformed');
  }
  return { header, index: bytes.subarray(10 + hl) };
}
