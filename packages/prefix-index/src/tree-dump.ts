/**
 * The index's tree written out as positions and entries: what a snapshot holds and what the index
 * rebuilds itself from (a restore, and a compaction into fresh tight tables). Positions are in
 * preorder, so a parent comes before its children and a chain is a run of consecutive positions.
 * What survives and what is rebuilt: README.md, "Snapshot format (version 1)".
 */
import { K_VAL, SLOT } from './ext-map';
import { grow } from './growable';
import { u64From } from './hash32';

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

/** Positions appended in preorder (a growable struct of arrays). */
export class PositionList {
  parent: Int32Array = new Int32Array(1024);
  lo: Int32Array = new Int32Array(1024);
  hi: Int32Array = new Int32Array(1024);
  length = 0;

  push(parent: number, lo: number, hi: number): number {
    if (this.length === this.parent.length) {
      const n = this.length + 1;
      this.parent = grow(this.parent, n);
      this.lo = grow(this.lo, n);
      this.hi = grow(this.hi, n);
    }
    const i = this.length++;
    this.parent[i] = parent;
    this.lo[i] = lo;
    this.hi[i] = hi;
    return i;
  }

  finish(entries: PublisherEntries[]): TreeDump {
    const n = this.length;
    return { parent: this.parent.slice(0, n), lo: this.lo.slice(0, n), hi: this.hi.slice(0, n), entries };
  }
}

/**
 * A publisher's entries from its block-id table (ext-map.ts): `t` holds [keyLo, keyHi, value] slots; `value`
 * splits into (where, tiers) with `where` the tree's position, mapped to a dump position by
 * `posOf` (-1: not in the dump, which a consistent index never has); `bitsOf(where, tiers)` gives
 * the publisher's tier bits at `where` (fewer than its ids' tiers there once one of several ids of
 * a block was removed: Dynamo then drops the worker from the block).
 */
export function entriesOf(
  t: Int32Array,
  size: number,
  valBits: number,
  posOf: Int32Array,
  bitsOf: (where: number, tiers: number) => number,
): PublisherEntries {
  const idLo = new Int32Array(size);
  const idHi = new Int32Array(size);
  const pos = new Int32Array(size);
  const tiers = new Uint8Array(size);
  const mask = (1 << valBits) - 1;
  let k = 0;
  for (let b = 0; b < t.length; b += SLOT) {
    const v = t[b + K_VAL]!;
    if (v === 0) continue;
    const p = posOf[v & mask]!;
    if (p < 0) throw new Error(`internal: block-id entry names ${v & mask}, which is not in the tree dump`);
    idLo[k] = t[b]!;
    idHi[k] = t[b + 1]!;
    pos[k] = p;
    tiers[k] = (v >>> valBits) | (bitsOf(v & mask, v >>> valBits) << 4);
    k++;
  }
  if (k !== size) throw new Error(`internal: block-id table holds ${k} entries, its size says ${size}`);
  return { idLo, idHi, pos, tiers };
}

/** Entry k's block id as a u64. */
export function idOf(e: PublisherEntries, k: number): bigint {
  return u64From(e.idLo[k]!, e.idHi[k]!);
}
